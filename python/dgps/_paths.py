"""Where shipped packages, specs and tools are found.

``dgps.load("pgdn")`` looks for the package folder ``pgdn`` in, in order: ``$DGPS_GENERATED_DIR``; the
copy of ``generated/`` an installed wheel carries (``dgps/_data/generated``); the ``generated/`` folder
of the checkout these sources live in.
"""
import os
import shutil

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT = os.path.dirname(os.path.dirname(_HERE))  # python/dgps -> repository root


def _candidates(kind):
    env = os.environ.get("DGPS_GENERATED_DIR" if kind == "generated" else "DGPS_SPECS_DIR")
    if env:
        yield env
    yield os.path.join(_HERE, "_data", kind)
    yield os.path.join(_CHECKOUT, kind)


def generated_dirs():
    """Folders that may hold shipped packages, existing ones only, in search order."""
    return [d for d in _candidates("generated") if os.path.isdir(d)]


def find_package_dir(name):
    """The folder of the shipped package ``name``, or None."""
    for d in generated_dirs():
        p = os.path.join(d, name)
        if os.path.isfile(os.path.join(p, "manifest.yaml")):
            return p
    return None


def shipped_names():
    """Names of every shipped package (the first folder that has any wins)."""
    for d in generated_dirs():
        names = sorted(n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n, "manifest.yaml")))
        if names:
            return names
    return []


def find_tool(name, env_var):
    """An executable: $env_var, then the wheel's bundled copy, then $PATH."""
    env = os.environ.get(env_var)
    if env:
        return env if os.access(env, os.X_OK) else None
    bundled = os.path.join(_HERE, "_bin", name)
    if os.access(bundled, os.X_OK):
        return bundled
    return shutil.which(name)
