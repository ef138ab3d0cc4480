// GDN: two kernels; the reported bytes are the baseline PGDN is compared with (PlanTest.cpp).
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>&1 | %FileCheck %s

// CHECK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 2064 bytes and {{[0-9]+}} FLOPs per token-head (chunk_local 776 B, state_output 1288 B)
// CHECK: chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global
// CHECK: chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 1>}
// CHECK-NOT: chunk.kernel
