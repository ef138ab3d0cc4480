// --chunk-partition-kernels groups the fused PGDN IR into the device library's four kernels; only the
// chunk summaries, chunk-start states, 𝒯 and Aqk cross kernels; the write key is rebuilt in
// chunk_local and state_output from the chunk-start accumulator state. The remark reports the cost.
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>%t.remarks | %FileCheck %s
// RUN: %FileCheck %s --check-prefix=REMARK --input-file %t.remarks

// REMARK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 2384 bytes and {{[0-9]+}} FLOPs per token-head (precond_summary 272 B, precond_scan 16 B, chunk_local 792 B, state_output 1304 B)

// CHECK: func.func @pgdn_forward() attributes {{{.*}}chunk.plan = #chunk.plan<bytes_per_token_head = 2384, flops_per_token_head = {{[0-9]+}}, key_dim = 128, value_dim = 128>
// CHECK: %[[SUM:.*]]:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 1>} {
// CHECK:   chunk.accum_summary
// CHECK: %[[START:.*]] = chunk.kernel "precond_scan" -> !f32_bnthk_global
// CHECK:   chunk.accum_pass %[[SUM]]#0, %[[SUM]]#1
// CHECK:   chunk.store "final_precond_state"
// CHECK: %[[CL:.*]]:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global
// CHECK:   %[[KW:.*]] = chunk.accum_apply {{.*}} start %[[START]]
// CHECK:   chunk.kkt read %{{.*}}, write %[[KW]]
// CHECK:   chunk.solve_tril
// CHECK:   chunk.qk_attn
// CHECK: chunk.kernel "state_output" attributes
// CHECK:   %[[KW2:.*]] = chunk.accum_apply {{.*}} start %[[START]]
// CHECK:   chunk.wy_recompute %[[CL]]#0
// CHECK:   chunk.state_pass {{.*}} write %[[KW2]]
// CHECK:   chunk.output {{.*}} attn %[[CL]]#1
// CHECK:   chunk.store "o"
// CHECK-NOT: _bthk_global
