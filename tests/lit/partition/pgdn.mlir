// --chunk-partition-kernels groups the fused PGDN IR into the device library's four kernels; the chunk
// summaries, chunk-start states, 𝒯, Aqk and the preconditioned write key P⊙k (the workspace's opw,
// formed in chunk_local and read by state_output, as the device library does) cross kernels. The
// remark reports the cost from launch_rules.h's workspace layout and names each workspace buffer.
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>%t.remarks | %FileCheck %s
// RUN: %FileCheck %s --check-prefix=REMARK --input-file %t.remarks

// REMARK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 3994 bytes and {{[0-9]+}} FLOPs per token-head (precond_summary 272 B, precond_scan 16 B, chunk_local 1081 B, state_output 2625 B; workspace written+read: psum 16 B pgam 0 B pst 16 B tb 384 B aqk 384 B tok 98 B opw 768 B)

// CHECK: func.func @pgdn_forward() attributes {{{.*}}chunk.plan = #chunk.plan<bytes_per_token_head = 3994, flops_per_token_head = {{[0-9]+}}, key_dim = 128, value_dim = 128>
// CHECK: %[[SUM:.*]]:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 2>} {
// CHECK:   chunk.accum_summary
// CHECK: %[[START:.*]] = chunk.kernel "precond_scan" -> !f32_bnthk_global
// CHECK:   chunk.accum_pass %[[SUM]]#0, %[[SUM]]#1
// CHECK:   chunk.store "final_precond_state"
// CHECK: %[[CL:.*]]:3 = chunk.kernel "chunk_local" -> !f32_bthk_global, !bf16_bthvc_global, !bf16_bthvc_global
// CHECK:   %[[KW:.*]] = chunk.accum_apply {{.*}} start %[[START]]
// CHECK:   chunk.kkt read %{{.*}}, write %[[KW]]
// CHECK:   %[[TB:.*]] = chunk.solve_tril
// CHECK:   %[[AQK:.*]] = chunk.qk_attn
// CHECK:   chunk.yield %[[KW]], %[[TB]], %[[AQK]]
// CHECK: chunk.kernel "state_output" attributes
// CHECK-NOT: chunk.accum_apply
// CHECK:   chunk.wy_recompute %[[CL]]#1
// CHECK:   chunk.state_pass {{.*}} write %[[CL]]#0
// CHECK:   chunk.output {{.*}} attn %[[CL]]#2
// CHECK:   chunk.store "o"
