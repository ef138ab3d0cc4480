//===- TileStateOps.td - the sequential walk of a register state over chunks -*- tablegen -*-===//
//
// Ops of the state_output forward role (--dgps-lower-state-output-to-tile). A function with
// `tile.role = "state_output"` and `tile.grid = "value_tile"` runs one CTA per (sequence, value head, value
// tile of BV columns); its warps own 16 value columns each and keep the transposed state Sᵀ [BV, K] in f32
// registers (runtime/device/dgps/tile/state_frag.cuh). The chunks of the sequence are walked in order; per
// chunk the operands are staged in shared memory (LaunchContract.h walkLayout) from the chunk_local
// workspace regions (the module's tile.workspace, Workspace.h) and the input tensors named by the op.
// Each op is generic maths; the lowering picks the operands and attributes that express a model.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_TILE_IR_STATE_OPS_TD
#define DGPS_DIALECT_TILE_IR_STATE_OPS_TD

// Where the walk's state comes from before the first chunk.
def Tile_StateStart : I32EnumAttr<"StateStart", "start state of a state walk", [
    // the `initial_state` argument [N, HV, K, V]; zero when the pointer is null
    I32EnumAttrCase<"argument", 0>,
    // zero (a segment's own contribution, e.g. the end state of a segment from a zero start)
    I32EnumAttrCase<"zero", 1>,
    // the identity (a transition product over a square K x K state; needs zero_values)
    I32EnumAttrCase<"identity", 2>,
    // the workspace region `start_region` [S, HV, K, V] f32 at the walk's segment slot (the folded start of
    // a segment of the sequence-parallel state pass)
    I32EnumAttrCase<"region", 3>]> {
  let cppNamespace = "::dgps::tile";
}

// How the state is carried from one chunk to the next before the chunk's rank-C update.
def Tile_StateCarry : I32EnumAttr<"StateCarry", "state carry between chunks", [
    // Sᵀ unchanged
    I32EnumAttrCase<"none", 0>,
    // Sᵀ·s with the uniform s of the record's row C, field 0
    I32EnumAttrCase<"uniform", 1>,
    // Sᵀ·diag(d) with d the chunk's [K] vector of the workspace region `columns`
    I32EnumAttrCase<"columns", 2>]> {
  let cppNamespace = "::dgps::tile";
}

// The value-side operand N of a chunk, from its values V and the record's per-row factors.
def Tile_ValueForm : I32EnumAttr<"ValueForm", "value-side operand of a state walk", [
    // Nᵀ = (Vᵀ − (S·read_keyᵀ)ᵀ diag(record field 1)) Tᵀ, T the lower-triangular block `solve`
    I32EnumAttrCase<"residual_lower", 0>,
    // Nᵀ = Vᵀ diag(record field 3)
    I32EnumAttrCase<"scaled", 1>]> {
  let cppNamespace = "::dgps::tile";
}

// The operand of a state walk that is rebuilt per chunk before the consumers read it (`rescale`).
def Tile_WalkOperand : I32EnumAttr<"WalkOperand", "operand of a state walk rebuilt per chunk", [
    // the read query Q of the read-out (in place)
    I32EnumAttrCase<"query", 0>,
    // the write key W of the rank-C update (in place over a workspace operand, or from the scan's rows)
    I32EnumAttrCase<"write_key", 1>]> {
  let cppNamespace = "::dgps::tile";
}

// Where a walk's preconditioned operand comes from: a key-side preconditioner's write key P⊙k̂ or a query-side
// one's query P⊙q̂ (docs/math.md §8.3, DeviceFeatures.h FeatureSet::write_key; chosen by the tile lowerings'
// `write-key` option).
def Tile_WriteKeyForm : I32EnumAttr<"WriteKeyForm", "source of a walk's preconditioned write key or query", [
    // rebuilt per chunk by the walk's producer warpgroup from the raw rows and pst (`rescale write_key` / `query`)
    I32EnumAttrCase<"rebuilt", 0>,
    // written once by chunk_local ("pwk", inside "opw" with per-channel decay, or "pwq" for the query) and
    // loaded like any staged tile
    I32EnumAttrCase<"stored", 1>]> {
  let cppNamespace = "::dgps::tile";
}

def Tile_StateWalkOp : Tile_Op<"state_walk"> {
  let summary = "walk the chunks of a sequence in order, carrying a register state: read-out and rank-C update";
  let description = [{
    Per chunk, with Sᵀ the state at the chunk's start, Q, R, W the bf16 [C, K] row tiles named by `query`,
    `read_key` and `write_key` ("q", "k": the input tensors at the key head; "opq", "opk", "opw": workspace
    regions), V the value rows (`values`, "v", at the value head), the per-row record `record` ("tok":
    [C + 1][8] f32 with fields 0 a_q, 1 c, 2 w, 3 b; row C field 0 the uniform carry), L and T the
    lower-triangular bf16 [C, C] blocks `readout` ("aqk") and `solve` ("tb"):
      XQᵀ = Sᵀ Qᵀ,  XRᵀ = Sᵀ Rᵀ                            (one pass over S)
      Nᵀ  = value_form (residual_lower or scaled, see ValueForm)
      Oᵀ  = XQᵀ diag(a_q) + Nᵀ Lᵀ                          -> o rows of the chunk   (when `write_output`)
      Sᵀ  ← carry(Sᵀ) + (Nᵀ diag(w)) W
    The state starts as `start` and, when `write_final`, is written to `final_state` [N, HV, K, V] after the
    last chunk. Pad rows of a partial last chunk are exact no-ops (their operands are zero). Products take
    bf16 operands and accumulate in f32; the state enters them as bf16.

    In a function with grid `segment` (the sequence-parallel state pass, docs/math.md §8) the walk covers
    one segment's chunks instead of the whole sequence; `start region` reads the segment's start from the
    workspace region `start_region` [S, HV, K, V] and `end_region` writes its end state to a workspace region
    [S, HV, K, W] f32 at the segment slot (W = V, or K with `zero_values`). `zero_values` drops the value
    term (V = 0): the state is then K x K (its "value" columns are M's columns, tiled like value tiles) and
    the walk from the identity is the segment's transition product M: with the delta rule's residual
    N = −𝒯 diag(c) (R M), with a linear rule N = 0 (only the carry acts).

    `rescale` (query or write_key) rewrites that operand of every chunk before the chunk's products:
      X ← bf16(P ⊙ X_src)
    with X_src the operand's own rows (a workspace operand or the raw query, in place) or, for a write key "k"
    (the raw key), the scan rows. P [C, K] is a per-channel scan down the chunk's rows (the same maths as
    tile.channel_scan, runtime/device/dgps/tile/channel_scan.cuh):
      s_i = a_i s_{i−1} + b_i x_id²,  s_{−1} = the [K] vector `scan_start` at (chunk slot, key head),
    x the 16-bit rows `scan_rows` ("k": the raw input key at the key head), a and b the record's fields 4 and
    5 (written by chunk_local from the same op), and the read-out `scan_readout`: soft_power with `scan_base`,
    `scan_eps` and the centre `scan_center` (an [H] f32 input read at the key head, 0 when absent), or
    clamped_pre / clamped_post with optional `scan_min` / `scan_max`. Pad rows and channels get P = 1.
    The rebuild runs off the walk's sequential path: `producer_warps` warps after the consumer warps
    (warp_split.cuh) rebuild chunk c+1 while the consumers run chunk c; `registers` = [consumer, producer] is
    the per-thread register budget each side keeps when registers can be handed over (whole warpgroups, over
    256 threads); the launch's thread count and stage layout (LaunchContract.h walkThreads /
    LaunchContract.h walkLayout) must provide for them.
    `write_key_form` (printed after the write key: `as rebuilt` / `as stored`) is set on every walk of a
    key-side preconditioner: `rebuilt` goes with `rescale write_key`; `stored` with no rescale and the write key
    chunk_local stored, "pwk" (bf16 P ⊙ k, the raw key rows; the record's field 2 keeps the l2norm factor and
    the gate) or, with per-channel decay, "opw" (P ⊙ k ⊙ 2^{G_C − G_i}). Which walks take which form is the
    launch contract's (tile.launch_features write_key, DeviceFeatures.h walkRebuildsKw), checked on the function.
    `query_form` (printed after the query: `as rebuilt` / `as stored`) is the same for a query-side
    preconditioner's query, set on every walk that writes o (the query's only reader): `rebuilt` goes with
    `rescale query` and the raw query "q"; `stored` with no rescale and the query chunk_local stored, "pwq"
    (bf16 P ⊙ q, the raw query rows; the record's field 0 keeps the scale, the l2norm factor and the gate)
    (tile.launch_features write_key 1, DeviceFeatures.h needPwq).
    Row map (`row_steps` = n >= 2, `query_phase`, `output_phase` in [0, n)): the walk's rows are steps, n per
    token (docs/math.md §3.7), while the input query "q" and the output o have one row per token. Row r reads
    the query of token r / n when r mod n == query_phase (else a zero query row), and o's token row r / n is
    written from row r when r mod n == output_phase (other rows are not stored). The other operands (keys,
    values, workspace) have one row per step. runtime/device/dgps/tile/row_map.cuh. A mapped walk writes o
    (a walk without a read-out reads no per-token tensor); rows are absolute, so a segment's corrected walk
    (start region) takes the same map.
  }];
  let arguments = (ins Tile_StateStart:$start, StrAttr:$query, StrAttr:$write_key, OptionalAttr<StrAttr>:$read_key,
                       StrAttr:$values, StrAttr:$record, OptionalAttr<StrAttr>:$solve, StrAttr:$readout,
                       Tile_ValueForm:$value_form, Tile_StateCarry:$carry, OptionalAttr<StrAttr>:$columns,
                       UnitAttr:$write_output, UnitAttr:$write_final, OptionalAttr<StrAttr>:$start_region,
                       OptionalAttr<StrAttr>:$end_region, UnitAttr:$zero_values,
                       OptionalAttr<Tile_WalkOperand>:$rescale, OptionalAttr<StrAttr>:$scan_rows,
                       OptionalAttr<StrAttr>:$scan_start, OptionalAttr<Tile_ScanReadout>:$scan_readout,
                       OptionalAttr<StrAttr>:$scan_center, OptionalAttr<F32Attr>:$scan_base,
                       OptionalAttr<F32Attr>:$scan_eps, OptionalAttr<F32Attr>:$scan_min,
                       OptionalAttr<F32Attr>:$scan_max, OptionalAttr<I32Attr>:$producer_warps,
                       OptionalAttr<DenseI32ArrayAttr>:$registers,
                       OptionalAttr<I64Attr>:$row_steps, OptionalAttr<I64Attr>:$query_phase,
                       OptionalAttr<I64Attr>:$output_phase, OptionalAttr<Tile_WriteKeyForm>:$write_key_form,
                       OptionalAttr<Tile_WriteKeyForm>:$query_form);
  let extraClassDeclaration = [{
    /// The rebuild's attributes agree (rescale, scan_*, producer_warps, registers).
    ::mlir::LogicalResult verifyRescale();
    /// write_key_form agrees with rescale and the write key's source.
    ::mlir::LogicalResult verifyWriteKeyForm();
    /// query_form agrees with rescale and the query's source.
    ::mlir::LogicalResult verifyQueryForm();
  }];
  let assemblyFormat = [{
    `start` $start `query` $query (`as` $query_form^)? `write_key` $write_key (`as` $write_key_form^)?
    (`read_key` $read_key^)? `values` $values
    `record` $record (`solve` $solve^)? `readout` $readout `value_form` $value_form `carry` $carry
    (`columns` $columns^)? (`start_region` $start_region^)? (`end_region` $end_region^)?
    (`rescale` $rescale^ `scan` $scan_rows `from` $scan_start `readout` $scan_readout)?
    (`center` $scan_center^)? (`producer_warps` $producer_warps^ `registers` $registers)? attr-dict
  }];
}

def Tile_StateFoldOp : Tile_Op<"state_fold"> {
  let summary = "the sequential fold of the segment summaries of a sequence-parallel state pass";
  let description = [{
    In a function with grid `value_tile` (one CTA per sequence, value head and value tile), over the
    sequence's segments in token order (docs/math.md §8, runtime/device/dgps/tile/state_fold.cuh):
      h = initial_state[n] (zero when null);  per segment s:  start[s] = h;  h = M_s h + E_s
      final_state[n] = h                                          (when `write_final`)
    in f32. `trans` [S, HV, K, K], `ext` [S, HV, K, V] and `start` [S, HV, K, V] name workspace regions.
  }];
  let arguments = (ins StrAttr:$trans, StrAttr:$ext, StrAttr:$start, UnitAttr:$write_final);
  let assemblyFormat = [{ `trans` $trans `ext` $ext `start` $start attr-dict }];
}

#endif
