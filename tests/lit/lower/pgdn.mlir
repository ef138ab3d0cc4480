// PGDN lowers to the asymmetric chunkwise WY algorithm (docs/math.md §4.1): the read key k̂ and the write
// key k̃ = M ⊙ k̂ are separate values; KKT rows and W use k̂, KKT columns, the state and Aqk use k̃.
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --dgps-lower-to-chunk | %FileCheck %s

// CHECK-LABEL: func.func @pgdn_forward() attributes {chunk.chunk_size = 64 : i64
// CHECK-DAG: %[[Q:.*]] = chunk.load "q" : !bf16_bthk
// CHECK-DAG: %[[K:.*]] = chunk.load "k" : !bf16_bthk
// CHECK-DAG: %[[V:.*]] = chunk.load "v" : !bf16_bthvv
// CHECK-DAG: %[[G:.*]] = chunk.load "g" : !f32_bthv
// CHECK-DAG: %[[BETA:.*]] = chunk.load "beta" : !f32_bthv
// CHECK: %[[KR:.*]] = chunk.l2norm %[[K]]
// CHECK: %[[QR:.*]] = chunk.l2norm %[[Q]]
// CHECK: %[[GC:.*]] = chunk.gate_cumsum %[[G]]
// CHECK-DAG: %[[GA:.*]] = chunk.load "precond_g" : !f32_bth
// CHECK-DAG: %[[BA:.*]] = chunk.load "precond_beta" : !f32_bth
// CHECK-DAG: %[[A0:.*]] = chunk.load "initial_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
// CHECK-DAG: %[[C:.*]] = chunk.load "precond_center" : !f32_h
// CHECK: %[[ACC:.*]], %[[AF:.*]] = chunk.accum_scan %[[KR]] gate %[[GA]] gain %[[BA]] init %[[A0]]
// CHECK: chunk.store "final_precond_state", %[[AF]]
// CHECK: %[[KW:.*]] = chunk.squash_apply %[[KR]], accum %[[ACC]], center %[[C]] {eps = {{.*}}, x = 1.500000e+00 : f64}
// CHECK: %[[A:.*]] = chunk.kkt read %[[KR]], write %[[KW]] gain %[[BETA]] gate %[[GC]]
// CHECK: %[[T:.*]] = chunk.solve_tril %[[A]] : !f32_bthvc -> !bf16_bthvc
// CHECK: %[[W:.*]], %[[U:.*]] = chunk.wy_recompute %[[T]], read %[[KR]], value %[[V]] gain %[[BETA]] gate %[[GC]]
// CHECK: %[[S0:.*]] = chunk.load "initial_state" {absent = 0.000000e+00 : f64}
// CHECK: %[[VN:.*]], %[[H:.*]], %[[SF:.*]] = chunk.state_pass w %[[W]], u %[[U]], write %[[KW]] gate %[[GC]] init %[[S0]]
// CHECK: %[[AQK:.*]] = chunk.qk_attn query %[[QR]], write %[[KW]] gate %[[GC]]
// CHECK: %[[O:.*]] = chunk.output query %[[QR]], vnew %[[VN]], states %[[H]], attn %[[AQK]] gate %[[GC]]
// CHECK: chunk.store "o", %[[O]]
// CHECK: chunk.store "final_state", %[[SF]]
// CHECK: return
