// What the autotuner needs from a GPU, as an interface, so that the search logic (Autotuner.h) is
// testable on a CPU and the CUDA side plugs in from the runtime.
//
// ============================ NOTE FOR THE RUNTIME INTEGRATOR ============================
// A kernel that performs an illegal memory access kills its CUDA context: every later CUDA call in
// the process fails, so one bad tile would take the user's whole job down (FLA #727: KDA backward
// IMA on B200 during autotuning). The real backend must therefore run each candidate's first launch
// (screen()) in isolation:
//   * preferred: a child process (fork+exec of a small trial helper, or fork *before* the parent
//     initialises CUDA — a forked child cannot use a context created by its parent) that loads the
//     CUBIN, runs once on its own scratch buffers, compares with the trusted result, and reports
//     {status, max_rel_err} through a pipe; a crash, signal or non-zero exit is ScreenResult::Fault,
//     no answer before the deadline is Timeout (kill the child);
//   * or a fresh context (cuCtxCreate) destroyed after the trial, accepting that a sticky error may
//     still poison the primary context on some drivers — then report contextHealthy() honestly.
// Only candidates that passed screen() are timed, in-process. If any call reports Fault and
// contextHealthy() then returns false, the tuner stops using the backend at once, marks the rest
// Skipped, records nothing, and returns an error.
// ===============================================================================================
//
// Every call runs on the backend's own scratch buffers (shape = the ReferenceProblem being tuned, inputs
// drawn randomly, not zeros), never on the caller's tensors.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "dgps/runtime/tuning/TileConfig.h"

namespace dgps::tuning {

/// Outcome of one step of a trial. Anything but Ok removes the candidate from the search.
enum class TrialStatus {
  Ok,
  Pruned,        ///< dropped by the static rules before any trial (Candidates.h); table only.
  CompileError,  ///< NVRTC or linking failed.
  Timeout,       ///< a compile or run did not finish before its deadline.
  Fault,         ///< launch or execution error (illegal address, misaligned access, trap, crash).
  WrongResult,   ///< ran, but the output disagrees with the trusted result (or is not finite).
  Spills,        ///< uses local memory while spill-free candidates exist (docs/math.md §7.5).
  TimingError,   ///< time() failed or returned unusable samples (empty, NaN, negative).
  Skipped,       ///< never tried: the context was lost or the run was cancelled.
};
const char* toString(TrialStatus);

/// Deadline and cancellation for one compile. The backend should stop early (kill its compiler
/// child process, abandon the NVRTC call's result) once `cancel` becomes true or the deadline
/// passes; the driver classifies any compile that returns after its deadline as Timeout anyway.
struct CompileControl {
  std::chrono::steady_clock::time_point deadline;
  const std::atomic<bool>* cancel = nullptr;

  bool cancelled() const {
    return (cancel && cancel->load()) || std::chrono::steady_clock::now() >= deadline;
  }
};

struct CompileResult {
  TrialStatus status = TrialStatus::Ok;  ///< Ok, CompileError or Timeout.
  std::string log;                       ///< compiler log or reason, kept for the final table.
  int registers = -1;                    ///< per thread, CU_FUNC_ATTRIBUTE_NUM_REGS; -1 unknown.
  long long local_bytes = -1;            ///< per thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES; -1 unknown.
};

struct RunResult {
  TrialStatus status = TrialStatus::Ok;  ///< Ok, Fault or Timeout.
  std::string message;
};

struct Validation {
  bool ok = false;           ///< the backend's own verdict against its tolerance.
  double max_rel_err = 0;    ///< max over outputs of |got - want| / max(|want|, floor); NaN if any non-finite.
  std::string message;
};

/// screen() = runOnce() + validate() as one step, so that an isolating backend can do both inside a
/// child process.
struct ScreenResult {
  TrialStatus status = TrialStatus::Ok;  ///< Ok, Fault, Timeout or WrongResult.
  double max_rel_err = 0;
  std::string message;
};

struct TimingResult {
  TrialStatus status = TrialStatus::Ok;  ///< Ok, Fault, Timeout or TimingError.
  std::vector<float> ms;                 ///< one sample per timed repetition, milliseconds.
  std::string message;
};

class TrialBackend {
 public:
  virtual ~TrialBackend() = default;

  /// Compile `config` (NVRTC with the tile as constants) and load it for later calls. Called
  /// concurrently from several threads, one call per config: must be thread-safe.
  virtual CompileResult compile(const TileConfig& config, const CompileControl& control) = 0;

  /// Fill the scratch outputs with a poison pattern (NaN for floats), launch `config` once on the
  /// scratch inputs and synchronise. Must not touch the caller's tensors.
  virtual RunResult runOnce(const TileConfig& config) = 0;

  /// Compare the scratch outputs of the last runOnce(config) against the trusted result (the generic
  /// variant's or a float64 reference computed once per tuning run). Poison left in any output is a
  /// failure.
  virtual Validation validate(const TileConfig& config) = 0;

  /// Time `reps` launches after `warmup` untimed ones; flush L2 (write a buffer larger than L2)
  /// before every timed launch so each measures cold-cache behaviour like the real call.
  virtual TimingResult time(const TileConfig& config, int warmup, int reps) = 0;

  /// First correctness check of a compiled candidate. The default runs runOnce() then validate()
  /// in-process; the real backend overrides it to isolate the trial (see the note above).
  virtual ScreenResult screen(const TileConfig& config);

  /// False once an in-process fault has made the backend unusable (a dead CUDA context).
  virtual bool contextHealthy() { return true; }
};

}  // namespace dgps::tuning
