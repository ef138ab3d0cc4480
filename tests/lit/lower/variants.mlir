// Each axis lowers in one place: ATQ preconditions the query (symmetric keys), KDA's per-channel gate
// is [B, T, HV, K], OSDN's hypergradient scan uses the main gain, linear attention has no WY solve.
// RUN: %dgps-opt %s -split-input-file --canonicalize --dgps-lower-to-chunk --canonicalize | %FileCheck %s

// CHECK-LABEL: func.func @atq_forward
// CHECK: %[[KR:.*]] = chunk.l2norm %{{.*}} : !bf16_bthk -> !f32_bthk
// CHECK: %[[QR:.*]] = chunk.l2norm
// CHECK: %[[ACC:.*]], %{{.*}} = chunk.accum_scan %[[KR]]
// CHECK: %[[QW:.*]] = chunk.squash_apply %[[QR]], accum %[[ACC]]
// CHECK: chunk.kkt read %[[KR]], write %[[KR]]
// CHECK: chunk.qk_attn query %[[QW]], write %[[KR]]
// CHECK: chunk.output query %[[QW]]
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @atq {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<query>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 1.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// CHECK-LABEL: func.func @kda_forward
// CHECK: %[[G:.*]] = chunk.load "g" : !f32_bthvk
// CHECK: %[[GC:.*]] = chunk.gate_cumsum %[[G]] : !f32_bthvk -> !f32_bthvk
// CHECK: chunk.kkt read %[[KR:.*]], write %[[KR]] gain %{{.*}} gate %[[GC]] : (!f32_bthk, !f32_bthk, !f32_bthv, !f32_bthvk) -> !f32_bthvc
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @kda {decay = #dgps.decay<diagonal>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6,
      heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// CHECK-LABEL: func.func @osdn_forward
// CHECK: %[[BETA:.*]] = chunk.load "beta"
// CHECK: %[[KR:.*]] = chunk.l2norm
// CHECK: %[[D:.*]], %{{.*}} = chunk.hypergrad_scan %[[KR]] gain %[[BETA]] init %{{.*}} {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false}
// CHECK: %[[KW:.*]] = chunk.diag_apply %[[KR]], %[[D]]
// CHECK: chunk.kkt read %[[KR]], write %[[KW]] gain %[[BETA]] :
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 1.0, retention = false, timing = #dgps.timing<pre>, init = 1.0>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// Mamba-2 (linear solve, unbounded gain, no l2norm): U = diag(Δ) V, no KKT or triangular solve.
// CHECK-LABEL: func.func @mamba2_forward
// CHECK-NOT: chunk.l2norm
// CHECK-NOT: chunk.kkt
// CHECK-NOT: chunk.solve_tril
// CHECK: %[[U:.*]] = chunk.gain_scale %{{.*}} gain %{{.*}}
// CHECK: chunk.state_pass u %[[U]], write %{{.*}} gate
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @mamba2 {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 0x7FF0000000000000 : f64,
      precond = #dgps.precond<none>, solve = #dgps.solve<linear>, qk_l2norm = false, l2norm_eps = 1.0e-6,
      heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
