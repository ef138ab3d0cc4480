// --chunk-derive-backward on PGDN (ema_sq_squash preconditioner on the write key): the write key's
// cotangent (kkt, qk_attn, the reverse state pass) flows through the squash's chain rule into the
// read key and the accumulator, whose adjoint is the reverse affine scan. keep=none recomputes 𝒯.
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --dgps-lower-to-chunk --canonicalize | %FileCheck %s --check-prefix=BEFORE
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --dgps-lower-to-chunk --canonicalize --chunk-derive-backward=keep=none | %FileCheck %s

// BEFORE: %[[ACC:.*]], %{{.*}} = chunk.accum_scan
// BEFORE: chunk.squash_apply %{{.*}}, accum %[[ACC]]
// BEFORE-NOT: _grad

// CHECK-LABEL: func.func @pgdn_forward()
// CHECK-NOT: saved.
// CHECK-LABEL: func.func @pgdn_backward() attributes {bwd.keep = [], bwd.recompute = [{{.*}}"accum_scan.accum", "squash_apply", "kkt", "solve_tril",
// CHECK: %[[KR:.*]] = chunk.l2norm
// CHECK: %[[ACC:.*]], %{{.*}} = chunk.accum_scan %[[KR]] gate %[[GA:[0-9]+]] gain %[[BA:[0-9]+]] init %[[A0:[0-9]+]]
// CHECK: %[[KW:.*]] = chunk.squash_apply %[[KR]], accum %[[ACC]], center %[[C:[0-9]+]]
// CHECK: chunk.kkt read %[[KR]], write %[[KW]]
// CHECK: %[[DFP:.*]] = chunk.load "dfinal_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
// CHECK: chunk.state_pass_grad {{.*}}write %[[KW]]
// CHECK: chunk.kkt_grad read %[[KR]], write %[[KW]]
// the write key's three cotangents: qk_attn, the reverse state pass, kkt's columns
// CHECK: %[[DKW:.*]] = chunk.add {{.*}} : !f32_bthk, !f32_bthk, !f32_bthk -> !f32_bthk
// CHECK: %[[DT:.*]], %[[DACC:.*]], %[[DC:.*]] = chunk.squash_apply_grad %[[KR]], accum %[[ACC]], center %[[C]], d %[[DKW]]
// CHECK: %[[DK:.*]], %[[DGA:.*]], %[[DBA:.*]], %[[DA0:.*]] = chunk.accum_scan_grad %[[KR]] gate %[[GA]] gain %[[BA]] init %[[A0]], accum %[[ACC]], d %[[DACC]], dfinal %[[DFP]]
// CHECK-DAG: chunk.store "dprecond_center", %[[DC]]
// CHECK-DAG: chunk.store "dinitial_precond_state", %[[DA0]]
// CHECK-DAG: chunk.store "dprecond_beta", %[[DBA]]
// CHECK-DAG: chunk.store "dprecond_g", %[[DGA]]
// CHECK: chunk.l2norm_grad
