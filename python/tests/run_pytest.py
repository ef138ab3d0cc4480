"""ctest entry of the Python suites (python/CMakeLists.txt): `--cpu` runs the tests that need no GPU,
`--gpu` the ones marked `gpu`. Exits 77 (ctest's skip) with the reason when pytest or torch is missing,
or, for --gpu, when torch sees no CUDA device."""
import os
import sys


def main():
    which, tests = sys.argv[1], sys.argv[2]
    ext = os.environ.get("DGPS_PYTHON_EXTENSION")
    if ext and not os.path.isfile(ext):
        # e.g. scripts/gpu_suite.sh builds only the C++ GPU targets; scripts/gpu_python.sh tests the package
        print(f"SKIP: the extension {ext} was not built (build target _dgps, or run scripts/gpu_python.sh)")
        return 77
    try:
        import pytest
    except ImportError:
        print("SKIP: pytest is not installed (Debian: python3-pytest; scripts/install_deps.sh installs it)")
        return 77
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed (Debian: python3-torch; scripts/install_deps.sh installs it)")
        return 77
    if which == "--gpu" and not torch.cuda.is_available():
        print(f"SKIP: torch {torch.__version__} sees no CUDA device; the Python GPU tests need one")
        return 77
    marker = "gpu" if which == "--gpu" else "not gpu"
    args = [tests, "-m", marker, "-q", "-rs", "-p", "no:cacheprovider", "-s"] + sys.argv[3:]
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main())
