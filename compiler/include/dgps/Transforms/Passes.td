//===- Passes.td - the DGPS pipeline ---------------------------*- tablegen -*-===//
//
// The pipeline, in order (dgpsc runs it; dgps-opt runs any part of it):
//
//   YAML ─dsl─▶ Spec ─import─▶ dgps IR ─canonicalize─▶ dgps IR
//     ─dgps-lower-to-chunk─▶ chunk IR ─canonicalize─▶ chunk IR
//     ─chunk-fuse-preconditioner─▶ ─chunk-partition-kernels─▶ kernel plan ─emit─▶ package
//
// optionally, for long sequences, between fusion and partitioning:
//     ─chunk-fuse-preconditioner─▶ ─chunk-segment-state-pass─▶ ─chunk-partition-kernels─▶ segmented plan
// and, for OSDN's d-scan in its chunked (parallel over time) form:
//     ─chunk-fuse-preconditioner─▶ ─chunk-parallel-precond-scan─▶ ─chunk-partition-kernels─▶
//
// and, for the decode role (dgpsc compile lowers every role to tile IR; the others from the plan):
//   dgps IR ─dgps-lower-decode-to-tile─▶ tile IR (func @<name>_decode) ─emitTileKernel─▶ decode kernel
//
// `canonicalize` is MLIR's canonicalizer with the dialects' patterns: on dgps.recurrence it drops
// the parameters of an absent preconditioner and turns an identity preconditioner (squash x = 1,
// a hypergradient step that never moves d) into `none`; on chunk ops it removes zero gates and
// unit gains, so PGDN with its preconditioner off lowers to exactly GDN's IR.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_TRANSFORMS_PASSES_TD
#define DGPS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToChunk : Pass<"dgps-lower-to-chunk", "::mlir::ModuleOp"> {
  let summary = "Lower each dgps.recurrence to the chunkwise WY algorithm in the chunk dialect";
  let description = [{
    Replaces `dgps.recurrence @name` by `func.func @name_forward` whose body loads the inputs,
    normalises q and k, builds the read key k̂ and the write key k̃ as separate values, and
    chains kkt → solve_tril → wy_recompute → state_pass → qk_attn → output (docs/math.md §4.1). The lowering is
    uniform: an absent decay becomes a zero gate, an absent gain a unit gain, and the
    preconditioner is a token-by-token scan (accum_scan + squash_apply, or hypergrad_scan +
    diag_apply); canonicalisation and fusion clean these up.

    Before:
    ```mlir
    dgps.recurrence @gdn {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>,
                          precond = #dgps.precond<none>, solve = #dgps.solve<delta>, ...}
    ```
    After:
    ```mlir
    func.func @gdn_forward() attributes {chunk.chunk_size = 64 : i64, ...} {
      %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], bf16>
      %kr = chunk.l2norm %k {eps = 1.0e-06 : f64} : ... -> !chunk.tensor<[B, T, H, K], f32>
      %G = chunk.gate_cumsum %g : ...
      %A = chunk.kkt read %kr, write %kr gain %beta gate %G : ...
      %T = chunk.solve_tril %A : ...
      %w, %u = chunk.wy_recompute %T, read %kr, value %v gain %beta gate %G : ...
      %vn, %h, %S = chunk.state_pass w %w, u %u, write %kr gate %G init %S0 : ...
      %Aqk = chunk.qk_attn query %qr, write %kr gate %G : ...
      %o = chunk.output query %qr, vnew %vn, states %h, attn %Aqk gate %G : ...
      chunk.store "o", %o : ...
      return
    }
    ```
  }];
  let dependentDialects = ["::dgps::chunk::ChunkDialect", "::mlir::func::FuncDialect"];
}

def FusePreconditioner : Pass<"chunk-fuse-preconditioner", "::mlir::func::FuncOp"> {
  let summary = "Turn token-by-token preconditioner scans into chunk-start states plus in-chunk apply";
  let description = [{
    The preconditioned key must never be written to device memory. A token-by-token scan produces
    a [B,T,H,K] tensor; this pass rewrites it into a tiny pre-pass that keeps only one K-vector per
    chunk (the chunk-start state) and an op that recomputes the multiplier where the key is loaded
    (docs/math.md §5.1 option (a) and §5.2 "per-token reduction form").

    Before:
    ```mlir
    %A, %Af = chunk.accum_scan %kr gate %ga gain %ba init %A0 : ...
    %kw = chunk.squash_apply %kr, accum %A, center %c {eps = 1.0e-06, x = 1.5} : ...
    ```
    After:
    ```mlir
    %a, %sa = chunk.accum_summary %kr gate %ga gain %ba : ... -> (!f32_bnthk, !f32_bnth)
    %As, %Af = chunk.accum_pass %a, %sa init %A0 : ...
    %kw = chunk.accum_apply %kr, key %kr gate %ga gain %ba start %As, center %c {...} : ...
    ```
    and likewise hypergrad_scan + diag_apply → hypergrad_pass (chunk-start d and the per-token
    step coefficients, so the in-chunk rebuild has no K-reduction) + hypergrad_apply.
  }];
}

def PartitionKernels : Pass<"chunk-partition-kernels", "::mlir::ModuleOp"> {
  let summary = "Group chunk ops into the kernels of the plan and estimate its cost";
  let description = [{
    Assigns every stage to a kernel role of the launch contract (dsl LaunchContract.h; launch order):
    precond_summary (ema_sq_squash chunk summaries), precond_scan (chunk-start preconditioner
    states), chunk_local (KKT, solve_tril, masked Q·K̃ᵀ; parallel over chunks) and state_output
    (W and U formed on the fly, the sequential state pass, the output). Cheap prologue ops (load,
    l2norm, gate_cumsum, accum_apply, hypergrad_apply) are recomputed in every kernel that needs
    them; values produced by one kernel and used by another become kernel results of `global`
    type (device-memory buffers). Sets the default tile configuration (`tile`) on every kernel and
    the estimate (`chunk.plan`) on the function, and reports the estimate as a remark:
    device-memory bytes and FLOPs per token and value head, counting every recompute (math.md
    §4.4/§4.5 style, at K = V = 128 where the spec allows it and C = the default chunk; PlanCost.h).
    Fails with an error if a preconditioned key or query would cross a kernel boundary.

    Before: a flat function body. After (PGDN):
    ```mlir
    %a, %sa = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global {...}
    %As = chunk.kernel "precond_scan" -> !f32_bnthk_global {... chunk.store "final_precond_state" ...}
    %T, %Aqk = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global {
      ... %kw = chunk.accum_apply ... start %As ...      // k̃ rebuilt on chip
      ... chunk.kkt read %kr, write %kw ...
    }
    chunk.kernel "state_output" {... chunk.store "o", %o ...}
    ```
  }];
}

def SegmentStatePass : Pass<"chunk-segment-state-pass", "::mlir::func::FuncOp"> {
  let summary = "Split the sequential state pass into segments: summaries, a fold, a parallel rerun";
  let description = [{
    For long sequences with few (sequence, head) pairs (docs/math.md §8). Runs on a fused,
    unpartitioned forward (after --chunk-fuse-preconditioner, before --chunk-partition-kernels) and
    rewrites each sequential pass over chunks into its exact sequence-parallel form
    (ChunkSegmentOps.td): state_pass becomes segment_summary (per segment, in parallel: its end
    state from zero E and its K×K transition M, the pass run on the identity with U = 0, so M uses
    the preconditioned write key) → segment_fold (sequential over segments, 2K²V per segment) →
    segment_state_pass (every segment's chunks from its folded start, in parallel). The
    preconditioner's passes become two-level scans: accum_pass → accum_segment_pass;
    hypergrad_pass → hypergrad_segment_pass when the spec has no clamp (a clamped step is not
    affine: the pass keeps hypergrad_pass and says so in a remark). `segment-chunks` = L sets the
    function attribute chunk.segment_chunks; 0 (the default) leaves L to the launch-time rule
    (dsl/include/dgps/dsl/SegmentScan.h chooseSegmentChunks). --chunk-partition-kernels then places
    segment_summary and segment_fold in roles of their own, between chunk_local and state_output.

    `segment-precond-scan` = false keeps the preconditioner's passes sequential and segments the
    state pass only: the preconditioner's chunk-start states (precond_scan, K values per chunk step)
    are then computed for every chunk before the state pass, so a segment can start at any chunk and
    its walks rebuild the preconditioned key from them (docs/math.md §8.3). This is the form the GPU
    kernels take (dgpsc compile, --dgps-lower-segment-roles-to-tile).

    Before:
    ```mlir
    %vn, %h, %S = chunk.state_pass w %w, u %u, write %kw gate %G init %S0 : ...
    %As, %Af = chunk.accum_pass %a, %sa init %A0 : ...
    ```
    After (segment-chunks=4):
    ```mlir
    func.func @pgdn_forward() attributes {chunk.segment_chunks = 4 : i64, ...}
    %As, %Af = chunk.accum_segment_pass %a, %sa init %A0 : ...
    %E, %M = chunk.segment_summary w %w, u %u, write %kw gate %G : ... -> (!f32_bnshvkv, !f32_bnshvkk)
    %Ss, %S = chunk.segment_fold %E, %M init %S0 : ...
    %vn, %h = chunk.segment_state_pass w %w, u %u, write %kw gate %G start %Ss : ...
    ```
  }];
  let options = [
    Option<"segmentChunks", "segment-chunks", "int64_t", /*default=*/"0",
           "segment length in chunks (>= 1); 0: chosen at launch from the shape and SM count">,
    Option<"segmentPrecondScan", "segment-precond-scan", "bool", /*default=*/"true",
           "also rewrite the preconditioner's passes into two-level scans; false: keep them sequential">
  ];
}

def ParallelPrecondScan : Pass<"chunk-parallel-precond-scan", "::mlir::func::FuncOp"> {
  let summary = "Replace OSDN's token-by-token preconditioner scan by its chunked affine form";
  let description = [{
    Runs on a fused, unpartitioned forward (after --chunk-fuse-preconditioner, before
    --chunk-partition-kernels) and rewrites hypergrad_pass (the hypergradient d-scan, one cross-channel
    reduction ⟨d, u⟩ per token) into hypergrad_chunk_summary (per chunk, in parallel: the affine map
    from the chunk's incoming d to its step coefficients and its end d, a WY form with value
    dimension 1) and hypergrad_chunk_pass (sequential over chunks: 4CK FLOPs per chunk)
    (ChunkPrecondScanOps.td, docs/math.md §5.2). Both produce hypergrad_pass's results, so
    hypergrad_apply and everything after it are unchanged. A clamped step is not affine in d: the
    pass keeps hypergrad_pass and says so in a remark. --chunk-partition-kernels places the summary
    in precond_summary and the pass in precond_scan, the launch contract's roles for an unclamped
    hypergrad_ogd spec (DeviceFeatures.h hypergradChunked; the kernels call the feedback scan's headers
    runtime/device/dgps/tile/feedback_scan_{summary,pass}.cuh). Part of the default pipeline (buildPipeline, dgpsc compile and plan).

    Before:
    ```mlir
    %ds, %c, %df = chunk.hypergrad_pass %kr gain %beta {d_init = 1.0, eta = 1.0, post = false} : ...
    ```
    After:
    ```mlir
    %R, %a, %Y, %ld = chunk.hypergrad_chunk_summary %kr gain %beta {eta = 1.0} : ...
    %ds, %c, %df = chunk.hypergrad_chunk_pass %R, %a, %Y, %ld {d_init = 1.0} : ...
    ```
  }];
}

def DeriveBackward : Pass<"chunk-derive-backward", "::mlir::ModuleOp"> {
  let summary = "Derive the chunkwise backward (reverse mode) of each forward function";
  let description = [{
    For every lowered forward function `@x_forward` (canonicalised, not yet fused or partitioned),
    adds `@x_backward` (attribute `chunk.backward_of = @x_forward`): it recomputes the forward
    intermediates it needs, loads the cotangents (`do`, and `dfinal_state` /
    `dfinal_precond_state` when the forward stores those), runs the adjoint ops (ChunkGradOps.td)
    in reverse program order, sums the cotangents of a value with several uses (`chunk.add`) and
    stores `d<input>` for every loaded input: the reverse state pass (dS from the last chunk to the
    first), the adjoints of output, qk_attn, wy_recompute, solve_tril (d𝒜 = tril_{-1}(−𝒯ᵀ d𝒯 𝒯ᵀ))
    and kkt, the reverse chunk-local gate cumsums, the reverse accumulator scan, the squash's chain
    rule, the reverse hypergradient (OSDN) scan and diag_apply's adjoint, and l2norm's adjoint
    (docs/backward_ir.md).

    Recompute or store is decided per forward intermediate: the names in `keep` (default
    `solve_tril`, as FLA saves 𝒯) are stored by the forward (`chunk.store "saved.<name>"` is added
    to the forward function) and loaded by the backward; every other intermediate is recomputed.
    The decision is recorded on the backward function as `bwd.keep` / `bwd.recompute`. Fails with
    one error on fused preconditioner ops or a partitioned forward (run this pass earlier).

    Before:
    ```mlir
    func.func @gdn_forward() {
      ... %T = chunk.solve_tril %A ...
      %o = chunk.output query %q, vnew %vn, states %h, attn %Aqk gate %G ...
      chunk.store "o", %o ...
    }
    ```
    After:
    ```mlir
    func.func @gdn_forward() { ... chunk.store "saved.solve_tril", %T ... }
    func.func @gdn_backward() attributes {bwd.keep = ["solve_tril"], bwd.recompute = [...],
                                          chunk.backward_of = @gdn_forward, ...} {
      ... %T = chunk.load "saved.solve_tril" ...           // kept
      ... %vn, %h, %S = chunk.state_pass ...              // recomputed
      %do = chunk.load "do" ...
      %dq, %dvn, %dh, %dAqk, %dG = chunk.output_grad query %q, vnew %vn, states %h, attn %Aqk gate %G, d %do ...
      %dw, %du, %dkw, %dG2, %dS0 = chunk.state_pass_grad w %w, write %k gate %G, vnew %vn, states %h,
                                     dvnew %dvn, dstates %dh, dfinal %dSf ...
      ... chunk.wy_recompute_grad ..., chunk.solve_tril_grad ..., chunk.kkt_grad ...
      chunk.store "dk", %dk ...
    }
    ```
  }];
  let options = [
    ListOption<"keep", "keep", "std::string",
               "forward intermediates the forward stores for the backward (the rest is recomputed): "
               "solve_tril, kkt, qk_attn, wy_recompute.w, wy_recompute.u, state_pass.v_new, "
               "state_pass.states; default solve_tril">,
  ];
  let dependentDialects = ["::dgps::chunk::ChunkDialect", "::mlir::func::FuncDialect"];
}

def PartitionBackward : Pass<"chunk-partition-backward", "::mlir::ModuleOp"> {
  let summary = "Group a derived backward into kernel roles and estimate its cost";
  let description = [{
    Partitions every backward function (chunk.backward_of) as --chunk-partition-kernels does the
    forward, into the roles (launch order) bwd_precond_scan (recomputed accumulator scan),
    bwd_chunk_local (recomputed KKT, 𝒯, Aqk), bwd_state_fwd (recomputed W, U and state pass),
    bwd_output_grad (dq, dAqk, dv_new, dh per chunk), bwd_state_reverse (the reverse state pass),
    bwd_chunk_grad (the adjoints of qk_attn, wy_recompute, solve_tril, kkt; parallel over chunks),
    bwd_precond_reverse (squash and the reverse accumulator scan) and bwd_prologue_grad (l2norm and
    gate-cumsum adjoints, gradient stores). Loads, l2norm, gate cumsums, the squash apply and
    cotangent sums are recomputed where used. Sets `chunk.plan` (bytes and FLOPs per token-head,
    BackwardCost.cpp) and reports it as a remark, with the bytes the forward writes for the kept
    intermediates.

    After (GDN, default keep):
    ```mlir
    %T, %Aqk = chunk.kernel "bwd_chunk_local" -> ... {...}       // 𝒯 read from saved.solve_tril
    %vn, %h = chunk.kernel "bwd_state_fwd" -> ... {...}
    %dq, %dvn, %dh, %dAqk, %dG = chunk.kernel "bwd_output_grad" -> ... {...}
    ... chunk.kernel "bwd_state_reverse" ..., "bwd_chunk_grad" ..., "bwd_prologue_grad" {chunk.store "dq" ...}
    ```
  }];
}

def LowerDecodeToTile : Pass<"dgps-lower-decode-to-tile", "::mlir::ModuleOp"> {
  let summary = "Lower the decode role of each dgps.recurrence to a function over typed tiles";
  let description = [{
    Decode (one token per batch row, docs/math.md §1) has no chunk-IR body, so it is lowered from the
    recurrence's attributes. For every dgps.recurrence whose kernels include decode, adds `func.func
    @<name>_decode` (keeping the recurrence) with attributes `tile.role = "decode"`, `tile.grid` ("value_tile":
    one CTA per (b, hv, value tile); "key_head" when a preconditioner state must have a single writer: one CTA
    per (b, h) looping over its value tiles) and `tile.value_tile` (BV = 32); a "key_head" CTA reads the next
    value tile's state ahead, so it also gets its launch bound `tile.min_ctas_per_sm = array<i32: 4, 3, 2>`
    (CTAs per SM for K = KP <= 128, a padded K, KP > 128; Tile.h), which the emitter prints as
    `__launch_bounds__`. The per-model variation is decided here and appears as different tile ops: scalar decay
    is `tile.mul` of the state fragment by exp(g), diagonal decay a `tile.row_scale` by a shared exp(g) vector,
    no decay nothing; the gain a `tile.mul`; the delta rule a two-vector `tile.contract` (Sᵀk̂ and Sᵀq_r) and a
    `tile.sub`, the linear rule a one-vector contract; ema_sq_squash and hypergrad_ogd preconditioner steps are
    elementwise/reduction tile maths on the [K] state, multiplying the write key (key side) or the read query
    (query side).

    Before:
    ```mlir
    dgps.recurrence @gdn {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>,
                          precond = #dgps.precond<none>, solve = #dgps.solve<delta>,
                          kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>], ...}
    ```
    After (appended next to the recurrence):
    ```mlir
    func.func @gdn_decode() attributes {tile.grid = "value_tile", tile.role = "decode", tile.value_tile = 32 : i64} {
      %scale = tile.load_scalar "scale" at none : f32
      %0 = tile.view "k" at bh : !bf16_k_global_row
      %k = tile.load %0 : !bf16_k_global_row -> !f32_k_reg_split
      %1 = tile.view "q" at bh : !bf16_k_global_row
      %q = tile.load %1 : !bf16_k_global_row -> !f32_k_reg_split
      %ss:2 = tile.reduce_sum %kk, %qq : !f32_k_reg_split, !f32_k_reg_split -> f32, f32  // Σk², Σq² at once
      ... // k̂ = k · rsqrt(Σk² + eps), likewise q̂; q_r = scale · q̂
      %kwq = tile.reduce_sum %kq : !f32_k_reg_split -> f32
      %sk = tile.copy %kh : !f32_k_reg_split -> !f32_k_smem_row
      %sq = tile.copy %qr : !f32_k_reg_split -> !f32_k_smem_row
      tile.barrier
      tile.for_value_tiles {
        %sv = tile.view "state" at bhv : !f32_kv_global_row
        %S = tile.load %sv : !f32_kv_global_row -> !f32_kbv_reg_frag
        %d = tile.exp %g : f32
        %DS = tile.mul %S, %d : !f32_kbv_reg_frag, f32 -> !f32_kbv_reg_frag
        %Sk, %Sq = tile.contract %DS, %sk, %sq : ...
        %r = tile.sub %v, %Sk : ...       // delta rule
        %e = tile.mul %r, %beta : ...     // gain
        %o = tile.add %Sq, %ekq : ...     // o = (DS)ᵀq_r + (k_w·q_r) e
        %S1 = tile.outer_add %DS, %sk, %e : ...
        tile.store %S1, %sv : ...
      }
      return
    }
    ```
  }];
  let dependentDialects = ["::dgps::tile::TileDialect", "::mlir::func::FuncDialect"];
}

def LowerChunkLocalToTile : Pass<"dgps-lower-chunk-local-to-tile", "::mlir::ModuleOp"> {
  let summary = "Lower the chunk_local kernel of each partitioned forward to a function over chunk tiles";
  let description = [{
    Runs on the partitioned chunk IR (after --chunk-partition-kernels). For every
    `chunk.kernel "chunk_local"` adds `func.func @<name>_chunk_local` (the forward function's name
    without `_forward`) with `tile.role = "chunk_local"`, `tile.grid = "chunk"` (one CTA per chunk slot
    and value head) and `tile.launch_features` (the DeviceFeatures.h FeatureSet whose workspace and
    shared-memory layout the kernel shares with the package's other roles). Each chunk op
    becomes tile maths: loads are `tile.chunk_rows`, the l2norms one `tile.row_rsqrt_norm` (the rows
    stay unnormalised; the factors scale products and the token record), `chunk.gate_cumsum` a
    `tile.cumsum` in log2 units, `chunk.kkt` and `chunk.qk_attn` the parts of one
    `tile.lower_products` (a [C] gate in the epilogue, a [C, K] gate inside the sum), `chunk.solve_tril`
    `tile.tri_inverse` and `tile.store_lower_col_scaled`. The per-token record and, for a [C, K] gate,
    the gated operands opq/opk/opw and the last-row decays pdec that state_output reads are written
    from the same tiles. The preconditioner's `chunk.accum_apply` / `chunk.hypergrad_apply` becomes a
    `tile.channel_scan` from the chunk-start state (workspace "pst") that multiplies the write key (a
    new tile) or the read query (in place). With `write-key` giving a stored write key (tile.launch_features
    write_key 1 or 2) the scanned P ⊙ k is written for the walks: `tile.store_rows` into "pwk", or, with a
    [C, K] gate, as the operand of the opw store (scanned before the gated stores); for a query-side
    preconditioner (write_key 1) the scanned P ⊙ q is written with `tile.store_rows` into "pwq". Fails, naming
    the op, on a chunk op it cannot lower.

    Before (GDN):
    ```mlir
    %0:2 = chunk.kernel "chunk_local" -> ... {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "g" : !f32_bthv
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %2 {eps = 1.0e-06 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.l2norm %1 {eps = 1.0e-06 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.gate_cumsum %3 : !f32_bthv -> !f32_bthv
      %8 = chunk.kkt read %5, write %5 gain %4 gate %7 : ...
      %9 = chunk.solve_tril %8 : !f32_bthvc -> !bf16_bthvc
      %10 = chunk.qk_attn query %6, write %5 gate %7 : ...
      chunk.yield %9, %10 : !bf16_bthvc, !bf16_bthvc
    }
    ```
    After (appended to the module):
    ```mlir
    func.func @gdn_chunk_local() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 0, 0, 0, 1, 0>,
                                             tile.role = "chunk_local"} {
      %q = tile.chunk_rows "q" at key_head : !bf16_ck_smem_row
      %k = tile.chunk_rows "k" at key_head : !bf16_ck_smem_row
      %g = tile.chunk_rows "g" at value_head : !f32_c_smem_row
      %b = tile.chunk_rows "beta" at value_head : !f32_c_smem_row
      tile.barrier
      %rk, %rq = tile.row_rsqrt_norm %k, %q {eps = 9.99999997E-7 : f32} : ...
      %G = tile.cumsum %g {scale = 1.44269502 : f32} : !f32_c_smem_row
      tile.barrier
      %s = tile.load_scalar "scale" at none : f32
      tile.store_token_record %rq, %rk, %b, %s gate %G into "tok" : !f32_c_smem_row, !f32_c_smem_row
      %qb = tile.encode_bf16 %q : !bf16_ck_smem_row
      %kb = tile.encode_bf16 %k : !bf16_ck_smem_row
      tile.barrier
      %A = tile.lower_products rows(%kb, %qb) cols %kb row_factors(%b, %s) (%rk, %rq) col_factor %rk
             gate %G into "aqk" : (...) -> !f32_cc_smem_row
      tile.barrier
      %T = tile.tri_inverse %A : !f32_cc_smem_row
      tile.store_lower_col_scaled %T, %b into "tb" : !f32_cc_smem_row, !f32_c_smem_row
      return
    }
    ```
  }];
  let options = [
    Option<"writeKey_", "write-key", "std::string", /*default=*/"\"rebuilt\"",
           "The walks' preconditioned operand, a key-side preconditioner's write key P ⊙ k̂ or a query-side one's "
           "query P ⊙ q̂ (DeviceFeatures.h FeatureSet::write_key): rebuilt (every walk that reads it rebuilds it from "
           "pst in a producer warpgroup), stored (chunk_local stores it, every walk loads it), segments (write key "
           "only: stored; the segment walks load it, state_output rebuilds it; scalar decay only) or auto "
           "(StateWalkLowering.h resolveWriteKey). The tile lowerings of one compile must get the same value, and a "
           "stored operand needs this compile's chunk_local from the tile IR (dgpsc --write-key).">
  ];
  let dependentDialects = ["::dgps::tile::TileDialect", "::mlir::func::FuncDialect"];
}

def LowerStateOutputToTile : Pass<"dgps-lower-state-output-to-tile", "::mlir::ModuleOp"> {
  let summary = "Lower the state_output kernel of each partitioned forward to a walk of a register state";
  let description = [{
    Runs on the partitioned chunk IR (after --chunk-partition-kernels). For every
    `chunk.kernel "state_output"` adds `func.func @<name>_state_output` (the forward function's name without
    `_forward`) with `tile.role = "state_output"`, `tile.grid = "value_tile"` (one CTA per sequence, value
    head and value tile of the configuration's BV columns) and `tile.launch_features` (the DeviceFeatures.h FeatureSet whose
    workspace and shared-memory layout the kernel shares with the other roles). The kernel's
    `chunk.state_pass` and `chunk.output` become one `tile.state_walk`: `w` present (a delta rule) gives
    value_form residual_lower reading the solve block "tb", otherwise scaled; a [C] gate gives carry uniform,
    a [C, K] gate carry columns over "pdec" with the gated operands "opq", "opk", "opw" that chunk_local
    wrote; an `initial_state` load gives start argument; `chunk.store "o"` and `"final_state"` set
    write_output and write_final. The other ops of the kernel (loads, l2norm, gate_cumsum, wy_recompute,
    gain_scale) are what chunk_local already folded into the workspace (token record, blocks, gated
    operands). A preconditioner's in-kernel rebuild (`chunk.accum_apply`, `chunk.hypergrad_apply`) of the
    state pass's write key or the read-out's query becomes the walk's `rescale` (the per-channel scan of the
    raw key from "pst", its read-out, and the producer warpgroup that runs it with its register budget) and
    the walk's `write_key_form` rebuilt; where `write-key` gives state_output the stored write key the walk
    instead reads "pwk" (or "opw" with a [C, K] gate) `as stored`, with no rescale and no producers. A query
    rebuild sets `query_form` rebuilt; where `write-key` gives a query-side preconditioner the stored query the
    walk reads `query "pwq" as stored` instead, with no rescale and no producers.
    Fails, naming the op, on anything else.

    Before (GDN):
    ```mlir
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "v" : !bf16_bthvv
      %4 = chunk.load "g" : !f32_bthv
      %5 = chunk.load "beta" : !f32_bthv
      %6 = chunk.l2norm %2 {eps = 1.0E-6 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.l2norm %1 {eps = 1.0E-6 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.gate_cumsum %4 : !f32_bthv -> !f32_bthv
      %w, %u = chunk.wy_recompute %0#0, read %6, value %3 gain %5 gate %8 : (...) -> (...)
      %9 = chunk.load "initial_state" {absent = 0.0 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %6 gate %8 init %9 : (...) -> (...)
      %10 = chunk.output query %7, vnew %v_new, states %states, attn %0#1 gate %8 : (...) -> !bf16_bthvv
      chunk.store "o", %10 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    ```
    After (appended to the module):
    ```mlir
    func.func @gdn_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 1, 1, 0, 0, 0, 1, 0>,
                                              tile.role = "state_output"} {
      tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb"
        readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
      return
    }
    ```
  }];
  let options = [
    Option<"writeKey_", "write-key", "std::string", /*default=*/"\"rebuilt\"",
           "The walks' preconditioned operand, a key-side preconditioner's write key P ⊙ k̂ or a query-side one's "
           "query P ⊙ q̂ (DeviceFeatures.h FeatureSet::write_key): rebuilt (every walk that reads it rebuilds it from "
           "pst in a producer warpgroup), stored (chunk_local stores it, every walk loads it), segments (write key "
           "only: stored; the segment walks load it, state_output rebuilds it; scalar decay only) or auto "
           "(StateWalkLowering.h resolveWriteKey). The tile lowerings of one compile must get the same value, and a "
           "stored operand needs this compile's chunk_local from the tile IR (dgpsc --write-key).">
  ];
  let dependentDialects = ["::dgps::tile::TileDialect", "::mlir::func::FuncDialect"];
}

def LowerSegmentRolesToTile : Pass<"dgps-lower-segment-roles-to-tile", "::mlir::ModuleOp"> {
  let summary = "Lower the kernels of a segmented plan (the sequence-parallel state pass) to tile functions";
  let description = [{
    Runs on a partitioned plan rewritten by --chunk-segment-state-pass (docs/math.md §8). For each forward
    with a `segment_summary` kernel it appends three tile functions (the forward's name without `_forward`
    as prefix), each with `tile.launch_features` as --dgps-lower-state-output-to-tile writes them:
    `@<name>_segment_summary` (`tile.grid = "segment"`: one CTA per segment slot, value head and tile) holding
    two `tile.state_walk` over one segment's chunks, the end state from a zero start into the workspace region
    "seg_ext" and the transition product from the identity with `zero_values` into "seg_trans";
    `@<name>_segment_fold` (`tile.grid = "value_tile"`) holding `tile.state_fold` (write_final when the plan
    stores "final_state"); `@<name>_segment_state_output` (`tile.grid = "segment"`) holding the walk from
    `start region` "seg_start" that writes o. The walks' operand sources and carries are chosen as for
    state_output. A plan without a segment_summary kernel is left alone; a preconditioned forward, or a
    kernel op without a tile lowering, is an error naming it.

    After (GDN, appended to the module):
    ```mlir
    func.func @gdn_segment_summary() attributes {tile.grid = "segment", ..., tile.role = "segment_summary"} {
      tile.state_walk start zero query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb"
        readout "aqk" value_form residual_lower carry uniform end_region "seg_ext"
      tile.state_walk start identity query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb"
        readout "aqk" value_form residual_lower carry uniform end_region "seg_trans" {zero_values}
      return
    }
    func.func @gdn_segment_fold() attributes {tile.grid = "value_tile", ..., tile.role = "segment_fold"} {
      tile.state_fold trans "seg_trans" ext "seg_ext" start "seg_start" {write_final}
      return
    }
    func.func @gdn_segment_state_output() attributes {tile.grid = "segment", ...} {
      tile.state_walk start region query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb"
        readout "aqk" value_form residual_lower carry uniform start_region "seg_start" {write_output}
      return
    }
    ```
  }];
  let options = [
    Option<"writeKey_", "write-key", "std::string", /*default=*/"\"rebuilt\"",
           "The walks' preconditioned operand, a key-side preconditioner's write key P ⊙ k̂ or a query-side one's "
           "query P ⊙ q̂ (DeviceFeatures.h FeatureSet::write_key): rebuilt (every walk that reads it rebuilds it from "
           "pst in a producer warpgroup), stored (chunk_local stores it, every walk loads it), segments (write key "
           "only: stored; the segment walks load it, state_output rebuilds it; scalar decay only) or auto "
           "(StateWalkLowering.h resolveWriteKey). The tile lowerings of one compile must get the same value, and a "
           "stored operand needs this compile's chunk_local from the tile IR (dgpsc --write-key).">
  ];
  let dependentDialects = ["::dgps::tile::TileDialect", "::mlir::func::FuncDialect"];
}

def LowerPrecondRolesToTile : Pass<"dgps-lower-precond-roles-to-tile", "::mlir::ModuleOp"> {
  let summary = "Lower the preconditioner roles (precond_summary, precond_scan) of each partitioned forward to tile IR";
  let description = [{
    Runs on the partitioned chunk IR (after --chunk-partition-kernels). For a forward whose preconditioner
    state is a scan (ema_sq_squash: `chunk.accum_summary` in precond_summary, `chunk.accum_pass` in
    precond_scan) it appends two tile functions (the forward's name without `_forward` as prefix), each with
    `tile.role` and `tile.launch_features` (the DeviceFeatures.h FeatureSet fixing the workspace layout):
    `@<name>_precond_summary` (`tile.grid = "chunk_key_head"`): the key rows and per-row inputs of one chunk
    at one key head, the scan's row decay a = e^{gate} (1 without a gate), step weight b = the gain (1
    without), the key's l2norm factor r (1 without l2norm), then `tile.channel_scan_total` (the chunk's
    summary into "psum") and `tile.store_sum_exp` of the gate (its total decay into "pgam");
    `@<name>_precond_scan` (`tile.grid = "sequence_key_head"`): one `tile.chunk_affine_scan` from
    "initial_precond_state" through "pgam" / "psum" into the chunk starts "pst", with `final` when the kernel
    stores "final_precond_state". For OSDN's chunked hypergradient d-scan (`chunk.hypergrad_chunk_summary`,
    `chunk.hypergrad_chunk_pass`; docs/math.md §5.2) the summary loads the raw key rows, β at the value head
    (a fill of 1 without a gain) and the retention log-gate (a fill of 0 without one), then
    `tile.hypergrad_chunk_summary` (η and the l2 eps as attributes) into "hgtri" / "hgvec"; the scan is one
    `tile.hypergrad_chunk_pass` from "initial_precond_state" (an absent one reads as d_init) over the same raw
    key into "pst" and "pcoef". A clamped d-scan (a precond_scan without a precond_summary: the token-by-token
    `chunk.hypergrad_pass` with a bound) becomes one `tile.hypergrad_token_scan` (`tile.grid =
    "sequence_key_head_warp"`). A forward without preconditioner kernels is left alone. Any other op in those
    kernels fails naming it.

    OSDN after (tests/lit/tile/lower-precond-roles-hypergrad.mlir):
    ```mlir
    func.func @osdn_precond_summary() attributes {tile.grid = "chunk_key_head", ..., tile.role = "precond_summary"} {
      %0 = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
      %1 = tile.chunk_rows "beta" at value_head : !tile.tile<[C], f32, smem, row>
      %2 = tile.chunk_fill 0.0 : !tile.tile<[C], f32, smem, row>
      tile.barrier
      tile.hypergrad_chunk_summary %0, %1, %2 into "hgtri", "hgvec" {eta = 1.0 : f32, l2_eps = 9.99999997E-7 : f32} : ...
      return
    }
    func.func @osdn_precond_scan() attributes {tile.grid = "sequence_key_head", ..., tile.role = "precond_scan"} {
      tile.hypergrad_chunk_pass key "k" start "initial_precond_state" summary "hgtri", "hgvec" into "pst", "pcoef" final "final_precond_state" {absent = 1.0 : f32}
      return
    }
    ```

    Before (PGDN):
    ```mlir
    %0:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = ...} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.l2norm %3 {eps = 1.0E-6 : f64} : !bf16_bthk -> !f32_bthk
      %5 = chunk.load "precond_g" : !f32_bth
      %6 = chunk.load "precond_beta" : !f32_bth
      %sum, %log_decay = chunk.accum_summary %4 gate %5 gain %6 : (...) -> (!f32_bnthk, !f32_bnth)
      chunk.yield %sum, %log_decay : !f32_bnthk, !f32_bnth
    }
    %1 = chunk.kernel "precond_scan" -> !f32_bnthk_global attributes {tile = ...} {
      %3 = chunk.load "initial_precond_state" {absent = 0.0 : f64} : !f32_nhk
      %start, %final = chunk.accum_pass %0#0, %0#1 init %3 : (...) -> (!f32_bnthk, !f32_nhk)
      chunk.store "final_precond_state", %final : !f32_nhk
      chunk.yield %start : !f32_bnthk
    }
    ```
    After (appended to the module):
    ```mlir
    func.func @pgdn_precond_summary() attributes {tile.grid = "chunk_key_head", tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0>, tile.role = "precond_summary"} {
      %0 = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
      %1 = tile.chunk_rows "precond_g" at key_head : !tile.tile<[C], f32, smem, row>
      %2 = tile.row_exp %1 {pad = 1.0 : f32} : !tile.tile<[C], f32, smem, row> -> !tile.tile<[C], f32, smem, row>
      %3 = tile.chunk_rows "precond_beta" at key_head : !tile.tile<[C], f32, smem, row>
      tile.barrier
      %4 = tile.row_rsqrt_norm %0 {eps = 9.99999997E-7 : f32} : !tile.tile<[C, K], bf16, smem, row> -> !tile.tile<[C], f32, smem, row>
      tile.barrier
      tile.channel_scan_total %0, %2, %3, %4 into "psum" : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>
      tile.store_sum_exp %1 into "pgam" : !tile.tile<[C], f32, smem, row>
      return
    }
    func.func @pgdn_precond_scan() attributes {tile.grid = "sequence_key_head", ..., tile.role = "precond_scan"} {
      tile.chunk_affine_scan start "initial_precond_state" decay "pgam" step "psum" into "pst" final "final_precond_state"
      return
    }
    ```
  }];
  let dependentDialects = ["::dgps::tile::TileDialect", "::mlir::func::FuncDialect"];
}

def DeclareTileWorkspace : Pass<"dgps-declare-tile-workspace", "::mlir::ModuleOp"> {
  let summary = "Declare the package's workspace (tile.workspace) from the regions its tile roles read and write";
  let description = [{
    Run on the module that holds every tile function of one package (dgpsc assembles it from the role
    lowerings). Collects the workspace regions the tile ops name (`tile.store_rows ... into "pwk"`, a state walk's
    record/solve/readout/operands, the preconditioner roles' "pst", "psum", ..., the segment pass's "seg_*") and
    sets the module attribute `tile.workspace` (Dialect/Tile/IR/Workspace.h) to the workspace catalog's entries
    for them, in layout order: name, element bytes and size as extents over the problem shape and tile
    configuration. The tile dialect then checks it: every region a role names is declared, every declared one is
    written by some role and read by some role. The emitter prints it into kernels.cu (the offsets the kernels
    index) and manifest.yaml (launch.workspace.buffers, which the runtime evaluates to size the buffer).
    A region no catalog entry holds is an error at the op that names it.

    After, for pgdn:
    ```mlir
    module attributes {tile.workspace = [{bytes = 2 : i64, name = "tb", size = ["slots", "HV", "chunk", "chunk"]},
        {bytes = 2 : i64, name = "aqk", size = ["slots", "HV", "chunk", "chunk"]}, ...,
        {bytes = 2 : i64, name = "pwk", size = ["slots", "HV", "chunk", "K"]}, ...]} { ... }
    ```
  }];
  let dependentDialects = ["::dgps::tile::TileDialect"];
}

#endif
