// A tile configuration: the compile-time constants a kernel variant is built with (-DDGPS_CHUNK= ...).
#pragma once

#include <string>

namespace dgps {

struct TileConfig {
  int chunk = 64;    ///< C, tokens per chunk of the chunkwise (WY/UT-transform) forward.
  int block_v = 64;  ///< value columns of the state one thread block owns.
  int warps = 4;     ///< warps per thread block.
  int stages = 1;    ///< software-pipelining depth of global->shared loads.

  bool operator==(const TileConfig& o) const {
    return chunk == o.chunk && block_v == o.block_v && warps == o.warps && stages == o.stages;
  }
  bool operator!=(const TileConfig& o) const { return !(*this == o); }
};

/// "chunk=64,block_v=64,warps=4,stages=1" (the --config syntax of dgps-run).
std::string toString(const TileConfig& c);

/// Parses "chunk=64,block_v=32" on top of `base` (keys not given keep base's values). Throws
/// RuntimeError{InvalidArgument} naming the bad key or value and the accepted keys.
TileConfig parseTileConfig(const std::string& text, const TileConfig& base);

}  // namespace dgps
