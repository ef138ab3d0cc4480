//===- ChunkOps.td - chunkwise WY stages -----------------------*- tablegen -*-===//
//
// Every op documents its shapes and the formula it computes (math.md section). Shapes use the
// symbolic dims of !chunk.tensor; a "chunk" is C consecutive tokens of one sequence (the last
// chunk of a sequence may be partial; varlen sequences start new chunks). Per-chunk values such
// as G, 𝒜, 𝒯 restart at every chunk. Optional operands (gain, gate, init, ...) are absent when the
// spec has no such input; the canonicalizer removes constant-unit gains and constant-zero gates.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_CHUNK_IR_OPS_TD
#define DGPS_DIALECT_CHUNK_IR_OPS_TD

include "dgps/Dialect/Chunk/IR/ChunkDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpBase.td"

def Chunk_AnyTensor : Type<CPred<"::llvm::isa<::dgps::chunk::ChunkTensorType>($_self)">,
                           "chunk tensor", "::dgps::chunk::ChunkTensorType">;

// Every op checks the symbolic shapes of its operands and results (ChunkOps.cpp, verifyShapes).
class Chunk_Op<string mnemonic, list<Trait> traits = []> : Op<Chunk_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}
class Chunk_PureOp<string mnemonic, list<Trait> traits = []>
    : Chunk_Op<mnemonic, !listconcat(traits, [Pure])>;

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

def Chunk_LoadOp : Chunk_PureOp<"load"> {
  let summary = "an input tensor of the forward (device memory, read-only)";
  let description = [{
    `name` is one of the ForwardArgs inputs (runtime/device/dgps/device/abi.h): q, k, v, g, beta,
    precond_g, precond_beta, precond_center, initial_state, initial_precond_state. An optional
    input carries `absent`: the value of every element when the caller passes no tensor.
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<F64Attr>:$absent);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Chunk_StoreOp : Chunk_Op<"store", [MemoryEffects<[MemWrite]>]> {
  let summary = "write an output of the forward: o, final_state, final_precond_state";
  let arguments = (ins StrAttr:$name, Chunk_AnyTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

def Chunk_SplatOp : Chunk_PureOp<"splat"> {
  let summary = "a tensor filled with one constant (a zero gate, a unit gain)";
  let arguments = (ins F64Attr:$value);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Prologue: normalisation and gates
//===----------------------------------------------------------------------===//

def Chunk_L2NormOp : Chunk_PureOp<"l2norm"> {
  let summary = "x̂ = x · rsqrt(Σ x² + eps) over the last dim (FLA in-kernel l2norm, docs/math.md §1)";
  let arguments = (ins Chunk_AnyTensor:$input, F64Attr:$eps);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Chunk_GateCumsumOp : Chunk_PureOp<"gate_cumsum"> {
  let summary = "chunk-local inclusive cumsum G_i = Σ_{j≤i} g_j of a natural-log gate (docs/math.md §4.1)";
  let description = [{ g [B,T,HV] (scalar decay) or [B,T,HV,K] (diagonal decay) → G, same shape, f32. }];
  let arguments = (ins Chunk_AnyTensor:$gate);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$gate attr-dict `:` type($gate) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Chunkwise WY (docs/math.md §4.1, §4.3)
//===----------------------------------------------------------------------===//

def Chunk_KKTOp : Chunk_PureOp<"kkt", [AttrSizedOperandSegments]> {
  let summary = "the gated asymmetric KKT block 𝒜 = tril_{-1}(diag(β)(K̂ K̃^T) ⊙ Γ)";
  let description = [{
    Per chunk and value head hv (key head h = hv / (HV/H)), for local rows i > j:
      𝒜_ij = β_i Σ_d k̂_{i,d} k̃_{j,d} exp(G_i − G_j)          (scalar G [B,T,HV])
      𝒜_ij = β_i Σ_d k̂_{i,d} k̃_{j,d} exp(G_{i,d} − G_{j,d})  (diagonal G [B,T,HV,K])
    and 0 for i ≤ j (the mask is applied before the exponential). Rows use the read key, columns
    the write key. read_key, write_key [B,T,H,K]; gain [B,T,HV]; result [B,T,HV,C] f32.
  }];
  let arguments = (ins Chunk_AnyTensor:$read_key, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gain, Optional<Chunk_AnyTensor>:$gate);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = [{
    `read` $read_key `,` `write` $write_key (`gain` $gain^)? (`gate` $gate^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

def Chunk_SolveTrilOp : Chunk_PureOp<"solve_tril"> {
  let summary = "𝒯 = (I + 𝒜)^{-1}, the unit-lower-triangular inverse per chunk (docs/math.md §4.2 step 4)";
  let arguments = (ins Chunk_AnyTensor:$kkt);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$kkt attr-dict `:` type($kkt) `->` type($result)";
}

def Chunk_WYRecomputeOp : Chunk_PureOp<"wy_recompute", [AttrSizedOperandSegments]> {
  let summary = "W = 𝒯 (β e^G ⊙ K̂), U = 𝒯 (β ⊙ V) (docs/math.md §4.1)";
  let description = [{
    tril [B,T,HV,C], read_key [B,T,H,K], value [B,T,HV,V], gain [B,T,HV], gate G (scalar or
    diagonal; diagonal multiplies K̂ channel-wise) → W [B,T,HV,K], U [B,T,HV,V]. W uses the read key.
  }];
  let arguments = (ins Chunk_AnyTensor:$tril, Chunk_AnyTensor:$read_key, Chunk_AnyTensor:$value,
                       Optional<Chunk_AnyTensor>:$gain, Optional<Chunk_AnyTensor>:$gate);
  let results = (outs Chunk_AnyTensor:$w, Chunk_AnyTensor:$u);
  let assemblyFormat = [{
    $tril `,` `read` $read_key `,` `value` $value (`gain` $gain^)? (`gate` $gate^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

def Chunk_GainScaleOp : Chunk_PureOp<"gain_scale"> {
  let summary = "U = diag(β) V: the write values of the linear (Hebbian) solve";
  let arguments = (ins Chunk_AnyTensor:$value, Optional<Chunk_AnyTensor>:$gain);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$value (`gain` $gain^)? attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def Chunk_StatePassOp : Chunk_PureOp<"state_pass", [AttrSizedOperandSegments]> {
  let summary = "the sequential inter-chunk state pass (docs/math.md §4.2 step 6)";
  let description = [{
    Per sequence n and value head, with S = initial_state[n] (or 0), for each chunk c in order:
      h_c = S;   v_new = U − W S   (v_new = U without W: linear solve)
      S ← e^{G_C} S + (e^{G_C − G} ⊙ K̃)^T v_new      (scalar; diagonal: Diag(e^{G_C}) S + ...)
    where G_C is G at the chunk's last token. w [B,T,HV,K], u [B,T,HV,V], write_key [B,T,H,K],
    init [N,HV,K,V] → v_new [B,T,HV,V], h [B,NT,HV,K,V], final [N,HV,K,V]. The state uses the
    write key only.
  }];
  let arguments = (ins Optional<Chunk_AnyTensor>:$w, Chunk_AnyTensor:$u,
                       Chunk_AnyTensor:$write_key, Optional<Chunk_AnyTensor>:$gate,
                       Optional<Chunk_AnyTensor>:$init);
  let results = (outs Chunk_AnyTensor:$v_new, Chunk_AnyTensor:$states, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    (`w` $w^ `,`)? `u` $u `,` `write` $write_key (`gate` $gate^)? (`init` $init^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

def Chunk_QKAttnOp : Chunk_PureOp<"qk_attn"> {
  let summary = "the masked intra-chunk attention Aqk = scale · tril_0(Q K̃^T ⊙ Γ) (docs/math.md §4.1, §4.3)";
  let description = [{
    Per chunk and value head, for local rows i ≥ j:
      Aqk_ij = scale Σ_d q_{i,d} k̃_{j,d} exp(G_i − G_j)            (scalar G)
      Aqk_ij = scale Σ_d q_{i,d} k̃_{j,d} exp(G_{i,d} − G_{j,d})    (diagonal G)
    and 0 for i < j (masked before the exponential). query [B,T,H,K] (q̂, or M ⊙ q̂ for a
    query-side preconditioner), write_key [B,T,H,K] → [B,T,HV,C]. `scale` absent means K^{-1/2}.
  }];
  let arguments = (ins Chunk_AnyTensor:$query, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gate, OptionalAttr<F64Attr>:$scale);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = [{
    `query` $query `,` `write` $write_key (`gate` $gate^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

def Chunk_OutputOp : Chunk_PureOp<"output"> {
  let summary = "O = scale · e^G ⊙ (Q h_c) + Aqk v_new (docs/math.md §4.1, §4.3)";
  let description = [{
    query [B,T,H,K], v_new [B,T,HV,V], states h [B,NT,HV,K,V] (the state entering each chunk),
    attn Aqk [B,T,HV,C] (scale included), gate G → o [B,T,HV,V]. For diagonal G the inter-chunk
    term is scale · (Q ⊙ e^G) h. `scale` absent means K^{-1/2}, resolved at run time.
  }];
  let arguments = (ins Chunk_AnyTensor:$query, Chunk_AnyTensor:$v_new, Chunk_AnyTensor:$states,
                       Chunk_AnyTensor:$attn, Optional<Chunk_AnyTensor>:$gate,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = [{
    `query` $query `,` `vnew` $v_new `,` `states` $states `,` `attn` $attn (`gate` $gate^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// ema_sq_squash preconditioner (docs/math.md §3.3, §5.1)
//===----------------------------------------------------------------------===//

def Chunk_AccumScanOp : Chunk_PureOp<"accum_scan", [AttrSizedOperandSegments]> {
  let summary = "token-by-token squared-key accumulator A_t = e^{g^a_t} A_{t-1} + β^a_t k̂_t²";
  let description = [{
    The unfused form: key [B,T,H,K], gate g^a [B,T,H] (natural log), gain β^a [B,T,H], init
    [N,H,K] → A [B,T,H,K] (inclusive of token t), final [N,H,K]. --chunk-fuse-preconditioner
    replaces it by accum_summary / accum_pass / accum_apply so that A never reaches device memory.
  }];
  let arguments = (ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gate,
                       Optional<Chunk_AnyTensor>:$gain, Optional<Chunk_AnyTensor>:$init);
  let results = (outs Chunk_AnyTensor:$accum, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $key (`gate` $gate^)? (`gain` $gain^)? (`init` $init^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

def Chunk_SquashApplyOp : Chunk_PureOp<"squash_apply"> {
  let summary = "target ⊙ M(A), M = x^{-s}, s = r/(1+|r|), r = ln(A + eps) − c_h (docs/math.md §3.3)";
  let description = [{
    target [B,T,H,K] (k̂ for a key-side, q̂ for a query-side preconditioner), accum [B,T,H,K],
    center c [H] → [B,T,H,K].
  }];
  let arguments = (ins Chunk_AnyTensor:$target, Chunk_AnyTensor:$accum, Chunk_AnyTensor:$center,
                       F64Attr:$x, F64Attr:$eps);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = [{
    $target `,` `accum` $accum `,` `center` $center attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_AccumSummaryOp : Chunk_PureOp<"accum_summary", [AttrSizedOperandSegments]> {
  let summary = "per-chunk accumulator summary (docs/math.md §5.1 stage 1)";
  let description = [{
    sa_c = Σ_{j∈c} g^a_j, a_c = Σ_{j∈c} e^{sa_c − cum_j} β^a_j k̂_j² (cum inclusive, in-chunk).
    key [B,T,H,K], gate/gain [B,T,H] → a [B,NT,H,K], sa [B,NT,H] (f32).
  }];
  let arguments = (ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gate,
                       Optional<Chunk_AnyTensor>:$gain);
  let results = (outs Chunk_AnyTensor:$sum, Chunk_AnyTensor:$log_decay);
  let assemblyFormat = [{
    $key (`gate` $gate^)? (`gain` $gain^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_AccumPassOp : Chunk_PureOp<"accum_pass"> {
  let summary = "sequential pass over chunk summaries: chunk-start accumulator states (§5.1 stage 2)";
  let description = [{
    Per sequence, A_start(c) = A before the chunk's first token: A_start(0) = init[n] (or 0),
    A_start(c+1) = e^{sa_c} A_start(c) + a_c. → start [B,NT,H,K], final [N,H,K] (f32).
  }];
  let arguments = (ins Chunk_AnyTensor:$sum, Chunk_AnyTensor:$log_decay,
                       Optional<Chunk_AnyTensor>:$init);
  let results = (outs Chunk_AnyTensor:$start, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $sum `,` $log_decay (`init` $init^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_AccumApplyOp : Chunk_PureOp<"accum_apply", [AttrSizedOperandSegments]> {
  let summary = "in-chunk accumulator from its chunk-start state, squash, multiply (§5.1 stage 3)";
  let description = [{
    A_i = e^{cum_i} A_start + Σ_{j≤i} e^{cum_i − cum_j} β^a_j k̂_j² (in-chunk), then
    target_i ⊙ M(A_i) as in squash_apply. Applied where the target is loaded, so the
    preconditioned key is never stored. target, key [B,T,H,K]; gate/gain [B,T,H];
    start [B,NT,H,K]; center [H] → [B,T,H,K].
  }];
  let arguments = (ins Chunk_AnyTensor:$target, Chunk_AnyTensor:$key,
                       Optional<Chunk_AnyTensor>:$gate, Optional<Chunk_AnyTensor>:$gain,
                       Chunk_AnyTensor:$start, Chunk_AnyTensor:$center, F64Attr:$x, F64Attr:$eps);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = [{
    $target `,` `key` $key (`gate` $gate^)? (`gain` $gain^)? `start` $start `,` `center` $center
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// hypergrad_ogd preconditioner (OSDN, docs/math.md §5.2), per-token reduction form
//===----------------------------------------------------------------------===//

defvar Chunk_HypergradParams = (ins F64Attr:$eta, F64Attr:$d_init, BoolAttr:$post,
                                   OptionalAttr<F64Attr>:$clamp_min, OptionalAttr<F64Attr>:$clamp_max);

def Chunk_HypergradScanOp : Chunk_PureOp<"hypergrad_scan", [AttrSizedOperandSegments]> {
  let hasCanonicalizer = 1;
  let summary = "token-by-token OSDN scan d_{t+1} = r_t d_t + (η β_t/‖k_t‖²)(1 − β_t⟨d_t,k_t²⟩) k_t²";
  let description = [{
    key [B,T,H,K], gain β [B,T,H] (absent: 1), retention log r [B,T,H] (absent: r = 1),
    init [N,H,K] (absent: d_init) → d [B,T,H,K] (the d used for the write at t: d_t, or d_{t+1}
    when `post`), final [N,H,K]. The update is clamped to [clamp_min, clamp_max] when given.
  }];
  let arguments = !con((ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gain,
                            Optional<Chunk_AnyTensor>:$retention, Optional<Chunk_AnyTensor>:$init),
                       Chunk_HypergradParams);
  let results = (outs Chunk_AnyTensor:$diag, Chunk_AnyTensor:$final);
  let assemblyFormat = [{
    $key (`gain` $gain^)? (`retention` $retention^)? (`init` $init^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_DiagApplyOp : Chunk_PureOp<"diag_apply"> {
  let summary = "target ⊙ d, a per-token diagonal preconditioner";
  let arguments = (ins Chunk_AnyTensor:$target, Chunk_AnyTensor:$diag);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$target `,` $diag attr-dict `:` functional-type(operands, results)";
}

def Chunk_HypergradPassOp : Chunk_PureOp<"hypergrad_pass", [AttrSizedOperandSegments]> {
  let summary = "the OSDN scan reduced to chunk-start states and per-token step coefficients";
  let description = [{
    Runs the scan of hypergrad_scan token by token (the per-token reduction ⟨d_t, u_t⟩ happens
    here, once) and keeps only what the chunk kernels need to rebuild d inside a chunk:
      start [B,NT,H,K]  d before the chunk's first token,
      coef  [B,T,H]     c_t = (η β_t/‖k_t‖²)(1 − β_t⟨d_t, u_t⟩)  (0 when ‖k_t‖² = 0),
      final [N,H,K].
    Inside a chunk d_{t+1} = clamp(r_t d_t + c_t u_t) is then elementwise (hypergrad_apply).
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

def Chunk_HypergradApplyOp : Chunk_PureOp<"hypergrad_apply"> {
  let summary = "rebuild d inside each chunk from d_start and the step coefficients; multiply";
  let description = [{
    Per chunk: d ← d_start; per token t, u_t = k_t ⊙ k_t, the multiplier is d_t (pre) or
    d_{t+1} = clamp(r_t d_t + c_t u_t) (post). Elementwise: no reduction. target, key [B,T,H,K];
    coef, retention [B,T,H]; start [B,NT,H,K] → target ⊙ d [B,T,H,K].
  }];
  let arguments = !con((ins Chunk_AnyTensor:$target, Chunk_AnyTensor:$key, Chunk_AnyTensor:$coef,
                            Optional<Chunk_AnyTensor>:$retention, Chunk_AnyTensor:$start),
                       Chunk_HypergradParams);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = [{
    $target `,` `key` $key `,` `coef` $coef (`retention` $retention^)? `,` `start` $start attr-dict
    `:` functional-type(operands, results)
  }];
}

include "dgps/Dialect/Chunk/IR/ChunkGradOps.td"
include "dgps/Dialect/Chunk/IR/ChunkSegmentOps.td"
include "dgps/Dialect/Chunk/IR/ChunkPrecondScanOps.td"
include "dgps/Dialect/Chunk/IR/ChunkStepOps.td"

//===----------------------------------------------------------------------===//
// Kernel plan
//===----------------------------------------------------------------------===//

def Chunk_KernelOp : Chunk_Op<"kernel", [SingleBlockImplicitTerminator<"YieldOp">,
                                         RecursiveMemoryEffects]> {
  let summary = "one GPU kernel of the plan: a role and the ops it runs";
  let description = [{
    `role` is one of precond_summary, precond_scan, chunk_local, state_output (the
    package's kernel dgps_<name>_fwd_<role>, dsl/include/dgps/dsl/LaunchContract.h), in that launch order;
    a plan segmented by --chunk-segment-state-pass adds segment_summary and segment_fold before
    state_output (ChunkSegmentOps.td; no device kernels yet). Results are device-memory buffers (types marked `global`) read by later
    kernels; values from earlier kernels are read from device memory; everything else inside is
    recomputed on chip. `tile` is the default tile configuration.
  }];
  let arguments = (ins StrAttr:$role, Chunk_TileAttr:$tile);
  let results = (outs Variadic<Chunk_AnyTensor>:$buffers);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$role (`->` type($buffers)^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Chunk_YieldOp : Chunk_Op<"yield", [Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "the buffers a kernel writes for later kernels";
  let arguments = (ins Variadic<Chunk_AnyTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

#endif
