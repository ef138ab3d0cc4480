// dgps-jit-check PACKAGE... [--arch sm_90a] [--all-configs] [--square] [--config k=v,...] [--jobs N] [--cache-dir D]
//                 [--compile-timeout SECONDS]
// NVRTC compile-only check used by CI: prints registers, stack and spills per kernel; exit 1 on any
// compile failure, spill or local memory.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "JitCheck.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--compile-one") return dgps::runJitCheckChild(argc, argv);
  dgps::JitCheckOptions o;
  CLI::App app{"NVRTC compile-only check of DGPS packages: fails on compile errors, spills or local memory"};
  app.add_option("packages", o.packages, "package folders (generated/<name>)")->required();
  app.add_option("--arch", o.arch, "target architecture (sm_90a, sm_80, compute_90, ...)");
  app.add_flag("--all-configs", o.all_configs, "check every point of the package's tunables");
  app.add_option("--config", o.config, "tile overrides on default_config, e.g. block_v=32,warps=8");
  app.add_flag("--square", o.square, "only key dim == value dim pairs");
  app.add_option("--jobs,-j", o.jobs, "parallel compiles");
  app.add_option("--compile-timeout", o.compile_timeout_s,
                 "seconds one NVRTC compile may take before it is killed and reported (default 300)");
  app.add_option("--cache-dir", o.cache_dir, "binary cache folder (default $DGPS_CACHE_DIR or ~/.cache/dgps)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return dgps::runJitCheck(o, std::cout, std::cerr);
  } catch (...) {
    std::cerr << "dgps-jit-check: internal error\n";
    return 1;
  }
}
