// FLA's measured times on our H200 (bench/Anchors.cpp, 2026-11-29: flash-linear-attention
// Triton kernels, Triton 3.6, do_bench median, bf16, inference, no initial/final state), keyed by our
// spec names. They are only comparable at exactly the anchor shapes (Shapes.h) with HV = H.
#pragma once

#include <optional>
#include <string>

#include "Shapes.h"

namespace dgps {
namespace bench {

struct FlaAnchor {
  double ms = 0;   ///< FLA's median time, milliseconds.
  std::string op;  ///< the FLA function it timed, e.g. "chunk_gated_delta_rule".
};

/// The anchor for spec `spec_name` at `shape` (heads_v value heads), or nullopt when bench/Anchors.cpp has none.
std::optional<FlaAnchor> flaAnchor(const std::string& spec_name, const BenchShape& shape, std::int64_t heads_v);

/// FLA's PGDN / GDN time ratio at a forward shape (1.93 and 1.93 from the table), or nullopt.
std::optional<double> flaRatio(const std::string& numerator, const std::string& denominator, const BenchShape& shape);

}  // namespace bench
}  // namespace dgps
