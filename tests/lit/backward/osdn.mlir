// --chunk-derive-backward on OSDN-APF (hypergrad_ogd preconditioner on the write key, retention, timing
// post, a clamp): the write key's cotangent goes through diag_apply's adjoint (two diag_applies) into the
// read key and the d scan, whose adjoint is the reverse token sweep hypergrad_scan_grad.
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize | %FileCheck %s --check-prefix=BEFORE
// RUN: %dgps-opt %s --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-derive-backward | %FileCheck %s

// BEFORE: %[[D:.*]], %{{.*}} = chunk.hypergrad_scan
// BEFORE: chunk.diag_apply %{{.*}}, %[[D]]
// BEFORE-NOT: _grad

// CHECK-LABEL: func.func @osdn_apf_forward()
// CHECK-NOT: saved.hypergrad
// CHECK-LABEL: func.func @osdn_apf_backward() attributes {bwd.keep = ["solve_tril"], bwd.recompute = [{{.*}}"hypergrad_scan.diag", "diag_apply",
// CHECK: %[[KR:.*]] = chunk.l2norm
// CHECK: %[[D:.*]], %{{.*}} = chunk.hypergrad_scan %[[KR]] gain %[[BETA:[0-9]+]] retention %[[R:[0-9]+]] init %[[D0:[0-9]+]] {{.*}}post = true
// CHECK: %[[KW:.*]] = chunk.diag_apply %[[KR]], %[[D]]
// CHECK: %[[DFP:.*]] = chunk.load "dfinal_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
// the write key's three cotangents: qk_attn, the reverse state pass, kkt's columns
// CHECK: %[[DKW:.*]] = chunk.add {{.*}} : !f32_bthk, !f32_bthk, !f32_bthk -> !f32_bthk
// CHECK-DAG: %[[DKR:.*]] = chunk.diag_apply %[[DKW]], %[[D]]
// CHECK-DAG: %[[DD:.*]] = chunk.diag_apply %[[DKW]], %[[KR]]
// CHECK: %[[DK:.*]], %[[DB:.*]], %[[DR:.*]], %[[DD0:.*]] = chunk.hypergrad_scan_grad %[[KR]] gain %[[BETA]] retention %[[R]] init %[[D0]], diag %[[D]], d %[[DD]], dfinal %[[DFP]] {clamp_max = 1.500000e+00 : f64, d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = true}
// CHECK-DAG: chunk.store "dinitial_precond_state", %[[DD0]]
// CHECK-DAG: chunk.store "dprecond_g", %[[DR]]
// CHECK: chunk.add {{.*}}%[[DKR]], %[[DK]] : !f32_bthk, !f32_bthk, !f32_bthk, !f32_bthk -> !f32_bthk
// CHECK: chunk.add {{.*}}, %[[DB]] : !f32_bthv, !f32_bthv, !f32_bthv -> !f32_bthv

module attributes {dgps.target = "sm_90a"} {
  dgps.recurrence @osdn_apf {decay = #dgps.decay<none>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
      precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<hypergrad_ogd>,
      hypergrad = #dgps.hypergrad<eta = 1.0, retention = true, timing = #dgps.timing<post>, init = 1.0, clamp_max = 1.5>,
      solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
      key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
      io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true, final_precond_state = true, varlen = true>,
      kernels = [#dgps.kernel<chunk_forward>],
      tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
}
