// Tuned-vs-default: when the tuning database (runtime/include/dgps/runtime/tuning/TuningDb.h: path from
// $DGPS_TUNING_DB, $XDG_CACHE_HOME or $HOME) holds a record for this GPU and problem — exact key or the
// nearest T bucket, the same lookup the runtime uses — the benchmark times both the recorded
// configuration and the manifest's default_config.
//
// The device fingerprint is built here from the driver (name, compute capability with the "a" suffix
// when NVRTC targets sm_XYa, SM count, driver and NVRTC versions) and the package's codegen identity as
// dgps-tune stamps it (tune::codegenIdentity: emitter version + hash of kernels.cu and the device headers),
// so records dgps-tune wrote apply; records written under another identity are listed as foreign in the
// note, never used.
#pragma once

#include <optional>
#include <string>

#include "GpuSession.h"
#include "Shapes.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/tuning/Fingerprint.h"
#include "dgps/runtime/tuning/ProblemKey.h"

namespace dgps {
namespace bench {

/// The identity records of `package` on this GPU and toolchain carry.
tuning::DeviceFingerprint currentFingerprint(const GpuInfo& gpu, const Package& package);

/// The database key of `package` at `shape` on a GPU with `sm_count` SMs (bf16, dense, "ieee").
tuning::ProblemKey problemKey(const Package& package, const BenchShape& shape, int sm_count);

struct TunedLookup {
  std::optional<TileConfig> config;  ///< set when a record of this GPU applies
  std::string source;                ///< "exact" or "nearest T bucket"
  double recorded_ms = 0;            ///< the record's median, for comparison with the re-timing
  std::string note;                  ///< why nothing applied (no database, no record, foreign records)
};

/// Looks `package` at `shape` up in the tuning database. Never throws; problems go to the note.
TunedLookup lookupTuned(const Package& package, const BenchShape& shape, const GpuInfo& gpu);

}  // namespace bench
}  // namespace dgps
