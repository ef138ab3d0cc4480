// Autotuning one package's chunked forward for one problem on the GPU at hand, and the pieces the tools
// and the runtime resolver share: the device fingerprint, the tuning key, the candidate set.
//
//   dgps::Package pkg = dgps::Package::open("generated/pgdn");
//   dgps::tune::TuneJob job;
//   job.shape = {/*batch*/8, /*seq_len*/4096, /*H*/16, /*HV*/16, /*K*/128, /*V*/128};
//   dgps::tune::TuneOutcome r = dgps::tune::tunePackage(pkg, job);   // reuses a record when there is one
//   // r.result.record->config is the winner; r.db_path the database it was read from / appended to.
//
// Candidates: the product of the manifest's tunables, pruned with the device's limits read at run time
// (shared memory per block opt-in, threads per block) and the launch rules' own refusals (grid limits,
// shared memory per configuration, via the runtime's launch plan). Every pruned configuration keeps its
// reason for the final table.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dgps/dsl/Reference.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tuning/Autotuner.h"
#include "dgps/runtime/tuning/Candidates.h"
#include "dgps/runtime/tuning/Fingerprint.h"
#include "dgps/runtime/tuning/ProblemKey.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps {
namespace tune {

/// "cg<codegen_version>-<16 hex digits>": the emitter version plus a hash of the package's kernel source
/// and of the embedded device headers, so a record measured on other generated code (a newer dgpsc, an
/// edited kernels.cu, another device library) is never reused silently; with two summaries per SM (Runtime.h
/// summaryPairsEnabled, the default) the switch too.
std::string codegenIdentity(const Package& package);

/// The identity and limits of `device` as tuning records store them (tuning/Fingerprint.h): name,
/// compute capability with the NVRTC target's arch suffix ("9.0a" when kernels are built for sm_90a),
/// SM count, driver and NVRTC versions, codegenIdentity(package), and the limits the pruner reads.
/// Throws RuntimeError (NoDriver / NoDevice / Cuda).
tuning::DeviceFingerprint deviceFingerprint(const Package& package, int device);

/// The tuner's view of a forward problem (tuning/ProblemKey.h TuneProblem). Varlen calls map to N sequences
/// of T = total tokens.
tuning::TuneProblem tuningShape(const ForwardProblem& problem);
tuning::TuneProblem tuningShape(const ReferenceProblem& shape, ScalarType dtype);

/// The database key of `shape` for this package on a device with `sm_count` SMs.
tuning::ProblemKey problemKey(const Package& package, const tuning::TuneProblem& shape, int sm_count);

/// Candidate tile configurations for the package's forward at `shape` on `device` (see above).
tuning::CandidateSet forwardCandidates(const Package& package, const tuning::TuneProblem& shape,
                                       const tuning::DeviceFingerprint& device);

/// One tuning run.
struct TuneJob {
  ReferenceProblem shape;                     ///< dense forward shape (B, T, H, HV, K, V); cu_seqlens must be empty
  ScalarType dtype = ScalarType::BF16;    ///< q/k/v/o dtype
  int device = 0;
  std::string db_path;                    ///< "" = tuning::resolveDbPath() ($DGPS_TUNING_DB, ...)
  std::string cache_dir;                  ///< binary cache; "" = BinaryCache::defaultDirectory()
  bool force = false;                     ///< tune even when an exact record exists (the new one is appended)
  bool isolate = true;                    ///< screen candidates in dgps-tune-trial processes
  std::string trial_helper;               ///< "" = findTrialHelper()
  std::chrono::milliseconds trial_timeout{180000};
  std::uint64_t seed = 0;                 ///< input draw; 0 = a fresh random seed
  tuning::TunerOptions tuner;             ///< tuner.max_rel_err < 0 means defaultTolerance(dtype)
  /// The shape the record is keyed under when it differs from the timed one: the runtime resolver
  /// times a varlen call on a dense stand-in (N sequences of ceil(total/N) tokens) but records it
  /// under the varlen call's own key. Unset: tuningShape(shape, dtype).
  std::optional<tuning::TuneProblem> key_shape;
  TuneJob() { tuner.max_rel_err = -1; }
};

struct TuneOutcome {
  tuning::TuneResult result;              ///< status, record, table (tuning/Autotuner.h)
  tuning::DeviceFingerprint fingerprint;
  tuning::ProblemKey key;
  std::string db_path;
  std::uint64_t seed = 0;                 ///< the input seed used (0 when the record was reused)
  std::vector<tuning::DbWarning> db_warnings;
};

/// Tunes `package` for `job` (or reuses the newest exact record of this device and key, unless
/// job.force) and appends a new winner to the database. A candidate that fails to compile, faults,
/// times out or computes a wrong result is recorded in the table and the run carries on; the outcome's
/// result.status is an error only when no candidate survived or the database cannot be read.
/// Throws RuntimeError before any trial for: no GPU (NoDriver/NoDevice), a shape or dtype the package
/// does not support (InvalidArgument), an isolated run without the trial helper (InvalidArgument).
TuneOutcome tunePackage(const Package& package, const TuneJob& job, const tuning::ProgressFn& progress = nullptr);

/// The same with a caller-provided runtime (its binary cache is used; pointer checks are irrelevant to
/// scratch tensors, so a runtime with check_pointers = false times with less host overhead).
TuneOutcome tunePackage(Runtime& runtime, const Package& package, const TuneJob& job,
                        const tuning::ProgressFn& progress = nullptr);

}  // namespace tune
}  // namespace dgps
