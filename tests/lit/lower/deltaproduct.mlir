// Gated DeltaProduct (householder_steps = n_h): the chunkwise ops run over the T·n_h Householder steps;
// the gate enters on each token's first step, the query on its last, and o is gathered from the last
// steps (docs/math.md §3.7). One step is GDN: the canonicalizer drops householder_steps = 1.
// RUN: %dgps-opt %s -split-input-file --canonicalize --dgps-lower-to-chunk --canonicalize | %FileCheck %s

// CHECK-DAG: !bf16_btqhk = !chunk.tensor<[B, TQ, H, K], bf16>
// CHECK-LABEL: func.func @gdp_forward
// CHECK-SAME: chunk.householder_steps = 2 : i64
// CHECK: %[[Q:.*]] = chunk.load "q" : !bf16_btqhk
// CHECK: %[[K:.*]] = chunk.load "k" : !bf16_bthk
// CHECK: %[[V:.*]] = chunk.load "v" : !bf16_bthvv
// CHECK: %[[G:.*]] = chunk.load "g" : !f32_btqhv
// CHECK: %[[GS:.*]] = chunk.spread_steps %[[G]] {step = 0 : i64, steps = 2 : i64} : !f32_btqhv -> !f32_bthv
// CHECK: %[[BETA:.*]] = chunk.load "beta" : !f32_bthv
// CHECK: %[[KR:.*]] = chunk.l2norm %[[K]]
// CHECK: %[[QN:.*]] = chunk.l2norm %[[Q]] {{.*}} -> !f32_btqhk
// CHECK: %[[QS:.*]] = chunk.spread_steps %[[QN]] {step = 1 : i64, steps = 2 : i64} : !f32_btqhk -> !f32_bthk
// CHECK: %[[GC:.*]] = chunk.gate_cumsum %[[GS]]
// CHECK: chunk.kkt read %[[KR]], write %[[KR]] gain %[[BETA]] gate %[[GC]]
// CHECK: chunk.qk_attn query %[[QS]], write %[[KR]] gate %[[GC]]
// CHECK: %[[O:.*]] = chunk.output query %[[QS]]
// CHECK: %[[OT:.*]] = chunk.gather_steps %[[O]] {step = 1 : i64, steps = 2 : i64} : !bf16_bthvv -> !bf16_btqhvv
// CHECK: chunk.store "o", %[[OT]]
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @gdp {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, householder_steps = 2, qk_l2norm = true,
      l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// Without decay (DeltaProduct) there is no gate to spread; three steps read the query on step 2.
// CHECK-LABEL: func.func @dp3_forward
// CHECK-SAME: chunk.householder_steps = 3 : i64
// CHECK-NOT: chunk.load "g"
// CHECK: chunk.spread_steps %{{.*}} {step = 2 : i64, steps = 3 : i64}
// CHECK: chunk.gather_steps %{{.*}} {step = 2 : i64, steps = 3 : i64}
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @dp3 {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, householder_steps = 3, qk_l2norm = true,
      l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// One step is the delta rule: no step attribute, no step ops, q and o on the token axis T.
// CHECK-LABEL: func.func @one_forward
// CHECK-NOT: householder_steps
// CHECK: chunk.load "q" : !bf16_bthk
// CHECK-NOT: _steps
// CHECK: return
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @one {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, householder_steps = 1, qk_l2norm = true,
      l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
