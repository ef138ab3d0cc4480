// The autotuner driver: given pruned candidates (Candidates.h) and a TrialBackend, find the fastest
// configuration that is correct, and record it in the tuning database.
//
// Procedure (each step skips candidates that already failed; failures are recorded, never fatal):
//  1. Compile every candidate in parallel on a small thread pool, each with a deadline
//     (compile_timeout). CompileError / Timeout are recorded and the run carries on.
//  2. Spill filter (docs/math.md §7.5): if any compiled candidate reports zero local memory, candidates that spill
//     are dropped as Spills; if all spill, they stay (something must run) and the table says so.
//  3. Screen each survivor once (TrialBackend::screen: poisoned scratch outputs, one launch, compare
//     with the trusted result). Fault / Timeout / WrongResult are recorded; a result is wrong when the
//     backend says so OR max_rel_err is not <= max_rel_err (NaN is wrong). A wrong candidate is never
//     chosen, however fast. After a Fault the driver asks contextHealthy(); if false, everything left
//     is Skipped and the run fails without recording anything (see TrialBackend.h).
//  4. Time each survivor: `warmup` untimed + `reps` timed launches (L2 flushed by the backend);
//     summarise as median / p20 / p80.
//  5. Finalists: those with median <= best * (1 + finalist_window), at most max_finalists (fastest
//     first). Re-time them interleaved — `retime_rounds` rounds of `retime_reps` each, the starting
//     candidate rotating every round so drift (clocks, thermals) is spread evenly — and summarise
//     each finalist over its interleaved samples only.
//  6. Winner: among finalists whose final median is within tie_tolerance of the best final median
//     (equal within noise), the simplest by simplerThan(); so ties resolve the same way whatever the
//     candidate order or the order the timings arrived in.
//
// Progress is reported through a callback, always from the calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dgps/runtime/tuning/Candidates.h"
#include "dgps/runtime/tuning/Status.h"
#include "dgps/runtime/tuning/TrialBackend.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps::tuning {

struct TunerOptions {
  std::chrono::milliseconds compile_timeout{120000};
  int compile_threads = 0;       ///< 0: min(hardware threads, 8).
  /// Accuracy bound on top of the backend's own verdict: relative error; set per dtype/precision
  /// by the caller (e.g. 1e-4 for fp32 "ieee" (docs/math.md §7.5), ~1e-2 for bf16).
  double max_rel_err = 1e-2;
  int warmup = 3;
  int reps = 20;
  double finalist_window = 0.05;  ///< re-time candidates within 5% of the best median.
  int max_finalists = 4;
  int retime_rounds = 5;
  int retime_reps = 10;
  double tie_tolerance = 0.01;    ///< final medians within 1% of the best are a tie.
  bool reject_spills = true;      ///< step 2 above.
  double regression_threshold = 0.05;  ///< flag a >5% slowdown against a toolchain baseline.
};

enum class TunePhase { Compile, Screen, Time, Retime, Done };
const char* toString(TunePhase);

struct TuneProgress {
  TunePhase phase = TunePhase::Compile;
  int done = 0;   ///< steps finished in this phase.
  int total = 0;  ///< steps in this phase.
  TileConfig config;  ///< the candidate the last finished step concerned.
  TrialStatus status = TrialStatus::Ok;
};
using ProgressFn = std::function<void(const TuneProgress&)>;

/// One row of the final table.
struct CandidateReport {
  TileConfig config;
  TrialStatus status = TrialStatus::Skipped;
  std::string message;  ///< prune reason, compiler log head, fault text, error size...
  double median_ms = std::numeric_limits<double>::quiet_NaN();
  double p20_ms = std::numeric_limits<double>::quiet_NaN();
  double p80_ms = std::numeric_limits<double>::quiet_NaN();
  double max_rel_err = std::numeric_limits<double>::quiet_NaN();
  int registers = -1;
  long long local_bytes = -1;
  bool finalist = false;
  bool winner = false;
};

struct TuneResult {
  Status status;                       ///< ok when a configuration was chosen (or reused).
  std::optional<TuningRecord> record;  ///< the winner (new or reused).
  bool reused = false;                 ///< true when taken from the database without any trial.
  std::vector<CandidateReport> table;  ///< pruned candidates first, then the tried ones.
  std::string db_error;                ///< set when the winner could not be appended (still returned).
  /// the newest record for this key on the same hardware under another toolchain, and how much
  /// slower (positive) or faster the new winner is: new_median / baseline_median - 1.
  std::optional<TuningRecord> baseline;
  double regression = 0;
  bool regressed = false;              ///< regression > regression_threshold.
};

/// The final table as fixed-width text, one candidate per line, best first then by status.
std::string formatTable(const TuneResult& result);

class Autotuner {
 public:
  explicit Autotuner(TrialBackend& backend, TunerOptions options = {});

  void setProgress(ProgressFn progress) { progress_ = std::move(progress); }
  const TunerOptions& options() const { return options_; }

  /// Run the whole procedure; the returned record is NOT written anywhere.
  TuneResult tune(const DeviceFingerprint& device, const ProblemKey& key,
                  const CandidateSet& candidates);

  /// Reuse the newest exact record for (device, key) when the database has one (re-reading the file
  /// first if the in-memory view lacks it, in case another process tuned meanwhile); makes no backend
  /// call then. Otherwise tune() and append the winner.
  TuneResult tuneOrReuse(TuningDb& db, const DeviceFingerprint& device, const ProblemKey& key,
                         const CandidateSet& candidates);

 private:
  void report(TunePhase phase, int done, int total, const CandidateReport& row);

  TrialBackend& backend_;
  TunerOptions options_;
  ProgressFn progress_;
};

}  // namespace dgps::tuning
