#include "dgps/runtime/tuning/TileConfig.h"

#include <tuple>

namespace dgps::tuning {

std::string TileConfig::str() const {
  return "chunk=" + std::to_string(chunk) + " block_v=" + std::to_string(block_v) +
         " warps=" + std::to_string(warps) + " stages=" + std::to_string(stages);
}

bool operator==(const TileConfig& a, const TileConfig& b) {
  return a.chunk == b.chunk && a.block_v == b.block_v && a.warps == b.warps && a.stages == b.stages;
}

bool simplerThan(const TileConfig& a, const TileConfig& b) {
  return std::tie(a.stages, a.warps, a.block_v, a.chunk) <
         std::tie(b.stages, b.warps, b.block_v, b.chunk);
}

}  // namespace dgps::tuning
