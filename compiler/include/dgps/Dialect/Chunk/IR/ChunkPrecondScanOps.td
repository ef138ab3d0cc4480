//===- ChunkPrecondScanOps.td - OSDN's d-scan parallel over time --*- tablegen -*-===//
//
// The hypergradient (OSDN) preconditioner scan in its chunked form (docs/math.md §5.2, "Chunked
// form"), written by --chunk-parallel-precond-scan in place of hypergrad_pass when the spec has no
// clamp. Without a clamp every token's step is affine in d, so the map from a chunk's incoming d to
// every d inside the chunk is affine; it has the WY form of the delta rule with value dimension 1:
// read key β u, write key κ u, value 1 (u = k̂ ⊙ k̂, κ = η β / ‖k̂‖², 0 for a zero key).
//
//   stage 1 (hypergrad_chunk_summary, parallel over chunks and key heads): the chunk's summary
//            read rows R, base a, write rows Y and log retention;
//   stage 2 (hypergrad_chunk_pass, sequential over the chunks of one sequence, parallel over heads):
//            coef = a − R d, d ← e^{log_decay} d + Yᵀ coef   (4CK FLOPs per chunk, no per-token
//            cross-channel reduction);
//   stage 3 (hypergrad_apply, unchanged): d inside a chunk from its start state and coef.
//
// Its results are hypergrad_pass's (start, coef, final), so everything after the pass is unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_CHUNK_IR_PRECOND_SCAN_OPS_TD
#define DGPS_DIALECT_CHUNK_IR_PRECOND_SCAN_OPS_TD

def Chunk_HypergradChunkSummaryOp : Chunk_PureOp<"hypergrad_chunk_summary", [AttrSizedOperandSegments]> {
  let summary = "per chunk, the affine map from its incoming d to its step coefficients and end d";
  let description = [{
    Per chunk and key head, in parallel, with in-chunk token indices i, j < n (n = the chunk's
    length), u_j = k̂_j ⊙ k̂_j, κ_j = η β_j / ‖k̂_j‖² (0 when ‖k̂_j‖² = 0), ρ = the log retention
    (absent: 0), L_i = exp(Σ_{l<i} ρ_l) and Λ_{ij} = exp(Σ_{j<l<i} ρ_l) = L_i / L_{j+1}:
      𝒢_ij = β_i ⟨u_i, u_j⟩ κ_j Λ_ij  (i > j, strictly lower),   𝒯 = (I + 𝒢)^{-1}
      read_rows_j  = κ_j Σ_i 𝒯_ji β_i L_i u_i           (so that coef = base − read_rows · d)
      base_j       = κ_j Σ_i 𝒯_ji                        (coef from d = 0)
      write_rows_j = exp(Σ_{j<l<n} ρ_l) u_j              (token j's step carried to the chunk's end)
      log_decay    = Σ_{l<n} ρ_l
    key [B,T,H,K], gain β [B,T,HV] (absent: 1; HV = H), retention [B,T,H]
    → read_rows [B,T,H,K], base [B,T,H], write_rows [B,T,H,K], log_decay [B,NT,H] (f32 on the device).
    About 2C²K (the Gram matrix of u) + C³/3 (the solve) + 2C²K (read_rows) FLOPs per chunk.
  }];
  let arguments = (ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gain,
                       Optional<Chunk_AnyTensor>:$retention, F64Attr:$eta);
  let results = (outs Chunk_AnyTensor:$read_rows, Chunk_AnyTensor:$base, Chunk_AnyTensor:$write_rows,
                      Chunk_AnyTensor:$log_decay);
  let assemblyFormat = [{
    $key (`gain` $gain^)? (`retention` $retention^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_HypergradChunkPassOp : Chunk_PureOp<"hypergrad_chunk_pass"> {
  let summary = "the short pass over chunk summaries: chunk-start d and every token's step coefficient";
  let description = [{
    Per sequence n and key head, over its chunks in order, from d = init[n] (absent: d_init in
    every channel):
      start_c = d;   coef_j = base_j − ⟨read_rows_j, d⟩ (j in c);   d ← e^{log_decay_c} d + Σ_j coef_j write_rows_j
      final[n] = d   (a sequence without tokens keeps its initial d).
    coef equals hypergrad_pass's c_t = κ_t (1 − β_t ⟨d_t, u_t⟩). read_rows, write_rows [B,T,H,K],
    base [B,T,H], log_decay [B,NT,H], init [N,H,K] → start [B,NT,H,K], coef [B,T,H], final [N,H,K].
  }];
  let arguments = (ins Chunk_AnyTensor:$read_rows, Chunk_AnyTensor:$base, Chunk_AnyTensor:$write_rows,
                       Chunk_AnyTensor:$log_decay, Optional<Chunk_AnyTensor>:$init, F64Attr:$d_init);
  let results = (outs Chunk_AnyTensor:$start, Chunk_AnyTensor:$coef, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $read_rows `,` $base `,` $write_rows `,` $log_decay (`init` $init^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

#endif
