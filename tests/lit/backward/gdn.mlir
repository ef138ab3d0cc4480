// --chunk-derive-backward on GDN: the forward stores the kept 𝒯 (default policy) and is otherwise
// unchanged; the backward recomputes W, U, the state pass and Aqk, then runs the adjoints in reverse
// program order (output, qk_attn, the reverse state pass, wy_recompute, solve_tril, kkt), sums the
// cotangents of values with several uses, and stores one gradient per input.
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize | %FileCheck %s --check-prefix=BEFORE
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-derive-backward | %FileCheck %s

// BEFORE: func.func @gdn_forward()
// BEFORE-NOT: saved.
// BEFORE-NOT: func.func @gdn_backward

// CHECK-LABEL: func.func @gdn_forward()
// CHECK: %[[T:.*]] = chunk.solve_tril
// CHECK-NEXT: chunk.store "saved.solve_tril", %[[T]] : !bf16_bthvc
// CHECK: chunk.store "o"
// CHECK-LABEL: func.func @gdn_backward() attributes {bwd.keep = ["solve_tril"], bwd.recompute = ["l2norm.k", "l2norm.q", "gate_cumsum", "wy_recompute.w", "wy_recompute.u", "state_pass.v_new", "state_pass.states", "qk_attn"], chunk.backward_of = @gdn_forward
// CHECK-NOT: chunk.kkt read
// CHECK-NOT: chunk.solve_tril %
// CHECK: %[[KR:.*]] = chunk.l2norm %[[K:[0-9]+]]
// CHECK: %[[QR:.*]] = chunk.l2norm %[[Q:[0-9]+]]
// CHECK: %[[G:.*]] = chunk.gate_cumsum
// CHECK: %[[TS:.*]] = chunk.load "saved.solve_tril" : !bf16_bthvc_global
// CHECK: %[[W:.*]], %[[U:.*]] = chunk.wy_recompute %[[TS]], read %[[KR]]
// CHECK: %[[VN:.*]], %[[H:.*]], %{{.*}} = chunk.state_pass w %[[W]], u %[[U]]
// CHECK: %[[AQK:.*]] = chunk.qk_attn query %[[QR]], write %[[KR]]
// CHECK: %[[DO:.*]] = chunk.load "do" : !bf16_bthvv
// CHECK: %[[DSF:.*]] = chunk.load "dfinal_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
// CHECK: %[[DQ1:.*]], %[[DVN:.*]], %[[DH:.*]], %[[DAQK:.*]], %{{.*}} = chunk.output_grad query %[[QR]], vnew %[[VN]], states %[[H]], attn %[[AQK]] gate %[[G]], d %[[DO]]
// CHECK: chunk.qk_attn_grad query %[[QR]], write %[[KR]] gate %[[G]], d %[[DAQK]]
// CHECK: %[[DW:.*]], %[[DU:.*]], %{{.*}}, %{{.*}}, %[[DS0:.*]] = chunk.state_pass_grad w %[[W]], write %[[KR]] gate %[[G]], vnew %[[VN]], states %[[H]], dvnew %[[DVN]], dstates %[[DH]], dfinal %[[DSF]]
// CHECK: chunk.store "dinitial_state", %[[DS0]]
// CHECK: %[[DT:.*]], %{{.*}}, %[[DV:.*]], %{{.*}}, %{{.*}} = chunk.wy_recompute_grad %[[TS]], read %[[KR]], value %{{.*}} gain %{{.*}} gate %[[G]], dw %[[DW]], du %[[DU]]
// CHECK: %[[DA:.*]] = chunk.solve_tril_grad %[[TS]], %[[DT]]
// CHECK: chunk.kkt_grad read %[[KR]], write %[[KR]] gain %{{.*}} gate %[[G]], d %[[DA]]
// CHECK: %[[DG:.*]] = chunk.add {{.*}} : !f32_bthv, !f32_bthv, !f32_bthv, !f32_bthv, !f32_bthv -> !f32_bthv
// CHECK: %[[DGR:.*]] = chunk.gate_cumsum_grad %[[DG]]
// CHECK: %[[DQS:.*]] = chunk.add %[[DQ1]], %{{.*}} : !f32_bthk, !f32_bthk -> !f32_bthk
// CHECK: %[[DQ:.*]] = chunk.l2norm_grad %[[Q]], %[[DQS]]
// read and write key are one value: five key cotangents (qk_attn, state pass, wy, kkt read and write)
// CHECK: %[[DKS:.*]] = chunk.add {{.*}} : !f32_bthk, !f32_bthk, !f32_bthk, !f32_bthk, !f32_bthk -> !f32_bthk
// CHECK: %[[DK:.*]] = chunk.l2norm_grad %[[K]], %[[DKS]]
// CHECK-DAG: chunk.store "dbeta"
// CHECK-DAG: chunk.store "dg", %[[DGR]]
// CHECK-DAG: chunk.store "dv", %[[DV]]
// CHECK-DAG: chunk.store "dk", %[[DK]]
// CHECK-DAG: chunk.store "dq", %[[DQ]]
// CHECK: return
