// Per-channel decay (KDA): the segment ops take the [B,T,HV,K] gate cumsum, so M carries Diag(e^{G_C}) per
// chunk exactly as the state pass does.
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-segment-state-pass=segment-chunks=2 | %FileCheck %s

// CHECK-NOT: chunk.state_pass
// CHECK: %[[G:.*]] = chunk.gate_cumsum %{{.*}} : !f32_bthvk -> !f32_bthvk
// CHECK: chunk.segment_summary w %{{.*}}, u %{{.*}}, write %{{.*}} gate %[[G]] : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_bthvk) -> (!f32_bnshvkv, !f32_bnshvkk)
// CHECK: chunk.segment_fold
// CHECK: chunk.segment_state_pass {{.*}} gate %[[G]] start
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @kda {decay = #dgps.decay<diagonal>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>,
      qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false,
                    final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
