// The verifier applies the spec language's rules (dsl/lib/SpecValidate.cpp) to hand-written IR.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

module {
  // expected-error @+1 {{precond.squash.x: must be > 1, got 0.5}}
  dgps.recurrence @p {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 0.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{tuning.chunk[0]: 48 is not one of {16, 32, 64}}}
  dgps.recurrence @p {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6,
      heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [48], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{hypergrad_ogd needs solve.kind: delta}}
  dgps.recurrence @p {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 1.0, retention = false, timing = #dgps.timing<pre>, init = 1.0>,
      solve = #dgps.solve<linear>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{precond_source ema_sq_squash needs the `squash` parameters}}
  dgps.recurrence @p {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{unstable write}}
  dgps.recurrence @p {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 2.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 1.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{solve.steps: must be in 1..4, got 5}}
  dgps.recurrence @gdp {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, householder_steps = 5, qk_l2norm = true,
      l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{solve.steps: Householder steps are repeated delta-rule steps}}
  dgps.recurrence @lin {decay = #dgps.decay<none>, gain = #dgps.gain<none>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<linear>, householder_steps = 2, qk_l2norm = true,
      l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

module {
  // expected-error @+1 {{attribute 'householder_steps': must be in 1..4, got 4294967298}}
  dgps.recurrence @big {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, householder_steps = 4294967298, qk_l2norm = true,
      l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
