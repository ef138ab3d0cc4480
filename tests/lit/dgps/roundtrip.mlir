// The dgps dialect prints and parses its own output: every attribute group of a spec survives.
// RUN: %dgps-opt %s | %dgps-opt | %FileCheck %s

// CHECK: module attributes {dgps.target = "sm_90a"}
// CHECK: dgps.recurrence @osdn
// CHECK-SAME: decay = #dgps.decay<none>
// CHECK-SAME: hypergrad = #dgps.hypergrad<eta = 1.000000e+00 : f64, retention = true, timing = <post>, init = 1.000000e+00 : f64, clamp_min = 0.000000e+00 : f64, clamp_max = 2.000000e+00 : f64>
// CHECK-SAME: precond = #dgps.precond<diagonal>
// CHECK-SAME: precond_side = #dgps.side<key>
// CHECK-SAME: precond_source = #dgps.source<hypergrad_ogd>
// CHECK-SAME: tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64], warps = [4], stages = [1]>
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 1.0, retention = true, timing = #dgps.timing<post>, init = 1.0,
                                  clamp_min = 0.0, clamp_max = 2.0>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 64, 128>, value_dims = array<i64: 64, 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true,
                    final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64], warps = [4], stages = [1]>}
}
