// The tuning database at launch time: a RuntimeOptions::forward_config hook that picks the tile
// configuration of each forward call from the per-GPU tuning database, tuning on first use if asked.
//
//   auto resolver = std::make_shared<dgps::tune::TuningResolver>();   // mode from $DGPS_TUNE_MODE
//   dgps::RuntimeOptions ro;
//   ro.forward_config = dgps::tune::forwardConfigResolver(resolver);
//   dgps::Runtime rt(ro);
//   rt.forward(pkg, tensors);            // config: database record, fresh tuning, or the default
//
// Modes ($DGPS_TUNE_MODE, or ResolverOptions::mode, which wins):
//   recorded (default)  use the newest record of this device and key (exact T bucket, else the nearest
//                       T bucket with everything else equal, TuningDb.h); none -> the shape-aware default
//                       (DefaultConfig.h: the manifest's, with block_v halved for calls too small to fill
//                       this device's SMs).
//                       Never tunes, so a deployment never stalls on a first call.
//   tune                as `recorded` for an exact record; without one, tune now (tunePackage, isolated
//                       trials) on scratch tensors and append the winner, then use it. A failed tuning
//                       run falls back to the default with a warning and is not retried in this process.
//   default             always the manifest's heuristic default_config (no database access).
// Records measured on another GPU, driver, NVRTC or generated code (tuning/Fingerprint.h) are never used;
// when only such records exist for a key, a warning (dgps::warn, Log.h) names them and the reason.
//
// Each (package, device, key) is decided once per resolver and remembered, so steady-state calls cost a
// map lookup, and varying shapes within one key bucket never re-tune. Thread-safe; a tuning run
// holds the resolver's lock (concurrent first calls wait for it instead of tuning twice).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tune/TuneJob.h"

namespace dgps {
namespace tune {

enum class TuneMode { Tune, Recorded, Default };
const char* toString(TuneMode);  ///< "tune", "recorded", "default"
std::optional<TuneMode> parseTuneMode(const std::string& text);
/// $DGPS_TUNE_MODE, or `fallback` when it is unset or empty. Throws RuntimeError{InvalidArgument} naming
/// the value and the accepted ones when it is anything else.
TuneMode tuneModeFromEnv(TuneMode fallback = TuneMode::Recorded);

/// Where one key's configuration came from.
enum class ConfigSource { Tuned, RecordExact, RecordNearestBucket, DefaultForced, DefaultNoRecord, DefaultAfterFailure };
const char* toString(ConfigSource);  ///< "tuned now", "database (exact key)", ...

struct ResolverDecision {
  std::string package;          ///< package name
  int device = 0;
  tuning::ProblemKey key;
  TileConfig config;
  ConfigSource source = ConfigSource::DefaultNoRecord;
  std::string db_path;          ///< "" in default mode
  std::optional<tuning::TuningRecord> record;  ///< the record used (or written by the tuning run)
  std::string note;             ///< why a default was used, ignored foreign records, ...
  /// "pgdn K128|V128|...: chunk=64,block_v=64,warps=4,stages=2 from database (exact key) /path/tuning.jsonl"
  std::string str() const;
};

struct ResolverOptions {
  std::optional<TuneMode> mode;  ///< unset: tuneModeFromEnv()
  std::string db_path;           ///< "" = tuning::resolveDbPath() at first use ($DGPS_TUNING_DB, ...)
  /// Template for tuning runs in `tune` mode (isolation, trial helper, timeouts, tuner options, cache
  /// dir); shape, dtype, device and db_path are filled in per call.
  TuneJob job;
  tuning::ProgressFn progress;   ///< progress of tuning runs (from the tuning thread)
  /// Called once per new decision (not for calls that reuse a remembered one).
  std::function<void(const ResolverDecision&)> on_decision;
  /// Identity of (package, device); empty = deviceFingerprint(). Lets CPU tests (and callers that
  /// already know the device) exercise the database logic without a GPU.
  std::function<tuning::DeviceFingerprint(const Package&, int)> fingerprint;
};

class TuningResolver {
 public:
  /// Throws RuntimeError{InvalidArgument} for a bad $DGPS_TUNE_MODE.
  explicit TuningResolver(ResolverOptions options = {});
  ~TuningResolver();

  /// The configuration for this call (see the modes above). Never throws: any failure falls back to
  /// the manifest's default with a warning.
  std::optional<TileConfig> resolve(const Package& package, const ForwardProblem& problem, int device);
  /// The runtime hook's answer (forwardConfigResolver): resolve()'s configuration, except nullopt where the
  /// database has no record for the call (ConfigSource::DefaultNoRecord). The runtime then applies its own
  /// shape-aware default, the same rule, which also sees the call's LaunchOptions (a state pass forced by
  /// LaunchOptions::segment_chunks or DGPS_SEGMENT_CHUNKS keeps its width and chunk). The decision is logged
  /// and remembered as by resolve().
  std::optional<TileConfig> resolveRecorded(const Package& package, const ForwardProblem& problem, int device);

  TuneMode mode() const { return mode_; }
  /// Tuning runs made by this resolver that reached the trials (reused records are not counted).
  int tuningRuns() const;
  /// Every decision so far, in order.
  std::vector<ResolverDecision> decisions() const;
  /// The outcome (table included) of the last tuning run, if any.
  std::optional<TuneOutcome> lastTuning() const;

 private:
  struct Choice {
    TileConfig config;
    ConfigSource source;
  };
  /// The remembered decision for this call's key, or a new one (decided, remembered, logged). Never throws.
  Choice decideOnce(const Package& package, const ForwardProblem& problem, int device);
  ResolverDecision decide(const Package& package, const ForwardProblem& problem, int device);
  ResolverDecision fromDatabase(const Package& package, const tuning::DeviceFingerprint& fp,
                                const tuning::ProblemKey& key, ResolverDecision d, const TileConfig& fallback);
  ResolverDecision tuneNow(const Package& package, const ForwardProblem& problem, const tuning::ProblemKey& key,
                           ResolverDecision d);
  std::string dbPath();
  std::string memoKey(const Package& package, const ForwardProblem& problem, int device) const;

  ResolverOptions options_;
  TuneMode mode_;
  mutable std::mutex mu_;
  struct State;
  std::unique_ptr<State> state_;
};

/// A RuntimeOptions::forward_config that asks `resolver` (TuningResolver::resolveRecorded).
ForwardConfigResolver forwardConfigResolver(std::shared_ptr<TuningResolver> resolver);

}  // namespace tune
}  // namespace dgps
