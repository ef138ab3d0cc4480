// The problem shapes dgps-bench times, and whether a package can run them.
//
// Forward shapes are the two of bench/Anchors.cpp (FLA's measured anchors): B=8, T=4096 and B=1, T=32768, both
// with H=16 query/key heads, K=V=128, bf16 inputs. Decode is one token for B=256 sequences, H=16,
// K=V=128, fp32 state (bench/Anchors.cpp: FLA fused_recurrent_gated_delta_rule), plus small-batch decode at
// B = 1, 8 and 32 (same H, K, V) for the per-step latency. Value heads follow the spec:
// HV = H * gva_ratio (4 for gdn_gva, 1 for every other shipped spec). One more forward shape, B=1, T=32768 with
// 2 query/key and 8 value heads, fixes HV, so only a spec whose GVA ratio is 4 runs it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dgps/dsl/Reference.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace bench {

enum class Kind { Forward, Decode };
const char* toString(Kind kind);  ///< "forward", "decode"

struct BenchShape {
  Kind kind = Kind::Forward;
  std::int64_t batch = 1;     ///< B (decode: sequences stepped at once)
  std::int64_t seq_len = 1;   ///< T (decode: 1)
  std::int64_t heads_qk = 16; ///< H
  std::int64_t heads_v = 0;   ///< HV; 0 = H times the spec's GVA ratio (what every spec can run)
  std::int64_t key_dim = 128;
  std::int64_t value_dim = 128;

  /// "B8_T4096_H16_K128_V128" (forward) or "B256_H16_K128_V128" (decode), with "_HV64" after H when
  /// heads_v is set: used in benchmark names.
  std::string label() const;
};

/// The two forward shapes, the GVA forward shape (B=1, T=32768, H=2, HV=8: only specs whose GVA ratio is 4), the
/// decode shape (B=256), then the small-batch decode shapes B = 1, 8, 32 (H=16, K=V=128; per-step latency), in the
/// order the table lists them.
std::vector<BenchShape> standardShapes();

/// Parses --dgps_shapes: shapes separated by ';', each "forward:B=8,T=4096,H=16,K=128,V=128" or
/// "decode:B=256,H=16,K=128,V=128" (HV=n optional; T must be absent or 1 for decode). Returns false with
/// *error naming the shape, the field and what was expected.
bool parseShapes(const std::string& text, std::vector<BenchShape>* out, std::string* error);

/// HV for `spec` at `shape`: shape.heads_v when set, else H times the spec's GVA ratio.
std::int64_t valueHeads(const Spec& spec, const BenchShape& shape);

/// The dsl problem shape (no cu_seqlens) of `shape` for `spec`.
ReferenceProblem toProblemShape(const Spec& spec, const BenchShape& shape);

/// The runtime's view of a forward call at `shape` (no cu_seqlens, no states): what the forward default and the
/// segment rule read (runtime/include/dgps/runtime/DefaultConfig.h forwardDefaultInputs), known before any
/// tensor exists.
ForwardProblem forwardProblemOf(const Spec& spec, const BenchShape& shape);

/// Why `package` cannot be timed at `shape` (no such kernel, K/V/H/bf16 not supported), or nullopt.
std::optional<std::string> unsupportedReason(const Package& package, const BenchShape& shape);

}  // namespace bench
}  // namespace dgps
