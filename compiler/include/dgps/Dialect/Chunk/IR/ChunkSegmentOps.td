//===- ChunkSegmentOps.td - the sequence-parallel state pass ----*- tablegen -*-===//
//
// The state pass split into segments (docs/math.md §8), written by --chunk-segment-state-pass. A
// segment is L consecutive chunks of one sequence (L = the function attribute chunk.segment_chunks;
// absent: chosen at launch by the rule of dsl/include/dgps/dsl/SegmentScan.h, chooseSegmentChunks).
// Segments restart at every sequence start, so a varlen document never shares a segment with another;
// the last segment of a sequence may hold fewer than L chunks. Per-segment tensors use the symbolic
// dim NS: segment slots per batch row (all segments of the packed batch with varlen, B = 1), numbered
// in sequence order and then token order, like chunk slots (NT).
//
// Every step of the recurrence is affine in the state, so over a segment s
//   S_end = M_s S_start + E_s,
// M_s (K×K) the product of the segment's transitions, E_s (K×V) its end state from a zero start. The
// ops compute (M_s, E_s) for all segments in parallel, fold them sequentially in segment order, and
// rerun every segment's chunks from its folded start. The preconditioner states are carried first, by
// the same two-level scan on their own summaries.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_CHUNK_IR_SEGMENT_OPS_TD
#define DGPS_DIALECT_CHUNK_IR_SEGMENT_OPS_TD

def Chunk_SegmentSummaryOp : Chunk_PureOp<"segment_summary", [AttrSizedOperandSegments]> {
  let summary = "per segment: its end state from zero (E) and its K×K transition product (M)";
  let description = [{
    Per segment s of a sequence and value head, in parallel over segments, both with the chunk step
    of state_pass (v_new = U − W X, X ← D_C X + (e^{G_C − G} ⊙ K̃)ᵀ v_new):
      E_s = X after the segment's chunks from X = 0              (the ordinary pass, [K, V])
      M_s = X after the segment's chunks from X = I_K with U = 0 (the same pass on the identity, [K, K])
    so the chunk's transition is D_C − (e^{G_C − G} ⊙ K̃)ᵀ W, with the write key K̃ = P ⊙ k̂ of a
    key-side preconditioner and W from the read key (docs/math.md §4.1, §8). Without W (linear solve)
    M_s = Π D_C. Operands as state_pass: w [B,T,HV,K], u [B,T,HV,V], write_key [B,T,H,K], gate G
    → ext [B,NS,HV,K,V], trans [B,NS,HV,K,K] (f32 on the device).
  }];
  let arguments = (ins Optional<Chunk_AnyTensor>:$w, Chunk_AnyTensor:$u, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gate);
  let results = (outs Chunk_AnyTensor:$ext, Chunk_AnyTensor:$trans);
  let assemblyFormat = [{
    (`w` $w^ `,`)? `u` $u `,` `write` $write_key (`gate` $gate^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_SegmentFoldOp : Chunk_PureOp<"segment_fold"> {
  let summary = "the sequential fold over segments: every segment's start state and the final state";
  let description = [{
    Per sequence n and value head, over its segments in order (fp32 on the device):
      X = init[n] (or 0);  start_s = X;  X ← M_s X + E_s;  final[n] = X
    2K²V FLOPs per segment. ext [B,NS,HV,K,V], trans [B,NS,HV,K,K], init [N,HV,K,V]
    → start [B,NS,HV,K,V], final [N,HV,K,V]. A sequence without tokens keeps its initial state.
  }];
  let arguments = (ins Chunk_AnyTensor:$ext, Chunk_AnyTensor:$trans, Optional<Chunk_AnyTensor>:$init);
  let results = (outs Chunk_AnyTensor:$start, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $ext `,` $trans (`init` $init^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_SegmentStatePassOp : Chunk_PureOp<"segment_state_pass", [AttrSizedOperandSegments]> {
  let summary = "state_pass rerun per segment from its folded start state (parallel over segments)";
  let description = [{
    As state_pass, but every segment's first chunk starts from start[s] instead of the previous
    chunk's state, so segments run in parallel: h_c = X; v_new = U − W X; X ← D_C X + (e^{G_C − G}
    ⊙ K̃)ᵀ v_new. w, u, write_key, gate as state_pass; start [B,NS,HV,K,V]
    → v_new [B,T,HV,V], h [B,NT,HV,K,V]. The final state is segment_fold's.
  }];
  let arguments = (ins Optional<Chunk_AnyTensor>:$w, Chunk_AnyTensor:$u, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gate, Chunk_AnyTensor:$start);
  let results = (outs Chunk_AnyTensor:$v_new, Chunk_AnyTensor:$states);
  let assemblyFormat = [{
    (`w` $w^ `,`)? `u` $u `,` `write` $write_key (`gate` $gate^)? `start` $start attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_AccumSegmentPassOp : Chunk_PureOp<"accum_segment_pass"> {
  let summary = "accum_pass as a two-level scan over segments (ema_sq_squash, docs/math.md §5.1, §8)";
  let description = [{
    The same results as accum_pass, computed in three stages: per segment, in parallel, the product
    of its chunks' decays and the accumulator it produces from zero (a per-channel pair: M diagonal);
    the fold of those pairs per (sequence, key head) from init; then, per segment in parallel, the
    chunk-start states from the folded segment start. sum [B,NT,H,K], log_decay [B,NT,H], init
    [N,H,K] → start [B,NT,H,K], final [N,H,K].
  }];
  let arguments = (ins Chunk_AnyTensor:$sum, Chunk_AnyTensor:$log_decay, Optional<Chunk_AnyTensor>:$init);
  let results = (outs Chunk_AnyTensor:$start, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $sum `,` $log_decay (`init` $init^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_HypergradSegmentPassOp : Chunk_PureOp<"hypergrad_segment_pass", [AttrSizedOperandSegments]> {
  let summary = "hypergrad_pass as a two-level scan over segments (OSDN without clamp, docs/math.md §5.2, §8)";
  let description = [{
    The same results as hypergrad_pass. Without a clamp each token's step is affine in d,
      d ← (r_t I − c_t u_t u_tᵀ) d + e_t,  c_t = η β_t²/‖k_t‖², e_t = η β_t u_t/‖k_t‖² (0 for k = 0),
    so per segment, in parallel, M_s = Π_t (r_t I − c_t u_t u_tᵀ) (K×K) and e_s (the scan from d = 0);
    the fold per (sequence, key head) from init (or d_init); then per segment, in parallel, the
    token-by-token scan from the folded start writes the chunk-start states and step coefficients.
    A clamp makes the step non-affine: the verifier refuses clamp_min / clamp_max (keep hypergrad_pass).
    Operands and results as hypergrad_pass.
  }];
  let arguments = !con((ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gain,
                            Optional<Chunk_AnyTensor>:$retention, Optional<Chunk_AnyTensor>:$init),
                       Chunk_HypergradParams);
  let results = (outs Chunk_AnyTensor:$start, Chunk_AnyTensor:$coef, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $key (`gain` $gain^)? (`retention` $retention^)? (`init` $init^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

#endif
