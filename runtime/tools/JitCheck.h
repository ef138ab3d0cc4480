// dgps-jit-check: NVRTC compile-only check of generated packages. For every package, every input dtype,
// key dim and value dim (and, with all_configs, every point of the tunables), compile kernels.cu for the
// target and read ptxas' resource report; a compile error, a manifest symbol missing from the image,
// spills or any local memory (stack frame) fails the check (docs/math.md §7.5). No GPU is needed.
//
// Each NVRTC compile runs in a child process (this executable again, in its internal --compile-one
// mode, started with the tuner's process spawner) under a time limit, so a source that makes NVRTC run
// away (a macro bomb) fails with "compile of <package> <dtype> K=.. V=.. <config> exceeded N s" instead
// of hanging CI. Sources are checked for includes outside the device library before any compile
// (checkSourceIncludes, Jit.h).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace dgps {

struct JitCheckOptions {
  std::vector<std::string> packages;  ///< package folders
  std::string arch = "sm_90a";
  std::string cache_dir;              ///< "" = default binary cache
  bool all_configs = false;           ///< sweep the whole tuning space, not only default_config
  std::string config;                 ///< "chunk=64,..." overrides on default_config (ignored with all_configs)
  bool square = false;                ///< only K == V pairs (the CI default: the largest pair bounds spills)
  int jobs = 1;                       ///< parallel NVRTC compiles
  double compile_timeout_s = 300;     ///< per-compile limit in seconds (the child is killed after it)
};

/// The internal child mode: `dgps-jit-check --compile-one PACKAGE DTYPE K V CONFIG ARCH CACHE_DIR RESULT`
/// (argv[1] is "--compile-one"). Compiles one variant and writes RESULT: "ok\n<0|1 from cache>\n<log>"
/// or "error\n<message>". Returns 0 or 1. Never throws.
int runJitCheckChild(int argc, char** argv);

/// Runs the check, prints one line per kernel to `out` and problems to `err`. Returns the exit code:
/// 0 all clean, 1 any failure (including an unopenable package). Never throws.
int runJitCheck(const JitCheckOptions& options, std::ostream& out, std::ostream& err);

}  // namespace dgps
