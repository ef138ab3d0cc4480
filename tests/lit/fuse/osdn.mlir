// The OSDN scan is reduced to chunk-start states plus per-token step coefficients; inside a chunk the
// preconditioner is rebuilt elementwise where the key is loaded.
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner | %FileCheck %s

// CHECK-NOT: chunk.hypergrad_scan
// CHECK-NOT: chunk.diag_apply
// CHECK: %[[KR:.*]] = chunk.l2norm
// CHECK: %[[START:.*]], %[[COEF:.*]], %[[DF:.*]] = chunk.hypergrad_pass %[[KR]] gain %[[BETA:[0-9]+]] retention %[[R:[0-9]+]] {{.*}}post = true{{.*}} -> (!f32_bnthk, !f32_bth, !f32_nhk)
// CHECK: %[[KW:.*]] = chunk.hypergrad_apply %[[KR]], key %[[KR]], coef %[[COEF]] retention %[[R]], start %[[START]]
// CHECK: chunk.kkt read %[[KR]], write %[[KW]] gain %[[BETA]]
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn_apf {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 1.0, retention = true, timing = #dgps.timing<post>, init = 1.0, clamp_max = 1.5>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
