"""Loads the compiled extension ``dgps._dgps``.

An installed package (``pip install ./python``) carries the module next to these files. In a build tree
the tests point ``DGPS_PYTHON_EXTENSION`` at the module the CMake build made (python/CMakeLists.txt),
so the sources are imported from the checkout without installing anything.
"""
import importlib.util
import os
import sys


def _load():
    path = os.environ.get("DGPS_PYTHON_EXTENSION")
    if path:
        if not os.path.isfile(path):
            raise ImportError(f"dgps: DGPS_PYTHON_EXTENSION={path!r} is not a file (expected the built _dgps module)")
        spec = importlib.util.spec_from_file_location("dgps._dgps", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["dgps._dgps"] = module
        return module
    try:
        from . import _dgps  # noqa: F401  (the installed module)
    except ImportError as e:
        raise ImportError(
            "dgps: the compiled extension dgps._dgps is missing; install the package with "
            "`python3 -m pip install --no-build-isolation ./python` from the DGPS checkout "
            f"(or set DGPS_PYTHON_EXTENSION to a built module): {e}") from e
    return _dgps


native = _load()
DgpsError = native.DgpsError
InvalidArgument = native.InvalidArgument
