// --chunk-partition-backward on GDN: the backward's kernels in launch order, the recomputed forward in
// bwd_chunk_local / bwd_state_fwd, the reverse state pass on its own, gradient stores at the end, and
// the cost remark (bytes counted from the IR, BackwardCost.cpp). The forward's plan is the usual one.
// RUN: %dgps-opt %S/../Inputs/gdn.mlir --canonicalize --dgps-lower-to-chunk --canonicalize --chunk-derive-backward \
// RUN:   --chunk-fuse-preconditioner --chunk-partition-kernels --chunk-partition-backward -mlir-print-op-on-diagnostic=false 2>&1 | %FileCheck %s

// CHECK: remark: kernel plan for K=128 V=128 C=64 HV/H=1: 2922 bytes
// CHECK: remark: backward plan for K=128 V=128 C=64 HV/H=1: {{[0-9]+}} bytes and {{[0-9]+}} FLOPs per token-head (bwd_chunk_local {{[0-9]+}} B, bwd_state_fwd {{[0-9]+}} B, bwd_output_grad {{[0-9]+}} B, bwd_state_reverse {{[0-9]+}} B, bwd_chunk_grad {{[0-9]+}} B, bwd_prologue_grad {{[0-9]+}} B; the forward also writes 128 B of kept intermediates)
// CHECK-LABEL: func.func @gdn_forward()
// CHECK: chunk.kernel "chunk_local"
// CHECK: chunk.store "saved.solve_tril"
// CHECK: chunk.kernel "state_output"
// CHECK-LABEL: func.func @gdn_backward()
// CHECK: chunk.kernel "bwd_chunk_local" -> !bf16_bthvc_global
// CHECK-NEXT: chunk.load "q"
// CHECK-NOT: chunk.solve_tril %
// CHECK: chunk.qk_attn
// CHECK: chunk.kernel "bwd_state_fwd" -> !bf16_bthvk_global, !f32_bthvv_global, !f32_bnthvkv_global
// CHECK: chunk.load "saved.solve_tril"
// CHECK: chunk.state_pass
// CHECK: chunk.kernel "bwd_output_grad"
// CHECK: chunk.output_grad
// CHECK: chunk.kernel "bwd_state_reverse"
// CHECK: chunk.state_pass_grad
// CHECK: chunk.store "dinitial_state"
// CHECK: chunk.kernel "bwd_chunk_grad"
// CHECK: chunk.qk_attn_grad
// CHECK: chunk.wy_recompute_grad
// CHECK: chunk.solve_tril_grad
// CHECK: chunk.kkt_grad
// CHECK: chunk.kernel "bwd_prologue_grad"
// CHECK: chunk.gate_cumsum_grad
// CHECK: chunk.l2norm_grad
// CHECK: chunk.store "dq"
