// GDN: two kernels; the reported bytes (the workspace layout, tile.workspace's catalog, plus inputs and outputs, at
// block_v = 64: state_output reads q, k and the workspace once per value tile) are the baseline PGDN is
// compared with (PlanTest.cpp).
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner \
// RUN:   --chunk-partition-kernels -mlir-print-op-on-diagnostic=false 2>&1 | %FileCheck %s

// CHECK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 2922 bytes and {{[0-9]+}} FLOPs per token-head (chunk_local 809 B, state_output 2113 B; workspace written+read: tb 384 B aqk 384 B tok 98 B)
// CHECK: chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global
// CHECK: chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 2>}
// CHECK-NOT: chunk.kernel
