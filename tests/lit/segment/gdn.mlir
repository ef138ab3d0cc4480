// --chunk-segment-state-pass on GDN (scalar decay): the sequential state_pass becomes segment_summary (E and
// the K×K transition M per segment) → segment_fold (the sequential fold, with the initial state) →
// segment_state_pass (every segment rerun from its folded start); the final state is the fold's. The
// partitioner puts the summary and the fold in kernels of their own between chunk_local and state_output,
// recomputes W and U in both kernels that run the state pass, and reports their cost.
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-segment-state-pass=segment-chunks=4 | %FileCheck %s
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-segment-state-pass --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>%t.remarks \
// RUN:   | %FileCheck %s --check-prefix=PLAN
// RUN: %FileCheck %s --check-prefix=REMARK --input-file %t.remarks

// CHECK: func.func @gdn_forward() attributes {{{.*}}chunk.segment_chunks = 4 : i64
// CHECK-NOT: chunk.state_pass
// CHECK: %[[G:.*]] = chunk.gate_cumsum
// CHECK: %[[W:.*]], %[[U:.*]] = chunk.wy_recompute
// CHECK: %[[S0:.*]] = chunk.load "initial_state"
// CHECK: %[[E:.*]], %[[M:.*]] = chunk.segment_summary w %[[W]], u %[[U]], write %[[KW:[0-9]+]] gate %[[G]] : {{.*}} -> (!f32_bnshvkv, !f32_bnshvkk)
// CHECK: %[[START:.*]], %[[FINAL:.*]] = chunk.segment_fold %[[E]], %[[M]] init %[[S0]] : {{.*}} -> (!f32_bnshvkv, !f32_nhvkv)
// CHECK: %[[VN:.*]], %[[H:.*]] = chunk.segment_state_pass w %[[W]], u %[[U]], write %[[KW]] gate %[[G]] start %[[START]]
// CHECK: chunk.output {{.*}}vnew %[[VN]], states %[[H]]
// CHECK: chunk.store "final_state", %[[FINAL]]

// Without segment-chunks the length is left to the launch rule: no attribute.
// PLAN-NOT: chunk.segment_chunks
// PLAN: chunk.kernel "chunk_local"
// PLAN: chunk.kernel "segment_summary" -> !f32_bnshvkv_global, !f32_bnshvkk_global
// PLAN: chunk.wy_recompute
// PLAN: chunk.segment_summary
// PLAN: chunk.kernel "segment_fold" -> !f32_bnshvkv_global
// PLAN: chunk.segment_fold
// PLAN: chunk.store "final_state"
// PLAN: chunk.kernel "state_output"
// PLAN: chunk.wy_recompute
// PLAN: chunk.segment_state_pass
// PLAN: chunk.store "o"

// REMARK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: {{[0-9]+}} bytes and {{[0-9]+}} FLOPs per token-head (chunk_local {{[0-9]+}} B, segment_summary {{[0-9]+}} B, segment_fold {{[0-9]+}} B, state_output {{[0-9]+}} B;
