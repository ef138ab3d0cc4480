// `dgpsc tune SPEC --shape B=8,T=4096,H=16,K=128,V=128 [--dtype bf16|f16] [--db PATH] [--device N]
//               [--package-dir DIR] [--cache-dir DIR] [--force] [--in-process] [--quiet]`
//
// Compiles SPEC to a generated package exactly as `dgpsc compile` does (into --package-dir, kept, or a
// temporary folder removed afterwards), then runs the runtime's `dgps-tune` on it with the remaining
// options, and returns its exit status. dgpsc links MLIR and dgps-tune links CUDA/NVRTC; keeping them in
// separate executables keeps LLVM out of the runtime (docs/architecture.md), so the tuning step is a child process.
//
// dgps-tune is looked for, in order: $DGPS_TUNE (an explicit path, never replaced by another copy);
// next to the dgpsc executable; the same build tree's runtime/tools/dgps-tune/dgps-tune; $PATH. When it
// is missing, dgpsc says where it looked and how to get it (build with DGPS_ENABLE_RUNTIME=ON).
// Note: tuning needs the GPU it tunes for. On a deployment machine without MLIR, run dgps-tune on the
// committed generated/<name> package: it is the same source, so its records apply to both.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace dgps {
namespace dgpsc {

struct TuneArgs {
  std::string spec;
  std::string shape;
  std::string dtype;
  std::string db;
  std::string package_dir;
  std::string cache_dir;
  int device = -1;
  bool force = false;
  bool in_process = false;
  bool quiet = false;
};

/// Registers the `tune` subcommand on `app`, binding its options to `args`.
CLI::App* addTuneSubcommand(CLI::App& app, TuneArgs& args);

/// Compiles with `compile(spec, out_dir)` (0 = success) and runs dgps-tune. Returns the exit status:
/// dgps-tune's, or 1 when compiling fails or dgps-tune cannot be found or started.
int runTune(const TuneArgs& args, const std::function<int(const std::string&, const std::string&)>& compile);

}  // namespace dgpsc
}  // namespace dgps
