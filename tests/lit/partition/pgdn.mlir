// --chunk-partition-kernels groups the fused PGDN IR into the launch contract's four kernels; only the
// chunk summaries, chunk-start states, 𝒯 and Aqk cross kernels. The preconditioned write key P⊙k is never a
// device-memory buffer: chunk_local (KKT, Aqk) and state_output (state update) each apply the preconditioner
// from the chunk-start accumulator state where the key is loaded. The remark reports the cost from
// the workspace layout (tile.workspace's catalog) and names each workspace buffer (two value tiles at block_v = 64).
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>%t.remarks | %FileCheck %s
// RUN: %FileCheck %s --check-prefix=REMARK --input-file %t.remarks

// REMARK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 3242 bytes and {{[0-9]+}} FLOPs per token-head (precond_summary 272 B, precond_scan 16 B, chunk_local 825 B, state_output 2129 B; workspace written+read: psum 16 B pgam 0 B pst 32 B tb 384 B aqk 384 B tok 98 B)
// REMARK-NOT: opw

// CHECK: func.func @pgdn_forward() attributes {{{.*}}chunk.plan = #chunk.plan<bytes_per_token_head = 3242, flops_per_token_head = {{[0-9]+}}, key_dim = 128, value_dim = 128>
// CHECK: %[[SUM:.*]]:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 2>} {
// CHECK:   chunk.accum_summary
// CHECK: %[[START:.*]] = chunk.kernel "precond_scan" -> !f32_bnthk_global
// CHECK:   chunk.accum_pass %[[SUM]]#0, %[[SUM]]#1
// CHECK:   chunk.store "final_precond_state"
// CHECK: %[[CL:.*]]:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global
// CHECK:   %[[KW:.*]] = chunk.accum_apply {{.*}} start %[[START]]
// CHECK:   chunk.kkt read %{{.*}}, write %[[KW]]
// CHECK:   %[[TB:.*]] = chunk.solve_tril
// CHECK:   %[[AQK:.*]] = chunk.qk_attn
// CHECK:   chunk.yield %[[TB]], %[[AQK]]
// CHECK: chunk.kernel "state_output" attributes
// CHECK:   %[[KW2:.*]] = chunk.accum_apply {{.*}} start %[[START]]
// CHECK:   chunk.wy_recompute %[[CL]]#0
// CHECK:   chunk.state_pass {{.*}} write %[[KW2]]
// CHECK:   chunk.output {{.*}} attn %[[CL]]#1
// CHECK:   chunk.store "o"
// CHECK-NOT: _bthk_global
