//===- TileChunkOps.td - tile maths over the rows of one chunk -*- tablegen -*-===//
//
// Ops of the chunked forward roles (first: chunk_local, --dgps-lower-chunk-local-to-tile). A function with
// `tile.grid = "chunk"` runs one CTA per (chunk slot, value head); its tiles are shared-memory tiles over
// the C rows of the CTA's chunk: [C, K] rows (the input dtype, written bf16 here, or f32), [C] per-row f32
// vectors and [C, C] f32 blocks. Pad rows of a partial last chunk are zero after a load. Results that name
// workspace regions (`into "tok"`) write the CTA's slice of that region of the module's tile.workspace (Workspace.h).
// Ops whose result is "in place" reuse their operand's storage: the operand is dead afterwards.
// Each op is generic maths; the lowering picks which ops and operands express a model.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_TILE_IR_CHUNK_OPS_TD
#define DGPS_DIALECT_TILE_IR_CHUNK_OPS_TD

def Tile_ChunkRowsOp : Tile_Op<"chunk_rows"> {
  let summary = "load the CTA's chunk rows of a [tokens, heads, K] or [tokens, heads] tensor into shared memory";
  let description = [{
    `%k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>` is rows t0 .. t0+C of the
    argument `k` at the CTA's key head; rows past the sequence's end and columns past K are zero. A [C]
    result reads one f32 per row. Loads complete at the next `tile.barrier`.

    Row map (`row_steps` = n >= 2 with `row_phase` = p in [0, n)): the argument has one row per token while
    the chunk's rows are steps, n per token (a forward with several steps per token, docs/math.md §3.7).
    Row r of the row axis then reads token row r / n when r mod n == p and 0 otherwise (a zero log-gate is a
    decay of 1, a zero query reads nothing): runtime/device/dgps/tile/row_map.cuh.
  }];
  let arguments = (ins StrAttr:$name, Tile_HeadOf:$head, OptionalAttr<I64Attr>:$row_steps,
                       OptionalAttr<I64Attr>:$row_phase);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$name `at` $head attr-dict `:` type($result)";
}

def Tile_ChunkFillOp : Tile_Op<"chunk_fill"> {
  let summary = "a [C] shared vector: value on the chunk's real rows, `pad` (default 0) on pad rows";
  let arguments = (ins F32Attr:$value, DefaultValuedAttr<F32Attr, "0.0f">:$pad);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Tile_WorkspaceRowsOp : Tile_Op<"workspace_rows"> {
  let summary = "load the CTA's slice of a workspace region an earlier role wrote, at the key head";
  let description = [{
    `tile.workspace_rows "pcoef" : !tile.tile<[C], f32, smem, row>` reads one f32 per chunk row (0 on pad
    rows); `"pst" : !tile.tile<[K], f32, smem, row>` the chunk's [K] start vector (launch_rules.h
    tile.workspace; both indexed by chunk slot and key head). Visible after the next `tile.barrier`.
  }];
  let arguments = (ins StrAttr:$region);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$region attr-dict `:` type($result)";
}

def Tile_RowExpOp : Tile_Op<"row_exp"> {
  let summary = "y_i = e^{x_i} on the chunk's real rows, `pad` on pad rows ([C] shared vectors)";
  let arguments = (ins Tile_AnyTile:$x, F32Attr:$pad);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Tile_RowMulOp : Tile_Op<"row_mul"> {
  let summary = "y_i = a_i · b_i for [C] shared vectors (each thread its own rows: no barrier needed after)";
  let arguments = (ins Tile_AnyTile:$lhs, Tile_AnyTile:$rhs);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

// The read-out of a per-channel scan state s (tile.channel_scan).
def Tile_ScanReadout : I32EnumAttr<"ScanReadout", "read-out of a channel scan", [
    // P = x^(−r/(1+|r|)), r = ln(s + eps) − c: a soft power of the inclusive state
    I32EnumAttrCase<"soft_power", 0>,
    // P = s before the step (the state is clamped to [min, max] after each step)
    I32EnumAttrCase<"clamped_pre", 1>,
    // P = s after the step (clamped)
    I32EnumAttrCase<"clamped_post", 2>]> {
  let cppNamespace = "::dgps::tile";
}

def Tile_ChannelScanOp : Tile_Op<"channel_scan", [AllTypesMatch<["a", "b"]>,
                                                     AllTypesMatch<["x", "target"]>]> {
  let summary = "per-channel linear scan over the chunk rows, read out as a multiplier of a row tile";
  let description = [{
    Per channel d, sequentially over rows i, from the start vector s0 [K]:
      s_i = a_i s_{i−1} + b_i x_id²          (a, b [C] vectors; x the 16-bit rows [C, K])
    P_id is the read-out (`readout`: soft_power with attributes `base` = x, `eps` and the uniform operand
    `center`; clamped_pre / clamped_post with optional `min` / `max`); pad rows and channels get P = 1.
    The result is bf16(P ⊙ target) [C, K]; in place over `target` unless the target is `x` itself.
  }];
  let arguments = (ins Tile_AnyTile:$x, Tile_AnyTile:$start, Tile_AnyTile:$a, Tile_AnyTile:$b,
                       Tile_AnyTile:$target, Optional<F32>:$center, Tile_ScanReadout:$readout,
                       OptionalAttr<F32Attr>:$base, OptionalAttr<F32Attr>:$eps, OptionalAttr<F32Attr>:$min,
                       OptionalAttr<F32Attr>:$max);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = [{
    $x `,` $start `,` $a `,` $b `apply` $target (`center` $center^)? `readout` $readout attr-dict `:`
    type($x) `,` type($start) `,` type($a) `->` type($result)
  }];
}

def Tile_RowRsqrtNormOp : Tile_Op<"row_rsqrt_norm"> {
  let summary = "per-row inverse norms r_i = (Σ_d x_id² + eps)^(-1/2) of one or two [C, K] tiles";
  let description = [{
    One [C] f32 result per operand, computed in fp32 from the input-dtype values; 0 on pad rows. The
    operands are read, not changed. Results are visible after the next `tile.barrier`.
  }];
  let arguments = (ins Variadic<Tile_AnyTile>:$rows, F32Attr:$eps);
  let results = (outs Variadic<Tile_AnyTile>:$results);
  let assemblyFormat = "$rows attr-dict `:` type($rows) `->` type($results)";
}

def Tile_CumsumOp : Tile_Op<"cumsum", [AllTypesMatch<["x", "result"]>]> {
  let summary = "inclusive prefix sum down the rows, each term scaled first: X_i = Σ_{j<=i} s·x_j (in place)";
  let description = [{
    On a [C] f32 vector or on every column of a [C, K] f32 tile. Pad rows are zero, so they carry the last
    real row's sum. Visible after the next `tile.barrier`.
  }];
  let arguments = (ins Tile_AnyTile:$x, F32Attr:$scale);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Tile_StoreTokenRecordOp : Tile_Op<"store_token_record", [AllTypesMatch<["a", "b", "c"]>,
                                                               AttrSizedOperandSegments]> {
  let summary = "write the per-row record {s·a·2^G, b·2^G, b·2^(G_last − G), c, a, b, G, 0} of the chunk";
  let description = [{
    For [C] vectors a, b, c, optional log2 gates G and a uniform s, writes C + 1 rows of 8 floats into the
    workspace region `into`: row i < C is {s·a_i·2^{G_i}, b_i·2^{G_i}, b_i·2^{G_last − G_i}, c_i, a_i, b_i,
    G_i, 0}, row C is {2^{G_last}, 0, ...} (G_last = G_{C−1}); without G every power of 2 is 1 and G_i is 0.
    With `fields` e, f (both [C]), fields 4 and 5 hold e_i, f_i instead of a_i, b_i.
  }];
  let arguments = (ins Tile_AnyTile:$a, Tile_AnyTile:$b, Tile_AnyTile:$c, F32:$s, Optional<Tile_AnyTile>:$gate,
                       Variadic<Tile_AnyTile>:$fields, StrAttr:$into);
  let assemblyFormat = [{
    $a `,` $b `,` $c `,` $s (`gate` $gate^)? (`fields` `(` $fields^ `:` type($fields) `)`)? `into` $into attr-dict
    `:` type($a)
    (`,` type($gate)^)?
  }];
}

def Tile_StoreGatedRowsOp : Tile_Op<"store_gated_rows"> {
  let summary = "write y_id = x_id·2^{G_id} (or ·2^{G_last,d − G_id} with reverse) as bf16 [C, K]";
  let arguments = (ins Tile_AnyTile:$x, Tile_AnyTile:$gate, StrAttr:$into, UnitAttr:$reverse);
  let assemblyFormat = "$x `,` $gate `into` $into attr-dict `:` type($x) `,` type($gate)";
}

def Tile_StoreRowsOp : Tile_Op<"store_rows"> {
  let summary = "write a bf16 [C, K] row tile as it is into a workspace region (the stored write key \"pwk\" or "
                "query \"pwq\")";
  let description = [{
    y_id = x_id for every row (pad rows included: they hold what the tile holds, zero for a scan of zero rows).
    The region is per (chunk slot, value head), bf16 [C, K] rows at pitch KP (tile.workspace pwk or pwq;
    launch_rules.h workspaceRowPitch). Every writer of
    the tile must be past a `tile.barrier`.
  }];
  let arguments = (ins Tile_AnyTile:$x, StrAttr:$into);
  let assemblyFormat = "$x `into` $into attr-dict `:` type($x)";
}

def Tile_StoreLastExp2Op : Tile_Op<"store_last_exp2"> {
  let summary = "write 2^{G_last,d} for every channel d of a [C, K] f32 tile (its last row)";
  let arguments = (ins Tile_AnyTile:$gate, StrAttr:$into);
  let assemblyFormat = "$gate `into` $into attr-dict `:` type($gate)";
}

def Tile_EncodeBf16Op : Tile_Op<"encode_bf16", [AllTypesMatch<["x", "result"]>]> {
  let summary = "re-encode a [C, K] tile of the input dtype as bf16 (tensor-core operand; in place)";
  let description = [{
    A no-op for bf16 inputs; fp16 inputs are converted. Every earlier reader of the operand must be past a
    `tile.barrier` (the emitter puts one in front for fp16 inputs).
  }];
  let arguments = (ins Tile_AnyTile:$x);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Tile_LowerProductsOp : Tile_Op<"lower_products", [AttrSizedOperandSegments]> {
  let summary = "masked, gated lower-triangular products R_p Kcᵀ of the chunk over 16x16 blocks";
  let description = [{
    For parts p with row operands R_p [C, K] (bf16), one column operand Kc [C, K], row factors a_p (a [C]
    vector or a uniform f32) and b_p ([C] vectors), a column factor c ([C]) and optional gates G:
      P_p[i, j] = (a_p,i · b_p,i) · c_j · Σ_d R_p[i, d] Kc[j, d] · w(i, j, d)
    with w = 2^{G_i − G_j} for a [C] gate (applied to the block, the exponent masked before the
    exponential), 2^{G_id − G_jd} for a [C, K] gate (applied inside the sum), 1 without. Every part but the
    last is strictly lower (j < i) and a result, a [C, C] f32 shared tile; the last part is lower
    inclusive (j <= i) and written as bf16 [C, C] to the workspace region `into`. The results may reuse the
    operands' storage: the operands are dead afterwards. With a [C, K] gate the row and column operands are
    gated in place (docs/math.md §4.3), so the verifier rejects any later use of them; a column operand that
    is also a row operand is gated into the layout's column copy (LaunchContract.h chunkLocalLayout kcol).
  }];
  let arguments = (ins Variadic<Tile_AnyTile>:$rows, Tile_AnyTile:$cols, Variadic<Tile_TileOrScalar>:$row_a,
                       Variadic<Tile_AnyTile>:$row_b, Tile_AnyTile:$col, Optional<Tile_AnyTile>:$gate,
                       StrAttr:$into);
  let results = (outs Variadic<Tile_AnyTile>:$results);
  let assemblyFormat = [{
    `rows` `(` $rows `)` `cols` $cols `row_factors` `(` $row_a `)` `(` $row_b `)` `col_factor` $col
    (`gate` $gate^)? `into` $into attr-dict `:` functional-type(operands, results)
  }];
}

def Tile_TriInverseOp : Tile_Op<"tri_inverse", [AllTypesMatch<["a", "result"]>]> {
  let summary = "T = (I + A)^{-1} of a strictly lower [C, C] f32 shared tile (in place)";
  let arguments = (ins Tile_AnyTile:$a);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$a attr-dict `:` type($a)";
}

def Tile_StoreLowerColScaledOp : Tile_Op<"store_lower_col_scaled"> {
  let summary = "write tril(T·diag(s)) as bf16 [C, C] (lower 16x16 blocks) for a [C, C] tile and a [C] vector";
  let arguments = (ins Tile_AnyTile:$t, Tile_AnyTile:$s, StrAttr:$into);
  let assemblyFormat = "$t `,` $s `into` $into attr-dict `:` type($t) `,` type($s)";
}

#endif
