// --chunk-fuse-preconditioner: the token-by-token accumulator scan becomes a per-chunk summary, a pass
// over chunks producing chunk-start states, and an in-chunk apply at every use of the write key.
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --dgps-lower-to-chunk --canonicalize | %FileCheck %s --check-prefix=BEFORE
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner | %FileCheck %s

// BEFORE: %[[ACC:.*]], %{{.*}} = chunk.accum_scan {{.*}} -> (!f32_bthk, !f32_nhk)
// BEFORE: chunk.squash_apply %{{.*}}, accum %[[ACC]]

// CHECK-NOT: chunk.accum_scan
// CHECK-NOT: chunk.squash_apply
// CHECK: %[[KR:.*]] = chunk.l2norm %{{.*}} : !bf16_bthk -> !f32_bthk
// CHECK: %[[SUM:.*]], %[[SA:.*]] = chunk.accum_summary %[[KR]] gate %[[GA:.*]] gain %[[BA:.*]] : (!f32_bthk, !f32_bth, !f32_bth) -> (!f32_bnthk, !f32_bnth)
// CHECK: %[[START:.*]], %[[AF:.*]] = chunk.accum_pass %[[SUM]], %[[SA]] init %{{.*}} : (!f32_bnthk, !f32_bnth, !f32_nhk) -> (!f32_bnthk, !f32_nhk)
// CHECK: chunk.store "final_precond_state", %[[AF]]
// CHECK: %[[KW:.*]] = chunk.accum_apply %[[KR]], key %[[KR]] gate %[[GA]] gain %[[BA]] start %[[START]], center
// CHECK: chunk.kkt read %[[KR]], write %[[KW]]
