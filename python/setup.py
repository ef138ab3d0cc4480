"""Builds the dgps extension with CMake (python/CMakeLists.txt) and packs it with the Python sources,
the shipped packages (generated/), the specs and the dgps-tune-trial helper.

Environment:
  DGPS_SOURCE_DIR        the repository root (default: the folder above this file)
  DGPS_PYTHON_BUILD_DIR  CMake build folder (default <root>/build-python, kept between installs)
  DGPS_CMAKE_ARGS        extra CMake arguments, e.g. "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  DGPS_JOBS              parallel build jobs (default: all cores)
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def repository_root():
    root = os.environ.get("DGPS_SOURCE_DIR") or os.path.dirname(HERE)
    if not os.path.isfile(os.path.join(root, "runtime", "CMakeLists.txt")):
        sys.exit(f"dgps setup: {root} is not the DGPS checkout (no runtime/CMakeLists.txt); build from the "
                 "checkout (pip install ./python) or set DGPS_SOURCE_DIR")
    return root


def cmake_args(root, build):
    args = ["cmake", "-S", root, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DDGPS_ENABLE_COMPILER=OFF",
            "-DDGPS_ENABLE_TESTS=OFF", "-DDGPS_ENABLE_BENCH=OFF", "-DDGPS_ENABLE_PYTHON=ON",
            "-DDGPS_PYTHON_REQUIRED=ON",
            f"-DPython_EXECUTABLE={sys.executable}"]
    try:  # pybind11 from pip (GPU machine) has its CMake files inside the Python package
        import pybind11
        args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
    except ImportError:
        pass  # Debian's pybind11-dev: found by CMake in /usr/lib/cmake
    if shutil.which("ninja") and not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        args += ["-G", "Ninja"]
    return args + shlex.split(os.environ.get("DGPS_CMAKE_ARGS", ""))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        root = repository_root()
        build = os.environ.get("DGPS_PYTHON_BUILD_DIR") or os.path.join(root, "build-python")
        subprocess.run(cmake_args(root, build), check=True)
        jobs = os.environ.get("DGPS_JOBS") or str(os.cpu_count() or 2)
        subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "_dgps", "dgps-tune-trial"], check=True)
        module_dir = os.path.join(build, "python", "module")
        built = [f for f in os.listdir(module_dir) if f.startswith("_dgps.") and f.endswith((".so", ".pyd"))]
        if len(built) != 1:
            sys.exit(f"dgps setup: expected one _dgps module in {module_dir}, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(module_dir, built[0]), target)
        package_dir = os.path.dirname(target)
        self._bundle(root, build, package_dir)

    @staticmethod
    def _bundle(root, build, package_dir):
        """dgps.load("pgdn") and dgps.tune work from the installed package alone."""
        for kind in ("generated", "specs"):
            dst = os.path.join(package_dir, "_data", kind)
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(os.path.join(root, kind), dst)
        trial = os.path.join(build, "runtime", "tools", "dgps-tune", "dgps-tune-trial")
        if os.path.isfile(trial):
            os.makedirs(os.path.join(package_dir, "_bin"), exist_ok=True)
            shutil.copy2(trial, os.path.join(package_dir, "_bin", "dgps-tune-trial"))


setup(ext_modules=[Extension("dgps._dgps", sources=[])], cmdclass={"build_ext": CMakeBuild})
