//===- TilePrecondOps.td - chunk summaries and scans over chunks -*- tablegen -*-===//
//
// Ops of the roles that carry a per-channel scan state across chunks (first: the preconditioner roles
// precond_summary and precond_scan, --dgps-lower-precond-roles-to-tile). Generic maths: a summary of one
// chunk's per-channel scan (grid "chunk_key_head": one CTA per chunk slot and key head, over the chunk-row
// tiles of TileChunkOps.td) and the affine scan that combines the summaries over a sequence's chunks (grid
// "sequence_key_head": one CTA per sequence and key head). Workspace regions are those of the module's
// tile.workspace, indexed by chunk slot and key head.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_TILE_IR_PRECOND_OPS_TD
#define DGPS_DIALECT_TILE_IR_PRECOND_OPS_TD

def Tile_ChannelScanTotalOp : Tile_Op<"channel_scan_total", [AllTypesMatch<["a", "b", "r"]>]> {
  let summary = "the end state of a per-channel scan down one chunk, from zero, into a workspace region";
  let description = [{
    Per channel d < K, sequentially over the chunk's real rows i:
      s_d ← a_i·s_d + b_i·(r_i·x_id)²       from s_d = 0
    and the CTA's [K] slice of workspace region `into` (at its chunk slot and key head) receives s.
    `x` is a [C, K] 16-bit shared tile (read in fp32 from the input dtype); a, b, r are [C] f32 shared vectors
    (r a per-row factor such as an inverse l2 norm). Reads its operands after a barrier.
    ```mlir
    tile.channel_scan_total %k, %a, %b, %r into "psum" : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>
    ```
  }];
  let arguments = (ins Tile_AnyTile:$x, Tile_AnyTile:$a, Tile_AnyTile:$b, Tile_AnyTile:$r, StrAttr:$into);
  let assemblyFormat = "$x `,` $a `,` $b `,` $r `into` $into attr-dict `:` type($x) `,` type($a)";
}

def Tile_StoreSumExpOp : Tile_Op<"store_sum_exp"> {
  let summary = "e^{Σ_i x_i} of a [C] shared vector (pad rows 0) into the CTA's element of a workspace region";
  let arguments = (ins Tile_AnyTile:$x, StrAttr:$into);
  let assemblyFormat = "$x `into` $into attr-dict `:` type($x)";
}

def Tile_ChunkAffineScanOp : Tile_Op<"chunk_affine_scan"> {
  let summary = "per-channel affine scan over a sequence's chunk summaries: s ← γ_c·s + u_c";
  let description = [{
    Per channel d < K of the CTA's (sequence, key head), over the sequence's chunks c in order:
      region `starts`[c][d] = s_d;   s_d ← γ_c·s_d + u_c[d]
    from s_d = argument `start`[n][h][d] (the value `absent` when that tensor is not given), with γ_c the
    f32 of region `decay` and u_c the [K] vector of region `step` at chunk c. With `final`, the argument of
    that name receives s after the last chunk (when the caller passes it).
    ```mlir
    tile.chunk_affine_scan start "initial_precond_state" decay "pgam" step "psum" into "pst" final "final_precond_state" {absent = 0.0 : f32}
    ```
  }];
  let arguments = (ins StrAttr:$start, StrAttr:$decay, StrAttr:$step, StrAttr:$starts, OptionalAttr<StrAttr>:$final,
                       DefaultValuedAttr<F32Attr, "0.0f">:$absent);
  let assemblyFormat = [{
    `start` $start `decay` $decay `step` $step `into` $starts (`final` $final^)? attr-dict
  }];
}

def Tile_HypergradChunkSummaryOp : Tile_Op<"hypergrad_chunk_summary", [AllTypesMatch<["beta", "retention"]>]> {
  let summary = "one chunk's summary of the chunked hypergradient d-scan, into workspace regions hgtri and hgvec";
  let description = [{
    OSDN's d-scan in its chunked form (docs/math.md §5.2 "Chunked form"; chunk.hypergrad_chunk_summary). For
    the CTA's chunk and key head, with rows i, j, m < C of the raw 16-bit key `x` ([C, K] shared), the gain
    `beta` and the retention log-gate `retention` ([C] f32 shared vectors, 0 on pad rows):
      rk_i = (Σ_x x_ix² + l2_eps)^{-1/2} (1 without `l2_eps`),  u_i = (rk_i x_i)²,  κ_i = eta β_i / ‖k̂_i‖²
      (0 for a zero key),  cum_i = Σ_{l<i} ρ_l,  𝒢_ij = β_i ⟨u_i, u_j⟩ κ_j e^{cum_i − cum_{j+1}} (i > j),
      𝒯 = (I + 𝒢)^{-1}
    region "hgtri" receives the lower triangle κ_j 𝒯_jm β_m e^{cum_m} rk_m² (m <= j, packed by rows) and
    "hgvec" {κ_j Σ_m 𝒯_jm [C], e^{cum_C − cum_{j+1}} rk_j² [C], e^{cum_C}, 0, 0, 0}: chunk.hypergrad_chunk_summary's
    read rows, base, write rows and decay with the l2 factor folded in, so the pass reads only the raw key.
    Its operands must sit where the role's shared memory has them (tile/feedback_scan_layout.h feedbackSummarySmem); it
    reads them after a barrier and overwrites the key tile.
    ```mlir
    tile.hypergrad_chunk_summary %k, %beta, %rho into "hgtri", "hgvec" {eta = 1.0 : f32, l2_eps = 1.0e-6 : f32} : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>
    ```
  }];
  let arguments = (ins Tile_AnyTile:$x, Tile_AnyTile:$beta, Tile_AnyTile:$retention, StrAttr:$tri, StrAttr:$vec,
                       F32Attr:$eta, OptionalAttr<F32Attr>:$l2_eps);
  let assemblyFormat = [{
    $x `,` $beta `,` $retention `into` $tri `,` $vec attr-dict `:` type($x) `,` type($beta)
  }];
}

def Tile_HypergradChunkPassOp : Tile_Op<"hypergrad_chunk_pass"> {
  let summary = "the pass over a sequence's chunk summaries of the chunked hypergradient d-scan";
  let description = [{
    Per (sequence, key head), over the sequence's chunks c in order (chunk.hypergrad_chunk_pass), from d =
    argument `start`[n][h] (the value `absent` in every channel when that tensor is not given), with x the raw
    rows of argument `key` and the chunk's summaries from regions `tri` and `vec` (hypergrad_chunk_summary):
      region `starts`[c] = d;  coef_j = a_j − Σ_{m<=j} tri_jm ⟨x_m², d⟩ → region `coef`[c][j] (0 on pad rows);
      d ← L_C d + Σ_j y_j coef_j x_j²
    With `final`, the argument of that name receives d after the last chunk (when the caller passes it).
    ```mlir
    tile.hypergrad_chunk_pass key "k" start "initial_precond_state" summary "hgtri", "hgvec" into "pst", "pcoef" final "final_precond_state" {absent = 1.0 : f32}
    ```
  }];
  let arguments = (ins StrAttr:$key, StrAttr:$start, StrAttr:$tri, StrAttr:$vec, StrAttr:$starts, StrAttr:$coef,
                       OptionalAttr<StrAttr>:$final, DefaultValuedAttr<F32Attr, "0.0f">:$absent);
  let assemblyFormat = [{
    `key` $key `start` $start `summary` $tri `,` $vec `into` $starts `,` $coef (`final` $final^)? attr-dict
  }];
}

def Tile_HypergradTokenScanOp : Tile_Op<"hypergrad_token_scan"> {
  let summary = "OSDN's d-scan token by token (a clamped scan): chunk-start d and per-token coefficients";
  let description = [{
    Per (sequence, key head), one warp (grid "sequence_key_head_warp"), over the sequence's tokens t in order
    (chunk.hypergrad_pass with a clamp, docs/math.md §5.2), from d = argument `start`[n][h] (`absent` in every
    channel when not given), with x the raw rows of argument `key`, β the argument `gain` (1 without) at the
    key head's first value head and ρ = e^{retention} (1 without):
      u = (rk x_t)², κ = eta β_t / ‖k̂_t‖² (0 for a zero key), coef_t = κ (1 − β_t ⟨d, u⟩) → region `coef`;
      d ← clamp(ρ_t d + coef_t u, [clamp_min, clamp_max])
    with d at every chunk start into region `starts`, and (with `final`) d after the last token into the
    argument of that name. rk = (Σ x² + l2_eps)^{-1/2}, 1 without `l2_eps`. An unclamped scan is affine in d and
    takes the chunked form instead (hypergrad_chunk_summary / hypergrad_chunk_pass), so at least one bound is
    required.
    ```mlir
    tile.hypergrad_token_scan key "k" gain "beta" start "initial_precond_state" into "pst", "pcoef" final "final_precond_state" {absent = 1.0 : f32, clamp_max = 2.0 : f32, eta = 1.0 : f32, l2_eps = 1.0e-6 : f32}
    ```
  }];
  let arguments = (ins StrAttr:$key, OptionalAttr<StrAttr>:$gain, OptionalAttr<StrAttr>:$retention,
                       StrAttr:$start, StrAttr:$starts, StrAttr:$coef, OptionalAttr<StrAttr>:$final, F32Attr:$eta,
                       OptionalAttr<F32Attr>:$l2_eps, OptionalAttr<F32Attr>:$clamp_min,
                       OptionalAttr<F32Attr>:$clamp_max, DefaultValuedAttr<F32Attr, "0.0f">:$absent);
  let assemblyFormat = [{
    `key` $key (`gain` $gain^)? (`retention` $retention^)? `start` $start `into` $starts `,` $coef
    (`final` $final^)? attr-dict
  }];
}

#endif
