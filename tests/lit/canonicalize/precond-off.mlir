// An absent preconditioner keeps no side, source, parameters or state tensors, and a hypergradient
// step of size 0 without retention (d stays at 1) is no preconditioner at all.
// RUN: %dgps-opt %s -split-input-file --canonicalize | %FileCheck %s

// CHECK-LABEL: dgps.recurrence @pgdn_off
// CHECK-SAME: io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>
// CHECK-SAME: precond = #dgps.precond<none>
// CHECK-NOT: precond_side
// CHECK-NOT: precond_source
// CHECK-NOT: squash
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @pgdn_off {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 1.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16, f16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true,
                    final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>}
}

// -----

// CHECK-LABEL: dgps.recurrence @osdn_frozen
// CHECK-SAME: precond = #dgps.precond<none>
// CHECK-NOT: hypergrad
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn_frozen {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 0.0, retention = false, timing = #dgps.timing<pre>, init = 1.0>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false,
                    final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// A moving hypergradient preconditioner stays.
// CHECK-LABEL: dgps.recurrence @osdn
// CHECK-SAME: hypergrad = #dgps.hypergrad<eta = 5.000000e-01 : f64
// CHECK-SAME: precond = #dgps.precond<diagonal>
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 0.5, retention = false, timing = #dgps.timing<pre>, init = 1.0>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false,
                    final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
