#include "dgps/runtime/tuning/TrialBackend.h"

#include <limits>

namespace dgps::tuning {

const char* toString(TrialStatus s) {
  switch (s) {
    case TrialStatus::Ok: return "ok";
    case TrialStatus::Pruned: return "pruned";
    case TrialStatus::CompileError: return "compile-error";
    case TrialStatus::Timeout: return "timeout";
    case TrialStatus::Fault: return "fault";
    case TrialStatus::WrongResult: return "wrong-result";
    case TrialStatus::Spills: return "spills";
    case TrialStatus::TimingError: return "timing-error";
    case TrialStatus::Skipped: return "skipped";
  }
  return "?";
}

ScreenResult TrialBackend::screen(const TileConfig& config) {
  const RunResult run = runOnce(config);
  if (run.status != TrialStatus::Ok)
    return {run.status, std::numeric_limits<double>::quiet_NaN(), run.message};
  const Validation v = validate(config);
  return {v.ok ? TrialStatus::Ok : TrialStatus::WrongResult, v.max_rel_err, v.message};
}

}  // namespace dgps::tuning
