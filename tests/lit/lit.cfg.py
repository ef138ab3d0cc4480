# lit configuration of the DGPS compiler tests. Paths come in as --param (tests/lit/CMakeLists.txt):
#   dgps_tools_dir (dgps-opt), dgpsc_dir (dgpsc), llvm_tools_dir (FileCheck, not), specs_dir,
#   exec_root (where lit writes its temporaries).
import os

import lit.formats

config.name = "DGPS"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)


def param(name):
    value = lit_config.params.get(name)
    if not value:
        lit_config.fatal("missing --param %s=... (see tests/lit/CMakeLists.txt)" % name)
    return value


config.test_exec_root = param("exec_root")
tools = param("dgps_tools_dir")
dgpsc_dir = param("dgpsc_dir")
llvm_tools = param("llvm_tools_dir")
config.environment["PATH"] = os.pathsep.join([tools, dgpsc_dir, llvm_tools, config.environment.get("PATH", "")])
config.substitutions.append(("%specs", param("specs_dir")))
config.substitutions.append(("%dgps-opt", os.path.join(tools, "dgps-opt")))
config.substitutions.append(("%dgpsc", os.path.join(dgpsc_dir, "dgpsc")))
config.substitutions.append(("%FileCheck", os.path.join(llvm_tools, "FileCheck")))
