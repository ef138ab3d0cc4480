#include "dgps/runtime/DefaultConfig.h"

#include <algorithm>

namespace dgps {

TileConfig shapeDefaultConfig(const Manifest& manifest, std::int64_t sequences, std::int64_t heads_v,
                              std::int64_t value_dim, int sm_count) {
  TileConfig c = manifest.default_config;
  if (sm_count <= 0 || sequences <= 0 || heads_v <= 0 || value_dim <= 0) return c;
  const std::vector<int>& allowed = manifest.tunables.block_v;
  auto ctas = [&](int bv) { return sequences * heads_v * ((value_dim + bv - 1) / bv); };
  while (2 * ctas(c.block_v) < sm_count) {
    const int half = c.block_v / 2;
    if (half < 64 || std::find(allowed.begin(), allowed.end(), half) == allowed.end()) break;
    c.block_v = half;
  }
  // With (nearly) every SM holding a state_output CTA, the sequential walk is no longer the limit and the
  // per-chunk work is: chunk 32 halves chunk_local's quadratic part. Measured on the H200 at B=8, H=16 (128
  // CTAs on 132 SMs): gdn 0.533 vs 0.577 ms, deltanet 0.524 vs 0.562, pgdn 0.776 vs 0.803, pdn 0.769 vs
  // 0.794; at B=1 (32 CTAs) chunk 32 is 10% slower (gdn 2.41 vs 2.18 ms; docs/performance.md, run 5).
  const std::vector<int>& chunks = manifest.tunables.chunk;
  if (c.chunk > 32 && std::find(chunks.begin(), chunks.end(), 32) != chunks.end() &&
      8 * ctas(c.block_v) >= 7 * std::int64_t(sm_count))
    c.chunk = 32;
  return c;
}

}  // namespace dgps
