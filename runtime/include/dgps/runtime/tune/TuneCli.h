// The command-line side of tuning, shared by `dgps-tune` (runtime/tools/dgps-tune/TuneCommand.h; `dgpsc
// tune` compiles a spec and then runs dgps-tune) and host applications: the --shape syntax and the
// progress bar.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "dgps/dsl/Reference.h"
#include "dgps/dsl/Spec.h"
#include "dgps/runtime/tuning/Autotuner.h"

namespace dgps {
namespace tune {

/// The --shape value: comma-separated KEY=VALUE pairs, keys B, T, H, HV, K, V (case-sensitive), each at
/// most once, values positive decimal integers. 0 in the result means "not given".
struct ShapeArg {
  std::int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
};

/// Parses "B=8,T=4096,H=16,K=128,V=128". Throws RuntimeError{InvalidArgument} with one message naming the
/// offending piece, e.g. "--shape: 'T=4k': T must be a positive integer".
ShapeArg parseShapeArg(const std::string& text);

/// Completes a ShapeArg against a spec: B defaults to 1; T, K and V are required; H defaults to the
/// spec's fixed heads_qk (required when the spec leaves it open, and must equal it when fixed); HV
/// defaults to H * gva_ratio and must equal it when given. Throws RuntimeError{InvalidArgument}.
ProblemShape resolveShapeArg(const ShapeArg& arg, const Spec& spec);

/// Progress on a stream (stderr): on a terminal one redrawn line per phase
/// "[compile ] ######------  5/12  chunk=64 block_v=32 warps=8 stages=1  ok", otherwise one line per
/// finished phase (logs stay readable).
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool terminal);
  void operator()(const tuning::TuneProgress& p);

 private:
  std::ostream& out_;
  bool terminal_;
  bool line_open_ = false;
};

}  // namespace tune
}  // namespace dgps
