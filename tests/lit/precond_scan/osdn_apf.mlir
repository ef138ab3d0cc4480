// --chunk-parallel-precond-scan on OSDN with APF retention and an initial d: the token-by-token hypergrad_pass
// becomes hypergrad_chunk_summary (per chunk: read rows, base, write rows, log retention) and
// hypergrad_chunk_pass (the short pass over chunks) with the same three results, so hypergrad_apply is
// unchanged. The partitioner puts the summary in precond_summary and the pass in precond_scan.
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-parallel-precond-scan | %FileCheck %s
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-parallel-precond-scan --chunk-partition-kernels | %FileCheck %s --check-prefix=PLAN

// CHECK-NOT: chunk.hypergrad_pass
// CHECK: %[[KR:.*]] = chunk.l2norm
// CHECK: %[[D0:.*]] = chunk.load "initial_precond_state"
// CHECK: %[[R:.*]], %[[A:.*]], %[[Y:.*]], %[[LD:.*]] = chunk.hypergrad_chunk_summary %[[KR]] gain %[[BETA:[0-9]+]] retention %[[RET:[0-9]+]] {eta = 5.000000e-01 : f64} : {{.*}} -> (!f32_bthk, !f32_bth, !f32_bthk, !f32_bnth)
// CHECK: %[[START:.*]], %[[COEF:.*]], %[[DF:.*]] = chunk.hypergrad_chunk_pass %[[R]], %[[A]], %[[Y]], %[[LD]] init %[[D0]] {d_init = 1.000000e+00 : f64} : {{.*}} -> (!f32_bnthk, !f32_bth, !f32_nhk)
// CHECK: chunk.store "final_precond_state", %[[DF]]
// CHECK: %[[KW:.*]] = chunk.hypergrad_apply %[[KR]], key %[[KR]], coef %[[COEF]] retention %[[RET]], start %[[START]]
// CHECK: chunk.kkt read %[[KR]], write %[[KW]] gain %[[BETA]]

// PLAN: chunk.kernel "precond_summary" -> !f32_bthk_global, !f32_bth_global, !f32_bthk_global, !f32_bnth_global
// PLAN: chunk.hypergrad_chunk_summary
// PLAN: chunk.kernel "precond_scan" -> !f32_bnthk_global, !f32_bth_global
// PLAN: chunk.hypergrad_chunk_pass
// PLAN: chunk.store "final_precond_state"
// PLAN: chunk.kernel "chunk_local"
// PLAN: chunk.hypergrad_apply
// PLAN: chunk.kernel "state_output"
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn_apf {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 0.5, retention = true, timing = #dgps.timing<pre>, init = 1.0>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = false, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
