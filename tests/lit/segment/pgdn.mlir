// A preconditioned spec (PGDN, ema_sq_squash): the accumulator's pass over chunk summaries becomes a
// two-level scan (accum_segment_pass), and the segment summary takes the preconditioned write key P⊙k rebuilt
// by accum_apply, so M is formed with the preconditioner applied as in the forward. After partitioning, the
// two-level scan is the precond_scan kernel and P⊙k is rebuilt in segment_summary too (never a buffer).
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-segment-state-pass=segment-chunks=8 | %FileCheck %s
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-segment-state-pass=segment-chunks=8 --chunk-partition-kernels | %FileCheck %s --check-prefix=PLAN

// CHECK-NOT: chunk.accum_pass
// CHECK: %[[A:.*]], %[[SA:.*]] = chunk.accum_summary
// CHECK: %[[AS:.*]], %[[AF:.*]] = chunk.accum_segment_pass %[[A]], %[[SA]] init %{{.*}} : (!f32_bnthk, !f32_bnth, !f32_nhk) -> (!f32_bnthk, !f32_nhk)
// CHECK: chunk.store "final_precond_state", %[[AF]]
// CHECK: %[[KW:.*]] = chunk.accum_apply {{.*}} start %[[AS]]
// CHECK: chunk.segment_summary w %{{.*}}, u %{{.*}}, write %[[KW]]
// CHECK: chunk.segment_state_pass w %{{.*}}, u %{{.*}}, write %[[KW]]

// PLAN: chunk.kernel "precond_summary"
// PLAN: chunk.kernel "precond_scan"
// PLAN: chunk.accum_segment_pass
// PLAN: chunk.kernel "chunk_local"
// PLAN: chunk.kernel "segment_summary"
// PLAN: %[[KW:.*]] = chunk.accum_apply
// PLAN: chunk.segment_summary {{.*}}write %[[KW]]
// PLAN: chunk.kernel "segment_fold"
// PLAN: chunk.kernel "state_output"
