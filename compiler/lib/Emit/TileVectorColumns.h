// Columns of the chunk_local token area for the [C] vectors of a tile function (TileChunkEmitter.cpp).
#pragma once

#include <map>

#include "mlir/IR/Block.h"

namespace dgps {

/// The token area (LaunchContract.h chunkLocalLayout tok) holds [C] f32 vectors as columns: 8 of its [C][8] part
/// (column n at sVec + n, stride 8), then 2 of its [C][2] part (column 8 + n at sVec + C·8 + n, stride 2).
constexpr int kTokenVectorColumns = 10;

/// Column of each [C] vector stored by the ops of `body` (keyed by Value::getAsOpaquePointer() of the op
/// result that allocates it; in-place results such as tile.cumsum share their operand's column).
///
/// Why: a row loop that reads several vectors at the same row reads them with one 8- or 16-byte shared load
/// (ld.shared.v2 / v4) when they lie in one aligned group of columns: the columns 4m .. 4m + 3 of the [C][8] part
/// (16 bytes of a row) or the two of the [C][2] part, best the two columns 2m, 2m + 1 of an 8-byte pair; read
/// one by one they cost up to four times the shared-memory instructions. The sets read together are placed hottest first: the coefficients
/// a, b of tile.channel_scan (read for every row in each channel's scan), the column factor and gate of
/// tile.lower_products (read for every column of each 16x16 block), its per-row factors and gate, then the
/// fields of tile.store_token_record (once per row). A set joins the group of its members already placed if it
/// has room, else takes a group with room for all of it; within a group, free mates of placed members first,
/// then whole free pairs. The other vectors fill the remaining columns in order of definition. Then columns are
/// swapped while that lowers the weighted count of shared loads of all sets (a group's columns within one
/// 8-byte pair or a run from its first column cost one load, else one per 8-byte pair touched). Vectors
/// beyond kTokenVectorColumns get no column (the emitter reports them).
std::map<const void*, int> planVectorColumns(mlir::Block& body);

}  // namespace dgps
