// The correctness guard run before a package's configuration is timed: the same compiled variant
// (K=V=128, bf16, the configuration to be timed) runs a small problem on fresh random inputs, and its
// outputs are compared with the float64 reference semantics (dsl Reference.h runReference) on the
// same bf16-rounded inputs. A configuration whose output is wrong gets no time (the benchmark is
// skipped with the error).
//
// Small problems: forward B=2, T=300 (four chunks of 64 plus a ragged tail), H=4 (or the spec's fixed
// H), HV=H*gva, K=V=128, no states; decode B=5 sequences, one token, from random states. Outputs are
// poisoned (NaN) before the launch, so an unwritten element fails as non-finite.
// Error measure: ‖out − ref‖₂ / ‖ref‖₂ per output (o; decode also the updated state and preconditioner
// state), the largest reported; bf16 outputs land between 1e-3 and 1e-2 (METHOD.md), so the default
// tolerance is 1e-2.
#pragma once

#include <cstdint>
#include <string>

#include "BenchInputs.h"
#include "GpuSession.h"
#include "Shapes.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace bench {

/// Inputs and float64 outputs of one small problem (CPU only; computed up front in parallel).
struct GuardReference {
  Kind kind = Kind::Forward;
  ReferenceProblem shape;
  HostInputs inputs;       ///< tiles equal the full shapes (nothing repeated)
  ReferenceOutputs outputs;
};

/// The small problem of the header comment for `package`, and its reference outputs. Throws DataError.
GuardReference makeGuardReference(const Package& package, Kind kind, std::uint64_t seed);

struct GuardResult {
  bool ok = false;
  double rel_err = 0;   ///< the largest ‖out − ref‖/‖ref‖ over the compared outputs (NaN if non-finite)
  std::string message;  ///< what was compared and what was wrong
};

/// Runs the variant `config` of `package` on the reference's inputs and compares. CUDA failures throw
/// RuntimeError (the caller decides whether the context survived); a wrong result is returned.
GuardResult runGuard(Runtime& runtime, GpuSession& session, const Package& package, const TileConfig& config,
                     const GuardReference& reference, double tolerance);

/// ‖got − want‖₂ / ‖want‖₂ over all elements (NaN when `got` has a non-finite element; ‖want‖ = 0 gives
/// the absolute norm). Shapes must have equal element counts (else DataError).
double relativeError(const Tensor& got, const Tensor& want);

}  // namespace bench
}  // namespace dgps
