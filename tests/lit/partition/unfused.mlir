// Without --chunk-fuse-preconditioner the per-token accumulator A [B, T, H, K] would be a device-memory
// buffer outside the launch contract's workspace: the estimate adds it and names it (compare
// partition/pgdn.mlir).
// RUN: %dgps-opt %S/../Inputs/pgdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize \
// RUN:   --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>&1 | %FileCheck %s

// CHECK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 4506 bytes and {{[0-9]+}} FLOPs per token-head (precond_scan 528 B, chunk_local 1337 B, state_output 2641 B; workspace written+read: {{.*}}; outside the launch contract's workspace: chunk.accum_scan)
// CHECK: chunk.kernel "precond_scan" -> !f32_bthk_global
