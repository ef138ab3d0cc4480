// The tile configuration on the host: the device library's launch::TileConfig (one definition, shared
// with NVRTC; runtime/device/dgps/device/launch_rules.h) plus its one text form, used by CLI flags
// (--config), logs, error messages and tables: "chunk=64,block_v=64,warps=4,stages=2".
#pragma once

#include <string>

#include "dgps/device/launch_rules.h"

namespace dgps {
namespace launch {

/// "chunk=64,block_v=64,warps=4,stages=2" (all four keys, in this order), then ",segment_chunks=L" when a
/// segment length is chosen (segment_chunks >= 0). parseTileConfig reads it back.
std::string toString(const TileConfig& c);

/// Parses "chunk=64,block_v=32" on top of `base` (keys not given keep base's values; blanks around items
/// are ignored). Throws RuntimeError{InvalidArgument} naming the bad item and the accepted keys and
/// values (integers in [1, 1024]; segment_chunks in [0, 2^30]); at most 1024 characters.
TileConfig parseTileConfig(const std::string& text, const TileConfig& base);

/// The fixed "simplicity" order used to break ties between configurations whose times are equal within
/// noise: fewer pipeline stages, then fewer warps, then a narrower value tile, then a shorter chunk.
/// Smaller means simpler (less shared memory, fewer registers in flight), so a tie always resolves to the
/// same, cheaper configuration whatever the input order. Last, the segment length: the plain state pass,
/// then longer segments before shorter ones.
bool simplerThan(const TileConfig& a, const TileConfig& b);

}  // namespace launch

using TileConfig = launch::TileConfig;
using launch::parseTileConfig;
using launch::simplerThan;
using launch::toString;

}  // namespace dgps
