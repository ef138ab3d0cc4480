//===- ChunkGradOps.td - adjoints of the chunk ops --------------*- tablegen -*-===//
//
// The reverse-mode (vector-Jacobian) ops that --chunk-derive-backward emits, one per forward op with
// a non-trivial adjoint, plus `add` to sum the cotangents of a value with several uses. Notation: for
// a forward result y, dy is the cotangent ∂L/∂y of a scalar loss L; every op below computes the
// cotangents of its forward op's operands from the cotangents of its results (and the forward
// operands, recomputed or kept). Every result is a whole cotangent of the named operand: key-head
// tensors ([.., H, K]) sum over the value heads of their group (GVA). An adjoint for an optional
// forward operand that is absent (no gain, no gate) is still produced (as the adjoint of a unit gain
// or a zero gate) and simply left unused. docs/backward_ir.md derives each formula.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_CHUNK_IR_GRAD_OPS_TD
#define DGPS_DIALECT_CHUNK_IR_GRAD_OPS_TD

def Chunk_AddOp : Chunk_PureOp<"add"> {
  let summary = "elementwise sum of the cotangent contributions of one value (two or more)";
  let arguments = (ins Variadic<Chunk_AnyTensor>:$terms);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$terms attr-dict `:` type($terms) `->` type($result)";
}

def Chunk_L2NormGradOp : Chunk_PureOp<"l2norm_grad"> {
  let summary = "dx = r (dx̂ − x̂ ⟨x̂, dx̂⟩), r = (Σ x² + eps)^{-1/2}, x̂ = r x (adjoint of l2norm)";
  let arguments = (ins Chunk_AnyTensor:$input, Chunk_AnyTensor:$d_result, F64Attr:$eps);
  let results = (outs Chunk_AnyTensor:$d_input);
  let assemblyFormat = "$input `,` $d_result attr-dict `:` functional-type(operands, results)";
}

def Chunk_GateCumsumGradOp : Chunk_PureOp<"gate_cumsum_grad"> {
  let summary = "dg_j = Σ_{i ≥ j, same chunk} dG_i: the chunk-local reverse cumsum (adjoint of gate_cumsum)";
  let arguments = (ins Chunk_AnyTensor:$d_cumsum);
  let results = (outs Chunk_AnyTensor:$d_gate);
  let assemblyFormat = "$d_cumsum attr-dict `:` type($d_cumsum) `->` type($d_gate)";
}

def Chunk_KKTGradOp : Chunk_PureOp<"kkt_grad", [AttrSizedOperandSegments]> {
  let summary = "adjoint of kkt: d𝒜 → dK̂, dK̃, dβ, dG";
  let description = [{
    With e_ijd = exp(G_{i,d} − G_{j,d}) (scalar gate: e_ij for every d) and a_ij = d𝒜_ij for local
    rows i > j only (the strictly lower mask):
      dβ_i      = Σ_j a_ij Σ_d k̂_{i,d} k̃_{j,d} e_ijd
      dk̂_{i,d} += Σ_j a_ij β_i k̃_{j,d} e_ijd          dk̃_{j,d} += Σ_i a_ij β_i k̂_{i,d} e_ijd
      dG_{i,d} += Σ_j a_ij β_i k̂_{i,d} k̃_{j,d} e_ijd   dG_{j,d} −= the same sum over i
    (scalar gate: dG sums over d). read_key, write_key [B,T,H,K]; gain [B,T,HV]; gate;
    d_kkt [B,T,HV,C] → d_read_key, d_write_key [B,T,H,K], d_gain [B,T,HV], d_gate (gate's dims;
    [B,T,HV] without a gate).
  }];
  let arguments = (ins Chunk_AnyTensor:$read_key, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gain, Optional<Chunk_AnyTensor>:$gate,
                       Chunk_AnyTensor:$d_kkt);
  let results = (outs Chunk_AnyTensor:$d_read_key, Chunk_AnyTensor:$d_write_key,
                      Chunk_AnyTensor:$d_gain, Chunk_AnyTensor:$d_gate);
  let assemblyFormat = [{
    `read` $read_key `,` `write` $write_key (`gain` $gain^)? (`gate` $gate^)? `,` `d` $d_kkt attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_SolveTrilGradOp : Chunk_PureOp<"solve_tril_grad"> {
  let summary = "d𝒜 = tril_{-1}(−𝒯ᵀ d𝒯 𝒯ᵀ), the adjoint of 𝒯 = (I + 𝒜)^{-1} per chunk";
  let description = [{
    From d(I + 𝒜)^{-1} = −𝒯 d𝒜 𝒯; only the strictly lower part is kept (𝒜 is strictly lower by
    construction; the diagonal and upper parts of d𝒯 do not reach it). tril, d_tril [B,T,HV,C] →
    d_kkt [B,T,HV,C].
  }];
  let arguments = (ins Chunk_AnyTensor:$tril, Chunk_AnyTensor:$d_tril);
  let results = (outs Chunk_AnyTensor:$d_kkt);
  let assemblyFormat = "$tril `,` $d_tril attr-dict `:` functional-type(operands, results)";
}

def Chunk_WYRecomputeGradOp : Chunk_PureOp<"wy_recompute_grad", [AttrSizedOperandSegments]> {
  let summary = "adjoint of wy_recompute: dW, dU → d𝒯, dK̂, dV, dβ, dG";
  let description = [{
    With x_ij = Σ_d dW_{i,d} e^{G_{j,d}} k̂_{j,d} and y_ij = Σ_e dU_{i,e} v_{j,e} for j ≤ i:
      d𝒯_ij = β_j (x_ij + y_ij)                     dβ_j = Σ_i 𝒯_ij (x_ij + y_ij)
      dk̂_{j,d} += β_j e^{G_{j,d}} Σ_i 𝒯_ij dW_{i,d}  dv_j = β_j Σ_i 𝒯_ij dU_i
      dG_{j,d} += β_j e^{G_{j,d}} k̂_{j,d} Σ_i 𝒯_ij dW_{i,d}   (scalar gate: summed over d)
    tril [B,T,HV,C], read_key [B,T,H,K], value [B,T,HV,V], gain, gate, d_w [B,T,HV,K],
    d_u [B,T,HV,V] → d_tril, d_read_key, d_value, d_gain, d_gate.
  }];
  let arguments = (ins Chunk_AnyTensor:$tril, Chunk_AnyTensor:$read_key, Chunk_AnyTensor:$value,
                       Optional<Chunk_AnyTensor>:$gain, Optional<Chunk_AnyTensor>:$gate,
                       Chunk_AnyTensor:$d_w, Chunk_AnyTensor:$d_u);
  let results = (outs Chunk_AnyTensor:$d_tril, Chunk_AnyTensor:$d_read_key, Chunk_AnyTensor:$d_value,
                      Chunk_AnyTensor:$d_gain, Chunk_AnyTensor:$d_gate);
  let assemblyFormat = [{
    $tril `,` `read` $read_key `,` `value` $value (`gain` $gain^)? (`gate` $gate^)? `,` `dw` $d_w `,`
    `du` $d_u attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_GainScaleGradOp : Chunk_PureOp<"gain_scale_grad"> {
  let summary = "adjoint of U = diag(β) V: dV = β dU, dβ = Σ_e dU_e v_e";
  let arguments = (ins Chunk_AnyTensor:$value, Chunk_AnyTensor:$gain, Chunk_AnyTensor:$d_result);
  let results = (outs Chunk_AnyTensor:$d_value, Chunk_AnyTensor:$d_gain);
  let assemblyFormat = "$value `,` $gain `,` $d_result attr-dict `:` functional-type(operands, results)";
}

def Chunk_StatePassGradOp : Chunk_PureOp<"state_pass_grad", [AttrSizedOperandSegments]> {
  let summary = "the reverse state pass: dS carried from the last chunk of a sequence to its first";
  let description = [{
    Per sequence and value head, dS = d_final[n]; for each chunk c from last to first, with S = h_c
    (the forward's state entering c), t_C its last token and k̄_i = e^{G_{t_C} − G_i} ⊙ k̃_i:
      dv_i   = d_v_new_i + dSᵀ k̄_i                     (total cotangent of v_new_i; d_u = dv)
      dW_i   = −S dv_i (as a K-vector: dW_{i,d} = −Σ_e S_{d,e} dv_{i,e})
      dk̃_i  += e^{G_{t_C} − G_i} ⊙ (dS v_new_i)
      dG_{t_C} += e^{G_{t_C}} ⊙ rowsum(dS ⊙ S) + Σ_i k̄_i ⊙ (dS v_new_i);  dG_i −= k̄_i ⊙ (dS v_new_i)
      dS    ← e^{G_{t_C}} dS + d_states_c − Σ_i W_i dv_iᵀ
    and d_init[n] = dS after the first chunk (d_final for a sequence without tokens). Without w
    (linear solve) d_w is zero and W drops out. w [B,T,HV,K]; write_key [B,T,H,K]; gate; v_new
    [B,T,HV,V]; states [B,NT,HV,K,V] (forward h); d_v_new [B,T,HV,V]; d_states [B,NT,HV,K,V];
    d_final [N,HV,K,V] → d_w, d_u, d_write_key, d_gate, d_init [N,HV,K,V].
  }];
  let arguments = (ins Optional<Chunk_AnyTensor>:$w, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gate, Chunk_AnyTensor:$v_new, Chunk_AnyTensor:$states,
                       Chunk_AnyTensor:$d_v_new, Chunk_AnyTensor:$d_states, Chunk_AnyTensor:$d_final);
  let results = (outs Chunk_AnyTensor:$d_w, Chunk_AnyTensor:$d_u, Chunk_AnyTensor:$d_write_key,
                      Chunk_AnyTensor:$d_gate, Chunk_AnyTensor:$d_init);
  let assemblyFormat = [{
    (`w` $w^ `,`)? `write` $write_key (`gate` $gate^)? `,` `vnew` $v_new `,` `states` $states `,`
    `dvnew` $d_v_new `,` `dstates` $d_states `,` `dfinal` $d_final attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_QKAttnGradOp : Chunk_PureOp<"qk_attn_grad"> {
  let summary = "adjoint of qk_attn: dAqk → dQ, dK̃, dG";
  let description = [{
    For local rows i ≥ j, a_ij = dAqk_ij, e_ijd as in kkt_grad:
      dq_{i,d} += scale Σ_j a_ij k̃_{j,d} e_ijd      dk̃_{j,d} += scale Σ_i a_ij q_{i,d} e_ijd
      dG_{i,d} += scale Σ_j a_ij q_{i,d} k̃_{j,d} e_ijd,  dG_{j,d} −= the same sum over i.
    query, write_key [B,T,H,K]; gate; d_attn [B,T,HV,C] → d_query, d_write_key, d_gate.
    `scale` absent means K^{-1/2}.
  }];
  let arguments = (ins Chunk_AnyTensor:$query, Chunk_AnyTensor:$write_key,
                       Optional<Chunk_AnyTensor>:$gate, Chunk_AnyTensor:$d_attn, OptionalAttr<F64Attr>:$scale);
  let results = (outs Chunk_AnyTensor:$d_query, Chunk_AnyTensor:$d_write_key, Chunk_AnyTensor:$d_gate);
  let assemblyFormat = [{
    `query` $query `,` `write` $write_key (`gate` $gate^)? `,` `d` $d_attn attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_OutputGradOp : Chunk_PureOp<"output_grad"> {
  let summary = "adjoint of output: dO → dQ, dv_new, dh, dAqk, dG";
  let description = [{
    Per chunk c and local row i, with h = h_c and s_{i,d} = Σ_e dO_{i,e} h_{d,e}:
      dq_{i,d} += scale e^{G_{i,d}} s_{i,d}          dG_{i,d} += scale e^{G_{i,d}} q_{i,d} s_{i,d}
      dh_c     += scale Σ_i (e^{G_i} ⊙ q_i) dO_iᵀ
      dAqk_ij   = ⟨dO_i, v_new_j⟩ (j ≤ i)           dv_new_j += Σ_{i ≥ j} Aqk_ij dO_i
    query [B,T,H,K], v_new [B,T,HV,V], states [B,NT,HV,K,V], attn [B,T,HV,C], gate, d_o
    [B,T,HV,V] → d_query, d_v_new, d_states, d_attn, d_gate. `scale` absent means K^{-1/2}.
  }];
  let arguments = (ins Chunk_AnyTensor:$query, Chunk_AnyTensor:$v_new, Chunk_AnyTensor:$states,
                       Chunk_AnyTensor:$attn, Optional<Chunk_AnyTensor>:$gate, Chunk_AnyTensor:$d_o,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Chunk_AnyTensor:$d_query, Chunk_AnyTensor:$d_v_new, Chunk_AnyTensor:$d_states,
                      Chunk_AnyTensor:$d_attn, Chunk_AnyTensor:$d_gate);
  let assemblyFormat = [{
    `query` $query `,` `vnew` $v_new `,` `states` $states `,` `attn` $attn (`gate` $gate^)? `,` `d` $d_o
    attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_AccumScanGradOp : Chunk_PureOp<"accum_scan_grad", [AttrSizedOperandSegments]> {
  let summary = "adjoint of accum_scan: the reverse affine scan λ ← e^{g^a_t} (λ + dA_t)";
  let description = [{
    Per sequence and key head, λ = d_final[n]; for t from the last token to the first, with
    γ_t = e^{g^a_t} and A_{t−1} the accumulator before t (init or 0 at the first token):
      λ += dA_t;  dk̂_t = 2 β^a_t k̂_t ⊙ λ;  dβ^a_t = ⟨λ, k̂_t²⟩;  dg^a_t = γ_t ⟨λ, A_{t−1}⟩;  λ ← γ_t λ
    and d_init[n] = λ at the end. key [B,T,H,K], gate/gain [B,T,H], init [N,H,K], accum (forward A)
    [B,T,H,K], d_accum [B,T,H,K], d_final [N,H,K] → d_key, d_gate [B,T,H], d_gain [B,T,H],
    d_init [N,H,K].
  }];
  let arguments = (ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gate,
                       Optional<Chunk_AnyTensor>:$gain, Optional<Chunk_AnyTensor>:$init,
                       Chunk_AnyTensor:$accum, Chunk_AnyTensor:$d_accum, Chunk_AnyTensor:$d_final);
  let results = (outs Chunk_AnyTensor:$d_key, Chunk_AnyTensor:$d_gate, Chunk_AnyTensor:$d_gain,
                      Chunk_AnyTensor:$d_init);
  let assemblyFormat = [{
    $key (`gate` $gate^)? (`gain` $gain^)? (`init` $init^)? `,` `accum` $accum `,` `d` $d_accum `,`
    `dfinal` $d_final attr-dict `:` functional-type(operands, results)
  }];
}

def Chunk_SquashApplyGradOp : Chunk_PureOp<"squash_apply_grad"> {
  let summary = "adjoint of squash_apply (the squash's chain rule)";
  let description = [{
    y = t ⊙ M, M = x^{−s}, s = r/(1+|r|), r = ln(A + eps) − c_h. With γ = dy ⊙ t ⊙ M ⊙ (−ln x)/(1+|r|)²
    (= dy ⊙ ∂y/∂r): dt = dy ⊙ M, dA = γ / (A + eps), dc_h = −Σ γ over B, T, K. target, accum
    [B,T,H,K], center [H], d_result [B,T,H,K] → d_target, d_accum [B,T,H,K], d_center [H].
  }];
  let arguments = (ins Chunk_AnyTensor:$target, Chunk_AnyTensor:$accum, Chunk_AnyTensor:$center,
                       Chunk_AnyTensor:$d_result, F64Attr:$x, F64Attr:$eps);
  let results = (outs Chunk_AnyTensor:$d_target, Chunk_AnyTensor:$d_accum, Chunk_AnyTensor:$d_center);
  let assemblyFormat = [{
    $target `,` `accum` $accum `,` `center` $center `,` `d` $d_result attr-dict
    `:` functional-type(operands, results)
  }];
}

def Chunk_HypergradScanGradOp : Chunk_PureOp<"hypergrad_scan_grad", [AttrSizedOperandSegments]> {
  let summary = "adjoint of hypergrad_scan: the reverse token sweep of the OSDN update";
  let description = [{
    The forward update per token (hypergrad_scan): u = k̂ ⊙ k̂, κ = ‖k̂‖², c = η β (1 − β⟨d, u⟩)/κ
    (c = 0 when κ = 0), x = ρ d + c u with ρ = e^{retention}, d' = clamp(x). Per sequence and key
    head, λ = d_final[n]; for t from the last token to the first, with d = d_t (the d before t:
    `diag` at t when pre, at t−1 or the initial d when post):
      post: λ += d_diag_t
      δ = [x inside the clamp] ⊙ λ;  dc = ⟨δ, u⟩;  e = −dc η β²/κ;  f = −dc c/κ  (e = f = 0 when κ = 0)
      d_retention_t = ρ ⟨δ, d⟩;  d_gain_t = dc η (1 − 2β⟨d, u⟩)/κ  (0 when κ = 0)
      d_key_t = 2 k̂ ⊙ (c δ + f + e d);  λ ← ρ δ + e u
      pre: λ += d_diag_t
    and d_init_state[n] = λ at the end. key [B,T,H,K], gain [B,T,HV] (HV = H), retention [B,T,H],
    init [N,H,K], diag (the forward d) [B,T,H,K], d_diag [B,T,H,K], d_final [N,H,K] → d_key
    [B,T,H,K], d_gain [B,T,HV], d_retention [B,T,H], d_init_state [N,H,K]; the attributes are the
    forward's (d_init is the initial d when `init` is absent).
  }];
  let arguments = !con((ins Chunk_AnyTensor:$key, Optional<Chunk_AnyTensor>:$gain,
                            Optional<Chunk_AnyTensor>:$retention, Optional<Chunk_AnyTensor>:$init,
                            Chunk_AnyTensor:$diag, Chunk_AnyTensor:$d_diag, Chunk_AnyTensor:$d_final),
                       Chunk_HypergradParams);
  let results = (outs Chunk_AnyTensor:$d_key, Chunk_AnyTensor:$d_gain, Chunk_AnyTensor:$d_retention,
                      Chunk_AnyTensor:$d_init_state);
  let assemblyFormat = [{
    $key (`gain` $gain^)? (`retention` $retention^)? (`init` $init^)? `,` `diag` $diag `,` `d` $d_diag `,`
    `dfinal` $d_final attr-dict `:` functional-type(operands, results)
  }];
}

#endif
