// The lowering is uniform: no decay is a zero gate, no gain a unit gain, no initial state a zero
// state. The canonicalizer folds them away.
// RUN: %dgps-opt %s --dgps-lower-to-chunk | %FileCheck %s --check-prefix=LOWERED
// RUN: %dgps-opt %s --dgps-lower-to-chunk --canonicalize | %FileCheck %s --check-prefix=CANON

// Linear attention: D = I, gain 1, no initial state.
// LOWERED-LABEL: func.func @la_forward
// LOWERED-DAG: %[[ZERO:.*]] = chunk.splat 0.000000e+00 : !f32_bthv
// LOWERED-DAG: %[[ONE:.*]] = chunk.splat 1.000000e+00 : !f32_bthv
// LOWERED-DAG: %[[G:.*]] = chunk.gate_cumsum %[[ZERO]]
// LOWERED-DAG: %[[V:.*]] = chunk.load "v"
// LOWERED: %[[U:.*]] = chunk.gain_scale %[[V]] gain %[[ONE]]
// LOWERED: chunk.state_pass u %[[U]], write %{{.*}} gate %[[G]] init %{{.*}}
// LOWERED: chunk.qk_attn query %{{.*}}, write %{{.*}} gate %[[G]]

// CANON-LABEL: func.func @la_forward
// CANON-NOT: chunk.splat
// CANON-NOT: gate_cumsum
// CANON-NOT: gain_scale
// CANON: %[[V:.*]] = chunk.load "v"
// CANON: chunk.state_pass u %[[V]], write %[[K:[0-9]+]] :
// CANON: chunk.qk_attn query %{{.*}}, write %[[K]] :
// CANON: chunk.output query %{{.*}}, vnew %{{.*}}, states %{{.*}}, attn %{{.*}} :
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @la {decay = #dgps.decay<none>, gain = #dgps.gain<none>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<linear>, qk_l2norm = true, l2norm_eps = 1.0e-6,
      heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = false, final_state = true, initial_precond_state = false,
                    final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
