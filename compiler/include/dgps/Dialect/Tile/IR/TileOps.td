//===- TileOps.td - tile maths of one CTA ----------------------*- tablegen -*-===//
//
// Generic tile operations; none names a recurrence axis. "Uniform scalar" operands are `f32`
// values equal in every thread. Elementwise ops take tiles of one type or uniform scalars
// (broadcast). Reductions over a whole CTA synchronise its threads.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_TILE_IR_OPS_TD
#define DGPS_DIALECT_TILE_IR_OPS_TD

include "dgps/Dialect/Tile/IR/TileTypes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpBase.td"

def Tile_AnyTile : Type<CPred<"::llvm::isa<::dgps::tile::TileType>($_self)">, "tile", "::dgps::tile::TileType">;
def Tile_TileOrScalar : AnyTypeOf<[Tile_AnyTile, F32]>;

class Tile_Op<string mnemonic, list<Trait> traits = []> : Op<Tile_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

def Tile_ViewOp : Tile_Op<"view", [Pure]> {
  let summary = "a global view of a kernel tensor argument at the CTA's coordinates";
  let description = [{
    `%k = tile.view "k" at bh : !tile.tile<[K], bf16, global, row>` is row (b, h) of the argument
    `k` of shape [B, H, K]. `name` is a field of the kernel's argument struct; the emitter checks it.
    A view at `bhv` must be inside `tile.for_value_tiles` (the value head is the loop's).
    With `step` = j (several Householder steps per token, docs/math.md §3.7) the tensor has n_h rows per token,
    [B, n_h, H, K], and the view is row j of the token's: (b · n_h + j, h). n_h is the package's
    DGPS_ROW_STEPS; j is in [0, 4).
  }];
  let arguments = (ins StrAttr:$name, Tile_Index:$index, OptionalAttr<I64Attr>:$step);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$name `at` $index attr-dict `:` type($result)";
}

def Tile_LoadOp : Tile_Op<"load", [Pure]> {
  let summary = "load a global view into registers (the CTA's value-tile window of a V extent)";
  let description = [{
    Converts to f32. Shapes: [K] → [K] split, [V] → [BV] quad, [K, V] → [K, BV] frag. Elements
    outside the true extents read as zero.
  }];
  let arguments = (ins Tile_AnyTile:$view);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$view attr-dict `:` type($view) `->` type($result)";
}

def Tile_LoadScalarOp : Tile_Op<"load_scalar", [Pure]> {
  let summary = "one f32 element of a kernel tensor at the CTA's coordinates, or a kernel scalar";
  let description = [{
    `tile.load_scalar "g" at bhv : f32` reads g[b, hv]; `at none` reads the scalar argument itself
    (e.g. "scale"). With `absent`, a null tensor pointer reads as that value. `step` as in tile.view
    (e.g. the gain β of Householder step j: beta[b, j, hv] of [B, n_h, HV]).
  }];
  let arguments = (ins StrAttr:$name, Tile_Index:$index, OptionalAttr<F32Attr>:$absent,
                       OptionalAttr<I64Attr>:$step);
  let results = (outs F32:$result);
  let assemblyFormat = "$name `at` $index attr-dict `:` type($result)";
}

def Tile_StoreOp : Tile_Op<"store"> {
  let summary = "store a register tile into a global view (converting to the view's dtype)";
  let description = [{ The inverse of tile.load; elements outside the true extents are not written. }];
  let arguments = (ins Tile_AnyTile:$value, Tile_AnyTile:$view);
  let assemblyFormat = "$value `,` $view attr-dict `:` type($value) `,` type($view)";
}

def Tile_CopyOp : Tile_Op<"copy"> {
  let summary = "publish a [K] split register tile to shared memory";
  let description = [{
    The result is readable by every thread after the next `tile.barrier` (or CTA reduction).
  }];
  let arguments = (ins Tile_AnyTile:$value);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$value attr-dict `:` type($value) `->` type($result)";
}

def Tile_BarrierOp : Tile_Op<"barrier"> {
  let summary = "CTA-wide barrier: shared-memory writes before it are visible after it";
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Elementwise (tiles of one type, or uniform scalars broadcast)
//===----------------------------------------------------------------------===//

def Tile_ConstantOp : Tile_Op<"constant", [Pure]> {
  let summary = "a uniform f32 constant";
  let arguments = (ins F32Attr:$value);
  let results = (outs F32:$result);
  let assemblyFormat = "$value attr-dict";
}

class Tile_BinaryOp<string mnemonic, string formula> : Tile_Op<mnemonic, [Pure]> {
  let summary = "elementwise " # formula;
  let description = [{
    Operands are register tiles of the result's type or uniform f32 scalars (broadcast); the result
    is f32 when both are scalars.
  }];
  let arguments = (ins Tile_TileOrScalar:$lhs, Tile_TileOrScalar:$rhs);
  let results = (outs Tile_TileOrScalar:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}
def Tile_AddOp : Tile_BinaryOp<"add", "a + b">;
def Tile_SubOp : Tile_BinaryOp<"sub", "a − b">;
def Tile_MulOp : Tile_BinaryOp<"mul", "a · b">;
def Tile_DivOp : Tile_BinaryOp<"div", "a / b">;
def Tile_MaxOp : Tile_BinaryOp<"max", "max(a, b)">;
def Tile_MinOp : Tile_BinaryOp<"min", "min(a, b)">;

class Tile_UnaryOp<string mnemonic, string formula> : Tile_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # formula # " (fast-math device intrinsics on the GPU)";
  let arguments = (ins Tile_TileOrScalar:$x);
  let results = (outs Tile_TileOrScalar:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}
def Tile_ExpOp : Tile_UnaryOp<"exp", "eˣ">;
def Tile_Exp2Op : Tile_UnaryOp<"exp2", "2ˣ">;
def Tile_LogOp : Tile_UnaryOp<"log", "ln x">;
def Tile_AbsOp : Tile_UnaryOp<"abs", "|x|">;
def Tile_RsqrtOp : Tile_UnaryOp<"rsqrt", "1/√x">;

def Tile_SelectPositiveOp : Tile_Op<"select_positive", [Pure]> {
  let summary = "uniform select: c > 0 ? a : b";
  let description = [{ Guards a division whose denominator may be zero (all operands f32 scalars). }];
  let arguments = (ins F32:$cond, F32:$lhs, F32:$rhs);
  let results = (outs F32:$result);
  let assemblyFormat = "$cond `,` $lhs `,` $rhs attr-dict";
}

//===----------------------------------------------------------------------===//
// Reductions and products
//===----------------------------------------------------------------------===//

def Tile_ReduceSumOp : Tile_Op<"reduce_sum", [Pure]> {
  let summary = "Σ_d x_d over one or two [K] split tiles: uniform scalars (one CTA-wide reduction)";
  let description = [{
    Result i is the sum of operand i. Two independent sums (k's and q's squared norms, OSDN's ‖u‖² and ⟨d, u⟩)
    share one exchange through shared memory: the CTA synchronises twice for both, not twice each.
  }];
  let arguments = (ins Variadic<Tile_AnyTile>:$xs);
  let results = (outs Variadic<F32>:$sums);
  let assemblyFormat = "$xs attr-dict `:` type($xs) `->` type($sums)";
}

def Tile_RowScaleOp : Tile_Op<"row_scale", [Pure, AllTypesMatch<["tile", "result"]>]> {
  let summary = "diag(d) S: row k of a [K, BV] frag times d_k (d a [K] smem tile)";
  let arguments = (ins Tile_AnyTile:$tile, Tile_AnyTile:$scale);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$tile `,` $scale attr-dict `:` type($tile) `,` type($scale)";
}

def Tile_ContractOp : Tile_Op<"contract", [Pure]> {
  let summary = "Sᵀx for one or two [K] smem vectors x: [BV] quad tiles (a reduction over K)";
  let description = [{
    `%y, %z = tile.contract %S, %x, %w` computes y_c = Σ_k S_kc x_k and z_c = Σ_k S_kc w_k in one
    pass over the fragment and one cross-warp exchange. Synchronises the CTA once, between writing and
    reading its shared scratch; two contracts are kept apart by a barrier (iterations of
    `tile.for_value_tiles` are), so it needs none before its writes.
  }];
  let arguments = (ins Tile_AnyTile:$tile, Variadic<Tile_AnyTile>:$vectors);
  let results = (outs Variadic<Tile_AnyTile>:$results);
  let assemblyFormat = "$tile `,` $vectors attr-dict `:` type($tile) `,` type($vectors) `->` type($results)";
}

def Tile_OuterAddOp : Tile_Op<"outer_add", [Pure, AllTypesMatch<["tile", "result"]>]> {
  let summary = "S + a eᵀ: rank-1 update of a [K, BV] frag by a [K] smem tile and a [BV] quad tile";
  let arguments = (ins Tile_AnyTile:$tile, Tile_AnyTile:$row, Tile_AnyTile:$col);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$tile `,` $row `,` $col attr-dict `:` type($tile) `,` type($row) `,` type($col)";
}

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Tile_ForValueTilesOp : Tile_Op<"for_value_tiles", [NoTerminator, SingleBlock]> {
  let summary = "the body once per value tile this CTA owns (see the function's tile.grid)";
  let description = [{
    With grid `value_tile` the body runs once; with `key_head` it runs for every (value head of the
    key head's group, value tile), iterations separated by a CTA barrier so shared tiles and
    reduction scratch can be reused. Views `at bhv` use the iteration's value head.

    The body's global reads (`tile.load`, `tile.load_scalar`) are issued ahead, as a memory-bound kernel
    needs: the first tile's before the function's first op (so the state stream does not wait for the
    prologue's reductions), and with grid `key_head` the next tile's [K, BV] fragments while the current
    tile computes (its smaller reads at the tile's start). This is legal because the verifier allows a
    tensor read in the body to be written only through a view of the body at `bhv` (the iteration's own
    window), after the body's reads of it.
  }];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$body attr-dict";
}

// Ops of the chunked forward roles (tiles over the rows of one chunk).
include "dgps/Dialect/Tile/IR/TileChunkOps.td"
// Ops of the state_output forward role (a register state walked over the chunks).
include "dgps/Dialect/Tile/IR/TileStateOps.td"
// Ops of the roles that carry a scan state across chunks (chunk summaries, the scan over chunks).
include "dgps/Dialect/Tile/IR/TilePrecondOps.td"

#endif
