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
  return c;
}

}  // namespace dgps
