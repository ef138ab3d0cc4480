#include "Anchors.h"

namespace dgps {
namespace bench {
namespace {

struct Row {
  const char* spec;
  const char* op;
  double ms_b8_t4096;    // forward, B=8, T=4096, H=16, K=V=128
  double ms_b1_t32768;   // forward, B=1, T=32768, H=16, K=V=128
};

// bench/Anchors.cpp, "Measured on our H200" table.
const Row kForward[] = {
    {"deltanet", "chunk_delta_rule", 1.000, 1.57},
    {"gdn", "chunk_gated_delta_rule", 0.839, 1.446},
    {"kda", "chunk_kda", 1.788, 2.524},
    {"pgdn", "chunk_precond_gated_delta_rule", 1.622, 2.789},
    {"pkda", "chunk_precond_kda", 2.658, 3.957},
};
// GDN decode, fused_recurrent_gated_delta_rule, B=256, H=16, K=V=128, one token, fp32 state.
constexpr double kGdnDecodeMs = 0.191;

bool isAnchorHeads(const BenchShape& s, std::int64_t heads_v) {
  return s.heads_qk == 16 && heads_v == 16 && s.key_dim == 128 && s.value_dim == 128;
}

}  // namespace

std::optional<FlaAnchor> flaAnchor(const std::string& spec_name, const BenchShape& shape, std::int64_t heads_v) {
  if (!isAnchorHeads(shape, heads_v)) return std::nullopt;
  if (shape.kind == Kind::Decode) {
    if (spec_name == "gdn" && shape.batch == 256) return FlaAnchor{kGdnDecodeMs, "fused_recurrent_gated_delta_rule"};
    return std::nullopt;
  }
  for (const Row& r : kForward) {
    if (spec_name != r.spec) continue;
    if (shape.batch == 8 && shape.seq_len == 4096) return FlaAnchor{r.ms_b8_t4096, r.op};
    if (shape.batch == 1 && shape.seq_len == 32768) return FlaAnchor{r.ms_b1_t32768, r.op};
  }
  return std::nullopt;
}

std::optional<double> flaRatio(const std::string& numerator, const std::string& denominator, const BenchShape& shape) {
  auto a = flaAnchor(numerator, shape, shape.heads_qk);
  auto b = flaAnchor(denominator, shape, shape.heads_qk);
  if (!a || !b) return std::nullopt;
  return a->ms / b->ms;
}

}  // namespace bench
}  // namespace dgps
