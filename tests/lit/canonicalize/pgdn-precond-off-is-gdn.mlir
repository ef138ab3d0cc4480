// PGDN with its preconditioner switched off lowers to exactly GDN's chunk IR (names aside): the
// canonicalizer drops the leftover squash parameters and preconditioner states, the lowering then has
// nothing asymmetric to build, and the write key is the read key value itself.
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   | sed -e 's/pgdn_off/NAME/g' > %t.pgdn_off
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   | sed -e 's/gdn/NAME/g' > %t.gdn
// RUN: diff %t.pgdn_off %t.gdn
// RUN: %FileCheck %s --input-file %t.pgdn_off

// CHECK: func.func @NAME_forward()
// CHECK: %[[K:.*]] = chunk.l2norm
// CHECK: chunk.kkt read %[[K]], write %[[K]] gain
// CHECK-NOT: chunk.accum
module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @pgdn_off {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<none>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
      squash = #dgps.squash<x = 1.5, eps = 1.0e-6, center_init = -0.2, gate = true, gain = true>,
      solve = #dgps.solve<delta>,
      qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16, f16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true,
                    final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>, #dgps.kernel<decode>],
      tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>}
}
