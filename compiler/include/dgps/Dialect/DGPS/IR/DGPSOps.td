//===- DGPSOps.td - dgps.recurrence -----------------------------*- tablegen -*-===//
#ifndef DGPS_DIALECT_DGPS_IR_OPS_TD
#define DGPS_DIALECT_DGPS_IR_OPS_TD

include "dgps/Dialect/DGPS/IR/DGPSAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

def DGPS_KernelKindArrayAttr : TypedArrayAttrBase<DGPS_KernelKindAttr, "kernel kinds">;

def DGPS_RecurrenceOp : Op<DGPS_Dialect, "recurrence", [Symbol]> {
  let summary = "one recurrent layer, the whole spec as typed attributes";
  let description = [{
    The canonical asymmetric gated delta rule of docs/math.md §1 (and its linear-attention form):

      S_t = D_t S_{t-1} + gain_t k^w_t (v_t - (D_t S_{t-1})^T k^r_t)^T      (solve = delta)
      S_t = D_t S_{t-1} + gain_t k_t v_t^T                                 (solve = linear)
      o_t = S_t^T q̃_t · scale

    with the read key k^r = k̂ and the write key k^w = M ⊙ k̂ when a key-side diagonal
    preconditioner is present (q̃ = M ⊙ q̂ for the query side). Attribute groups:

    * axes: `decay`, `gain` (+ open interval `gain_lo`, `gain_hi`), `precond` (+ `precond_side`,
      `precond_source` and exactly one of `squash` / `hypergrad` when diagonal), `solve` (+
      `householder_steps` n_h, absent = 1: Gated DeltaProduct, docs/math.md §3.7 — k, v and the
      gain carry T·n_h rows, the decay applies before a token's first step and the output is read
      after its last);
    * normalisation: `qk_l2norm`, `l2norm_eps`, optional `scale` (absent = K^-1/2);
    * heads and dims: `heads_qk` (0 = any), `gva_ratio` (HV / H), `key_dims`, `value_dims`;
    * dtypes: `input_dtypes` (bf16/f16/f32), `state_dtype` (f32);
    * `io`, `kernels`, `tuning`, and `allow_unstable` (validation only).

    The verifier converts the op back to a dgps::Spec (SpecConversion.h) and runs dsl's
    validateSpec, so hand-written IR obeys exactly the rules of the YAML language; parameters of
    an absent preconditioner are tolerated here and removed by the canonicalizer.

    Example:

    ```mlir
    dgps.recurrence @gdn {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>,
        gain_lo = 0.0, gain_hi = 1.0, precond = #dgps.precond<none>, solve = #dgps.solve<delta>,
        qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
        key_dims = array<i64: 128>, value_dims = array<i64: 128>,
        input_dtypes = [bf16, f16], state_dtype = f32,
        io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false,
                      final_precond_state = false, varlen = true>,
        kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
        tuning = #dgps.tuning<chunk = [64], block_v = [32, 64],
                              warps = [4, 8], stages = [1, 2]>}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    OptionalAttr<StrAttr>:$description,
    DGPS_DecayAttr:$decay,
    DGPS_GainAttr:$gain,
    F64Attr:$gain_lo,
    F64Attr:$gain_hi,
    DGPS_PrecondAttr:$precond,
    OptionalAttr<DGPS_PrecondSideAttr>:$precond_side,
    OptionalAttr<DGPS_PrecondSourceAttr>:$precond_source,
    OptionalAttr<DGPS_SquashAttr>:$squash,
    OptionalAttr<DGPS_HypergradAttr>:$hypergrad,
    DGPS_SolveAttr:$solve,
    OptionalAttr<I64Attr>:$householder_steps,
    BoolAttr:$qk_l2norm,
    F64Attr:$l2norm_eps,
    OptionalAttr<F64Attr>:$scale,
    I64Attr:$heads_qk,
    I64Attr:$gva_ratio,
    DenseI64ArrayAttr:$key_dims,
    DenseI64ArrayAttr:$value_dims,
    TypeArrayAttr:$input_dtypes,
    TypeAttr:$state_dtype,
    DGPS_IOAttr:$io,
    DGPS_KernelKindArrayAttr:$kernels,
    DGPS_TuningAttr:$tuning,
    UnitAttr:$allow_unstable
  );
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
  let extraClassDeclaration = [{
    /// Every i64 attribute that becomes an int of dgps::Spec fits it (part of verify()).
    ::mlir::LogicalResult verifyIntegerRanges();
    /// householder_steps as a signed value (the attribute's own getter is unsigned); 1 when absent.
    int64_t householderStepsOr1() {
      ::mlir::IntegerAttr a = getHouseholderStepsAttr();
      return a ? a.getInt() : 1;
    }
  }];
}

#endif
