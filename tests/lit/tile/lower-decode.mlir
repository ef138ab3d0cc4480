// --dgps-lower-decode-to-tile: each model's decode step appears as different tile ops (no kind flags).
// RUN: %dgps-opt %s -split-input-file --canonicalize --dgps-lower-decode-to-tile | %FileCheck %s

// GDN: scalar decay is a broadcast multiply of the state fragment; the delta rule contracts the decayed
// state with k̂ and q_r in one pass; the gain scales the error; o = Sᵀq_r + (k̂·q_r) e.
// A value-tile CTA gets no launch bound (no tile.min_ctas_per_sm between the grid and the role).
// CHECK-LABEL: func.func @gdn_decode()
// CHECK-SAME: tile.grid = "value_tile", tile.role = "decode", tile.value_tile = 32
// CHECK: %[[SCALE:.*]] = tile.load_scalar "scale" at none : f32
// k and q are read before either norm, and both squared norms are one reduction (one pair of barriers).
// CHECK: %[[KV:.*]] = tile.view "k" at bh : !bf16_k_global_row
// CHECK: %[[K:.*]] = tile.load %[[KV]] : !bf16_k_global_row -> !f32_k_reg_split
// CHECK: %[[QV:.*]] = tile.view "q" at bh : !bf16_k_global_row
// CHECK: %[[Q:.*]] = tile.load %[[QV]] : !bf16_k_global_row -> !f32_k_reg_split
// CHECK: %[[KK:.*]] = tile.mul %[[K]], %[[K]]
// CHECK: %[[QQ:.*]] = tile.mul %[[Q]], %[[Q]]
// CHECK: %[[SS:.*]]:2 = tile.reduce_sum %[[KK]], %[[QQ]] : !f32_k_reg_split, !f32_k_reg_split -> f32, f32
// CHECK: %[[EPS:.*]] = tile.constant 9.99999997E-7
// CHECK: %[[KE:.*]] = tile.add %[[SS]]#0, %[[EPS]] : f32, f32 -> f32
// CHECK: %[[RK:.*]] = tile.rsqrt %[[KE]]
// CHECK: %[[KH:.*]] = tile.mul %[[K]], %[[RK]] : !f32_k_reg_split, f32 -> !f32_k_reg_split
// CHECK: %[[QE:.*]] = tile.add %[[SS]]#1, %{{.*}} : f32, f32 -> f32
// CHECK: %[[RQ:.*]] = tile.rsqrt %[[QE]]
// CHECK: %[[QH:.*]] = tile.mul %[[Q]], %[[RQ]] : !f32_k_reg_split, f32 -> !f32_k_reg_split
// CHECK: %[[QR:.*]] = tile.mul %[[QH]], %[[SCALE]]
// The shared vectors are written before k̂·q_r's reduction, whose barrier publishes them (no tile.barrier).
// CHECK: %[[SK:.*]] = tile.copy %[[KH]] : !f32_k_reg_split -> !f32_k_smem_row
// CHECK: %[[SQ:.*]] = tile.copy %[[QR]]
// CHECK-NOT: tile.copy
// CHECK-NOT: tile.barrier
// CHECK: %[[KQ:.*]] = tile.mul %[[KH]], %[[QR]]
// CHECK: %[[KWQ:.*]] = tile.reduce_sum %[[KQ]] : !f32_k_reg_split -> f32
// CHECK-NOT: tile.barrier
// CHECK: tile.for_value_tiles {
// CHECK: %[[SV:.*]] = tile.view "state" at bhv : !f32_kv_global_row
// CHECK: %[[S:.*]] = tile.load %[[SV]] : !f32_kv_global_row -> !f32_kbv_reg_frag
// CHECK: %[[G:.*]] = tile.load_scalar "g" at bhv : f32
// CHECK: %[[D:.*]] = tile.exp %[[G]] : f32
// CHECK: %[[DS:.*]] = tile.mul %[[S]], %[[D]] : !f32_kbv_reg_frag, f32 -> !f32_kbv_reg_frag
// CHECK: %[[V:.*]] = tile.load %{{.*}} : !bf16_v_global_row -> !f32_bv_reg_quad
// CHECK: %[[C:.*]]:2 = tile.contract %[[DS]], %[[SK]], %[[SQ]]
// CHECK: %[[ERR:.*]] = tile.sub %[[V]], %[[C]]#0
// CHECK: %[[BETA:.*]] = tile.load_scalar "beta" at bhv : f32
// CHECK: %[[E:.*]] = tile.mul %[[ERR]], %[[BETA]]
// CHECK: %[[EK:.*]] = tile.mul %[[E]], %[[KWQ]]
// CHECK: %[[O:.*]] = tile.add %[[C]]#1, %[[EK]]
// CHECK: tile.store %[[O]], %{{.*}} : !f32_bv_reg_quad, !bf16_v_global_row
// CHECK: %[[S1:.*]] = tile.outer_add %[[DS]], %[[SK]], %[[E]]
// CHECK: tile.store %[[S1]], %[[SV]] : !f32_kbv_reg_frag, !f32_kv_global_row
// CHECK-NOT: "precond_
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

// -----

// KDA: the per-channel decay is a [K] vector exp(g) published to shared memory and a row scale.
// CHECK-LABEL: func.func @kda_decode()
// CHECK-SAME: tile.grid = "value_tile"
// CHECK: tile.for_value_tiles {
// CHECK: %[[S:.*]] = tile.load %{{.*}} : !f32_kv_global_row -> !f32_kbv_reg_frag
// CHECK: %[[GV:.*]] = tile.view "g" at bhv : !f32_k_global_row
// CHECK: %[[G:.*]] = tile.load %[[GV]] : !f32_k_global_row -> !f32_k_reg_split
// CHECK: %[[D:.*]] = tile.exp %[[G]] : !f32_k_reg_split
// CHECK: %[[SD:.*]] = tile.copy %[[D]] : !f32_k_reg_split -> !f32_k_smem_row
// CHECK: tile.barrier
// CHECK: %[[DS:.*]] = tile.row_scale %[[S]], %[[SD]] : !f32_kbv_reg_frag, !f32_k_smem_row
// CHECK: tile.contract %[[DS]]
// CHECK-NOT: tile.load_scalar "g"
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @kda {decay = #dgps.decay<diagonal>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6,
      heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// PGDN: one CTA per key head owns the squash accumulator A ← γA + b k̂² (stored before use); the
// multiplier M = 2^(−log2(x)·r/(1+|r|)), r = ln(A + eps) − c, scales the write key only.
// Its CTA walks the group's value tiles reading the next state fragment ahead, so the lowering decides a launch
// bound per key width: 4 CTAs per SM for K = KP <= 128, 3 for a padded K, 2 for KP > 128.
// CHECK-LABEL: func.func @pgdn_decode()
// CHECK-SAME: tile.grid = "key_head", tile.min_ctas_per_sm = array<i32: 4, 3, 2>, tile.role = "decode"
// CHECK: %[[KH:.*]] = tile.mul %{{.*}}, %{{.*}} : !f32_k_reg_split, f32 -> !f32_k_reg_split
// CHECK: %[[PV:.*]] = tile.view "precond_state" at bh : !f32_k_global_row
// CHECK: %[[A0:.*]] = tile.load %[[PV]]
// CHECK: %[[PG:.*]] = tile.load_scalar "precond_g" at bh : f32
// CHECK: %[[GAM:.*]] = tile.exp %[[PG]] : f32
// CHECK: %[[A1:.*]] = tile.mul %[[A0]], %[[GAM]]
// CHECK: %[[K2:.*]] = tile.mul %[[KH]], %[[KH]]
// CHECK: %[[PB:.*]] = tile.load_scalar "precond_beta" at bh : f32
// CHECK: %[[W:.*]] = tile.mul %[[K2]], %[[PB]]
// CHECK: %[[A:.*]] = tile.add %[[A1]], %[[W]]
// CHECK: tile.store %[[A]], %[[PV]] : !f32_k_reg_split, !f32_k_global_row
// CHECK: %[[C:.*]] = tile.load_scalar "precond_center" at h {absent = 0.000000e+00 : f32} : f32
// CHECK: tile.log
// CHECK: %[[R:.*]] = tile.sub %{{.*}}, %[[C]]
// CHECK: tile.abs %[[R]]
// CHECK: tile.div %[[R]]
// CHECK: %[[NL:.*]] = tile.constant -0.584962487
// CHECK: %[[M:.*]] = tile.exp2
// CHECK: %[[KW:.*]] = tile.mul %[[KH]], %[[M]] : !f32_k_reg_split, !f32_k_reg_split
// CHECK: %[[SK:.*]] = tile.copy %[[KH]]
// CHECK: %[[SW:.*]] = tile.copy %[[KW]]
// CHECK: %[[SQ:.*]] = tile.copy %[[QR:.*]] :
// CHECK: %[[KWQ:.*]] = tile.mul %[[KW]], %[[QR]] :
// CHECK: tile.reduce_sum %[[KWQ]]
// CHECK: tile.for_value_tiles {
// CHECK: tile.contract %{{.*}}, %[[SK]], %[[SQ]]
// CHECK: tile.outer_add %{{.*}}, %[[SW]], %{{.*}}
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @pgdn {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 1.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>,
      qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16, f16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true,
                    final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>}
}

// -----

// ATQ: the same squash multiplier scales the read query; the write key is k̂ (one shared copy).
// CHECK-LABEL: func.func @atq_decode()
// CHECK: %[[M:.*]] = tile.exp2
// CHECK: %[[QW:.*]] = tile.mul %[[QS:.*]], %[[M]] : !f32_k_reg_split, !f32_k_reg_split
// CHECK: %[[SK:.*]] = tile.copy %[[KH:.*]] :
// CHECK-NEXT: %[[SQ:.*]] = tile.copy %[[QW]] :
// CHECK-NEXT: tile.mul %[[KH]], %[[QW]]
// CHECK-NEXT: tile.reduce_sum
// CHECK: tile.outer_add %{{.*}}, %[[SK]], %{{.*}}
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @atq {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<query>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 1.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// OSDN (hypergrad_ogd, pre timing, no decay): the step coefficient is guarded by ‖u‖ > 0, the gain is
// the first value head's, and the write key uses the pre-update d; no state decay op at all.
// CHECK-LABEL: func.func @osdn_decode()
// CHECK-SAME: tile.grid = "key_head", tile.min_ctas_per_sm = array<i32: 4, 3, 2>
// CHECK: %[[PV:.*]] = tile.view "precond_state" at bh
// CHECK: %[[D:.*]] = tile.load %[[PV]]
// CHECK: %[[U:.*]] = tile.mul %[[KH:.*]], %[[KH]]
// ‖u‖² and ⟨d, u⟩ are independent: one reduction.
// CHECK: %[[DU0:.*]] = tile.mul %[[D]], %[[U]]
// CHECK: %[[NK:.*]]:2 = tile.reduce_sum %[[U]], %[[DU0]] : !f32_k_reg_split, !f32_k_reg_split -> f32, f32
// CHECK: %[[BETA:.*]] = tile.load_scalar "beta" at bh_first : f32
// CHECK: tile.mul %[[BETA]], %[[NK]]#1 : f32, f32 -> f32
// CHECK: %[[Q:.*]] = tile.div %{{.*}}, %[[NK]]#0 : f32, f32 -> f32
// CHECK: %[[CF:.*]] = tile.select_positive %[[NK]]#0, %{{.*}}, %{{.*}}
// CHECK: %[[UC:.*]] = tile.mul %[[U]], %[[CF]]
// CHECK: %[[DN:.*]] = tile.add %[[D]], %[[UC]]
// CHECK: tile.store %[[DN]], %[[PV]]
// CHECK: tile.mul %[[KH]], %[[D]] : !f32_k_reg_split, !f32_k_reg_split
// CHECK: tile.for_value_tiles {
// CHECK-NOT: tile.exp
// CHECK-NOT: tile.row_scale
// CHECK: tile.contract
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 1.0, retention = false, timing = #dgps.timing<pre>, init = 1.0>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}

// -----

// Without a decode kernel nothing is added.
// CHECK-LABEL: dgps.recurrence @no_decode
// CHECK-NOT: func.func
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @no_decode {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6,
      heads_qk = 0, gva_ratio = 1, key_dims = array<i64: 128>, value_dims = array<i64: 128>,
      input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = false, final_precond_state = false, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
