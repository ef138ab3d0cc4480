//===- TileDialect.td - typed tiles of one CTA -----------------*- tablegen -*-===//
//
// The `tile` dialect sits below `chunk`: one kernel role becomes a `func.func` whose body is tile
// maths over typed tiles of one CTA. It knows nothing of decay, gain or preconditioner kinds; the
// lowering decides those and the emitter prints each op as a call into the typed tile library
// (runtime/device/dgps/tile/*.cuh). Roles: decode (--dgps-lower-decode-to-tile), chunk_local
// (--dgps-lower-chunk-local-to-tile; ops in TileChunkOps.td), state_output
// (--dgps-lower-state-output-to-tile; ops in TileStateOps.td).
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_TILE_IR_DIALECT_TD
#define DGPS_DIALECT_TILE_IR_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::dgps::tile";
  let summary = "Typed tiles of one CTA: memory space, layout, symbolic shape";
  let description = [{
    Values are tiles `!tile.tile<[K, BV], f32, reg, frag>` or uniform scalars (`f32`, the same
    value in every thread of the CTA). Shapes are symbolic extents fixed at JIT time (K: key head
    dim, V: value head dim, BV: the CTA's value tile); a global view over V, loaded into a tile over
    BV, means the CTA's value-tile window of that view.
  }];
  let useDefaultTypePrinterParser = 1;
  let hasCanonicalizer = 0;
  // checks the `tile.*` function attributes that carry launch decisions (Tile.h)
  let hasOperationAttrVerify = 1;
}

// Symbolic tile extents.
def Tile_Extent : I32EnumAttr<"Extent", "symbolic tile extent", [
    I32EnumAttrCase<"K", 0>, I32EnumAttrCase<"V", 1>, I32EnumAttrCase<"BV", 2>,
    // C: the chunk length (rows of one chunk; chunk-role tiles).
    I32EnumAttrCase<"C", 3>]> {
  let cppNamespace = "::dgps::tile";
  let genSpecializedAttr = 0;
}

// Where a tile lives.
def Tile_Space : I32EnumAttr<"Space", "memory space of a tile", [
    I32EnumAttrCase<"global", 0>, I32EnumAttrCase<"smem", 1>, I32EnumAttrCase<"reg", 2>]> {
  let cppNamespace = "::dgps::tile";
  let genSpecializedAttr = 0;
}

// How a tile's elements map to memory or threads.
def Tile_Layout : I32EnumAttr<"Layout", "layout of a tile", [
    // global / smem: row-major, unit column stride.
    I32EnumAttrCase<"row", 0>,
    // reg, rank 1 over K: element d held by thread d mod T, slot d / T (T threads of the CTA).
    I32EnumAttrCase<"split", 1>,
    // reg, rank 1 over BV: each thread holds 4 adjacent columns (the columns of its frag).
    I32EnumAttrCase<"quad", 2>,
    // reg, rank 2 [K, BV]: thread (row group g, column group c) holds rows g + G·j, 4 columns 4c..4c+3.
    I32EnumAttrCase<"frag", 3>]> {
  let cppNamespace = "::dgps::tile";
  let genSpecializedAttr = 0;
}

// Which element of a global tensor a view starts at: the CTA's coordinates.
def Tile_Index : I32EnumAttr<"Index", "coordinates of a global view", [
    I32EnumAttrCase<"none", 0>,      // a kernel argument, not a tensor
    I32EnumAttrCase<"h", 1>,         // [H, ...] at the CTA's key head
    I32EnumAttrCase<"bh", 2>,        // [B, H, ...] at (batch row, key head)
    I32EnumAttrCase<"bhv", 3>,       // [B, HV, ...] at (batch row, value head)
    I32EnumAttrCase<"bh_first", 4>]> // [B, HV, ...] at the first value head of the key head's group
{
  let cppNamespace = "::dgps::tile";
}

// How the grid covers the problem.
def Tile_Grid : I32EnumAttr<"Grid", "CTA grid of a tile kernel", [
    // one CTA per (batch row, value head, value tile); tile.for_value_tiles runs once. For the
    // state_output role: one CTA per (sequence, value head, value tile).
    I32EnumAttrCase<"value_tile", 0>,
    // one CTA per (batch row, key head); tile.for_value_tiles visits every value tile of the group.
    I32EnumAttrCase<"key_head", 1>,
    // one CTA per (chunk slot, value head) of a chunked forward role; no tile.for_value_tiles.
    I32EnumAttrCase<"chunk", 2>,
    // one CTA per (segment slot, value head, value tile) of the sequence-parallel state pass; the slot
    // layout of runtime/device/dgps/tile/segment_slots.cuh, slots without a segment return at once. A
    // function holding several tile.state_walk ops gives each its own range of CTAs, in order (a walk with
    // zero_values covers M's column tiles: S·HV·⌈K/BV⌉ CTAs, the others S·HV·⌈V/BV⌉).
    I32EnumAttrCase<"segment", 3>,
    // one CTA per (chunk slot, key head) of a chunked forward role (a per-key-head chunk summary).
    I32EnumAttrCase<"chunk_key_head", 4>,
    // one CTA per (sequence, key head) of a forward role that walks a sequence's chunks (a scan over chunks).
    I32EnumAttrCase<"sequence_key_head", 5>,
    // one warp per (sequence, key head), four per CTA, of a forward role that scans a sequence token by token.
    I32EnumAttrCase<"sequence_key_head_warp", 6>]> {
  let cppNamespace = "::dgps::tile";
}

// Which head of a [tokens, heads, ...] tensor a chunk-role load reads.
def Tile_HeadOf : I32EnumAttr<"HeadOf", "head of a chunk-row load", [
    I32EnumAttrCase<"key_head", 0>,    // [T, H, ...] at the CTA's key head h = hv / (HV/H)
    I32EnumAttrCase<"value_head", 1>]> // [T, HV, ...] at the CTA's value head hv
{
  let cppNamespace = "::dgps::tile";
}

#endif
