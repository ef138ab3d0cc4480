// GDN as dgps IR (specs/gdn.yaml with K = V = 128 only); the reference side of the
// "PGDN with its preconditioner off is GDN" test.
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @gdn {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>,
      qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16, f16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false,
                    final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>}
}
