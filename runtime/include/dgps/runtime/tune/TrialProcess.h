// Isolated candidate trials. A kernel that performs an illegal memory access or traps
// kills its CUDA context, and every later CUDA call in that process fails (FLA #727: one bad tile took a
// whole B200 training job down during autotuning). The tuner therefore runs each candidate's *first*
// launches in a separate process, the trial helper `dgps-tune-trial`:
//
//   parent (the tuner, any process, CUDA already initialised or not)
//     └─ posix_spawn(dgps-tune-trial --package P --inputs slice.safetensors --out out.safetensors
//                    --report verdict.txt --config chunk=..,block_v=..,warps=..,stages=..
//                    --device D --cache-dir C [--full-batch B --full-tokens T])
//        child: opens the package, creates its own CUDA context, runs the forward once on the slice
//        inputs with NaN-poisoned outputs, writes the outputs; then (with --full-*) once more on the full
//        shape (inputs tiled from the slice) and counts non-finite outputs; writes a verdict; exits.
//
// Why a spawned helper and not fork(): a forked child cannot use a CUDA context its parent created, and a
// parent that is a user's application (tune-on-first-use) has usually initialised CUDA long before. An
// exec'd helper starts clean. The parent compiles each candidate first (same binary cache folder), so the
// child finds the CUBIN on disk and does not run NVRTC again.
//
// Verdicts: exit 0 + verdict "ok": outputs written, the parent compares them with its float64 reference;
// exit 3 "fault": a CUDA error (illegal address, trap, launch failure); exit 4 "nonfinite": the full-shape
// run left NaN/Inf in an output; exit 5 "error": anything else (launch refused, package unreadable);
// exit 2: bad command line. A signal, or no exit before the deadline (the child is then killed with
// SIGKILL), is reported by the parent as a fault / timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dgps/runtime/TileConfig.h"

namespace dgps {
namespace tune {

constexpr int kTrialExitOk = 0;
constexpr int kTrialExitUsage = 2;
constexpr int kTrialExitFault = 3;
constexpr int kTrialExitNonFinite = 4;
constexpr int kTrialExitError = 5;

/// One isolated trial: the helper's command line.
struct TrialRequest {
  std::string package;    ///< package folder
  std::string inputs;     ///< slice inputs (safetensors, Reference.h names)
  std::string outputs;    ///< where the helper writes the slice outputs (safetensors)
  std::string report;     ///< where the helper writes its verdict: line 1 ok|fault|nonfinite|error, line 2 message
  std::string cache_dir;  ///< binary cache ("" = the default)
  int device = 0;
  TileConfig config;
  std::int64_t full_batch = 0;   ///< > 0: also run once at [full_batch, full_tokens] (inputs tiled)
  std::int64_t full_tokens = 0;
};

/// The helper's arguments for `request` (without the program name).
std::vector<std::string> trialArguments(const TrialRequest& request);

/// The helper's main: parses argv (as trialArguments writes it), runs the trial, writes the verdict and
/// returns the exit code described above. Never throws.
int runTrialHelper(int argc, char** argv);

/// What the parent learnt from one helper run.
struct TrialOutcome {
  enum class Kind { Ok, Fault, NonFinite, Timeout, Error };
  Kind kind = Kind::Error;
  std::string message;  ///< the verdict's message, the signal, or the tail of the helper's log
};

/// Spawns `helper` with `request`, its stdout/stderr going to `log_path`, and waits at most `timeout`
/// (then SIGKILL). Never throws; a helper that cannot be started is Kind::Error.
TrialOutcome runIsolatedTrial(const std::string& helper, const TrialRequest& request, const std::string& log_path,
                              std::chrono::milliseconds timeout);

/// Locates dgps-tune-trial, in order: $DGPS_TUNE_TRIAL (must name an executable file, else nullopt);
/// next to the running executable; the build tree's copy; the install prefix's bin/; each folder of
/// $PATH. `searched` (optional) receives the places tried, for the error message.
std::optional<std::string> findTrialHelper(std::string* searched = nullptr);

}  // namespace tune
}  // namespace dgps
