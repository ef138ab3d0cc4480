// The configuration a forward call uses when nobody tuned it: the package's default, with fewer value
// columns per state_output CTA when the call has too few (sequence, value head) pairs to fill the GPU, and
// shorter chunks when it has enough.
#pragma once

#include <cstdint>

#include "dgps/runtime/Package.h"
#include "dgps/runtime/TileConfig.h"

namespace dgps {

/// state_output runs one CTA per (sequence, value head, block_v columns) and walks its sequence's chunks
/// one after another, so a call with few sequences and heads leaves SMs idle (B=1, H=16 at block_v 128:
/// 16 CTAs on a 132-SM H200). While fewer than half the SMs would get a CTA, halve block_v, down to 64
/// (the warpgroup-MMA minimum) and only to values the package's tunables allow. Measured on H200, GDN
/// B=1 T=32768: block_v 128 2.81 ms, 64 2.17 ms (docs/performance.md). When at least 7/8 of the SMs get a
/// CTA and the package allows chunk 32, the chunk is 32 (faster once the GPU is full; docs/performance.md,
/// run 5). `sm_count` <= 0 (unknown) and empty problems keep the manifest default.
TileConfig shapeDefaultConfig(const Manifest& manifest, std::int64_t sequences, std::int64_t heads_v,
                              std::int64_t value_dim, int sm_count);

}  // namespace dgps
