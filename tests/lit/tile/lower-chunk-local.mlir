// --dgps-lower-chunk-local-to-tile: the chunk_local kernel of the partitioned plan becomes tile maths over the
// rows of one chunk; each decay kind shows up as different ops (no kind flags in the tile function).
// RUN: %dgps-opt %s -split-input-file --dgps-lower-chunk-local-to-tile | %FileCheck %s

// No decay: no gate anywhere; the l2norm factors scale the record and both products (KKT strict to shared
// memory, Aqk inclusive to the workspace); 𝒯·diag(β) from the solve.
// CHECK-LABEL: func.func @deltanet_chunk_local()
// CHECK-SAME: tile.grid = "chunk", tile.launch_features = array<i32: 0, 1, 0, 0, 0, 1, 0>, tile.role = "chunk_local"
// CHECK: %[[Q:.*]] = tile.chunk_rows "q" at key_head : !bf16_ck_smem_row
// CHECK: %[[K:.*]] = tile.chunk_rows "k" at key_head : !bf16_ck_smem_row
// CHECK: %[[B:.*]] = tile.chunk_rows "beta" at value_head : !f32_c_smem_row
// CHECK-NEXT: tile.barrier
// CHECK: %[[R:.*]]:2 = tile.row_rsqrt_norm %[[K]], %[[Q]] {eps = 9.99999997E-7 : f32}
// CHECK-NOT: tile.cumsum
// CHECK: tile.barrier
// CHECK: %[[S:.*]] = tile.load_scalar "scale" at none : f32
// CHECK: tile.store_token_record %[[R]]#1, %[[R]]#0, %[[B]], %[[S]] into "tok" : !f32_c_smem_row
// CHECK-NOT: tile.store_gated_rows
// CHECK: %[[QB:.*]] = tile.encode_bf16 %[[Q]]
// CHECK: %[[KB:.*]] = tile.encode_bf16 %[[K]]
// CHECK: tile.barrier
// CHECK: %[[A:.*]] = tile.lower_products rows(%[[KB]], %[[QB]]) cols %[[KB]] row_factors(%[[B]], %[[S]]) (%[[R]]#0, %[[R]]#1) col_factor %[[R]]#0 into "aqk"
// CHECK-SAME: -> !f32_cc_smem_row
// CHECK: tile.barrier
// CHECK: %[[T:.*]] = tile.tri_inverse %[[A]]
// CHECK: tile.store_lower_col_scaled %[[T]], %[[B]] into "tb"
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvk = !chunk.tensor<[B, T, HV, K], bf16>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @deltanet_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2117, flops_per_token_head = 183808, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "beta" : !f32_bthv
      %4 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %5 = chunk.l2norm %1 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.kkt read %4, write %4 gain %3 : (!f32_bthk, !f32_bthk, !f32_bthv) -> !f32_bthvc
      %7 = chunk.solve_tril %6 : !f32_bthvc -> !bf16_bthvc
      %8 = chunk.qk_attn query %5, write %4 : (!f32_bthk, !f32_bthk) -> !bf16_bthvc
      chunk.yield %7, %8 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "v" : !bf16_bthvv
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.l2norm %1 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %w, %u = chunk.wy_recompute %0#0, read %5, value %3 gain %4 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv) -> (!bf16_bthvk, !bf16_bthvv)
      %7 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %5 init %7 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %8 = chunk.output query %6, vnew %v_new, states %states, attn %0#1 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global) -> !bf16_bthvv
      chunk.store "o", %8 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}

// -----

// Scalar decay: one [C] gate, cumsummed in log2 units; it enters the token record and the products' epilogue.
// CHECK-LABEL: func.func @gdn_chunk_local()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 0, 0, 0, 1, 0>
// CHECK: %[[G:.*]] = tile.chunk_rows "g" at value_head : !f32_c_smem_row
// CHECK: %[[GC:.*]] = tile.cumsum %[[G]] {scale = 1.44269502 : f32} : !f32_c_smem_row
// CHECK: tile.store_token_record %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate %[[GC]] into "tok"
// CHECK: tile.lower_products rows(%{{.*}}, %{{.*}}) cols %{{.*}} row_factors(%{{.*}}, %{{.*}}) (%{{.*}}, %{{.*}}) col_factor %{{.*}} gate %[[GC]] into "aqk"
// CHECK-SAME: !f32_c_smem_row) -> !f32_cc_smem_row
// CHECK: tile.tri_inverse
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvk = !chunk.tensor<[B, T, HV, K], bf16>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @gdn_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2121, flops_per_token_head = 183810, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "g" : !f32_bthv
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.l2norm %1 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.gate_cumsum %3 : !f32_bthv -> !f32_bthv
      %8 = chunk.kkt read %5, write %5 gain %4 gate %7 : (!f32_bthk, !f32_bthk, !f32_bthv, !f32_bthv) -> !f32_bthvc
      %9 = chunk.solve_tril %8 : !f32_bthvc -> !bf16_bthvc
      %10 = chunk.qk_attn query %6, write %5 gate %7 : (!f32_bthk, !f32_bthk, !f32_bthv) -> !bf16_bthvc
      chunk.yield %9, %10 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "v" : !bf16_bthvv
      %4 = chunk.load "g" : !f32_bthv
      %5 = chunk.load "beta" : !f32_bthv
      %6 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.l2norm %1 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.gate_cumsum %4 : !f32_bthv -> !f32_bthv
      %w, %u = chunk.wy_recompute %0#0, read %6, value %3 gain %5 gate %8 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv, !f32_bthv) -> (!bf16_bthvk, !bf16_bthvv)
      %9 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %6 gate %8 init %9 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_bthv, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %10 = chunk.output query %7, vnew %v_new, states %states, attn %0#1 gate %8 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global, !f32_bthv) -> !bf16_bthvv
      chunk.store "o", %10 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}

// -----

// Per-channel decay: a [C, K] gate, cumsummed per column; the record is ungated, the gated operands of
// state_output (opq, opk, opw reversed, pdec) are written, and the gate enters the products inside the sum.
// CHECK-LABEL: func.func @kda_chunk_local()
// CHECK-SAME: tile.launch_features = array<i32: 2, 1, 0, 0, 0, 1, 0>
// CHECK: %[[Q:.*]] = tile.chunk_rows "q"
// CHECK: %[[K:.*]] = tile.chunk_rows "k"
// CHECK: %[[G:.*]] = tile.chunk_rows "g" at value_head : !f32_ck_smem_row
// CHECK: %[[GC:.*]] = tile.cumsum %[[G]] {scale = 1.44269502 : f32} : !f32_ck_smem_row
// CHECK: tile.store_token_record %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} into "tok" : !f32_c_smem_row
// CHECK: tile.store_gated_rows %[[Q]], %[[GC]] into "opq" :
// CHECK: tile.store_gated_rows %[[K]], %[[GC]] into "opk" :
// CHECK: tile.store_gated_rows %[[K]], %[[GC]] into "opw" {reverse}
// CHECK: tile.store_last_exp2 %[[GC]] into "pdec"
// CHECK: tile.lower_products {{.*}} gate %[[GC]] into "aqk" : ({{.*}}!f32_ck_smem_row) -> !f32_cc_smem_row
// CHECK: tile.tri_inverse
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvk = !chunk.tensor<[B, T, HV, K], bf16>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvk = !chunk.tensor<[B, T, HV, K], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @kda_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 120, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 3669, flops_per_token_head = 184064, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 120, 128>} {
    %0:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "g" : !f32_bthvk
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.l2norm %1 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.gate_cumsum %3 : !f32_bthvk -> !f32_bthvk
      %8 = chunk.kkt read %5, write %5 gain %4 gate %7 : (!f32_bthk, !f32_bthk, !f32_bthv, !f32_bthvk) -> !f32_bthvc
      %9 = chunk.solve_tril %8 : !f32_bthvc -> !bf16_bthvc
      %10 = chunk.qk_attn query %6, write %5 gate %7 : (!f32_bthk, !f32_bthk, !f32_bthvk) -> !bf16_bthvc
      chunk.yield %9, %10 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "v" : !bf16_bthvv
      %4 = chunk.load "g" : !f32_bthvk
      %5 = chunk.load "beta" : !f32_bthv
      %6 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.l2norm %1 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.gate_cumsum %4 : !f32_bthvk -> !f32_bthvk
      %w, %u = chunk.wy_recompute %0#0, read %6, value %3 gain %5 gate %8 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv, !f32_bthvk) -> (!bf16_bthvk, !bf16_bthvv)
      %9 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %6 gate %8 init %9 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_bthvk, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %10 = chunk.output query %7, vnew %v_new, states %states, attn %0#1 gate %8 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global, !f32_bthvk) -> !bf16_bthvv
      chunk.store "o", %10 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}

// -----

// Linear rule, no l2norm, no gain: one (Aqk) part, no solve; the row factors are 1 on real rows.
// CHECK-LABEL: func.func @linear_attention_chunk_local()
// CHECK-SAME: tile.launch_features = array<i32: 0, 0, 0, 0, 0, 0, 0>
// CHECK-NOT: tile.row_rsqrt_norm
// CHECK: %[[BETA:.*]] = tile.chunk_fill 1.000000e+00 : !f32_c_smem_row
// CHECK: tile.store_token_record %[[ONE:.*]], %[[ONE]], %[[BETA]], %{{.*}} into "tok"
// CHECK: tile.lower_products rows(%{{.*}}) cols %{{.*}} row_factors(%{{.*}}) (%[[ONE]]) col_factor %[[ONE]] into "aqk"
// CHECK-NOT: tile.tri_inverse
// CHECK-NOT: "tb"
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @linear_attention_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 1857, flops_per_token_head = 131072, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0 = chunk.kernel "chunk_local" -> !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.qk_attn query %1, write %2 : (!bf16_bthk, !bf16_bthk) -> !bf16_bthvc
      chunk.yield %3 : !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "v" : !bf16_bthvv
      %4 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass u %3, write %2 init %4 : (!bf16_bthvv, !bf16_bthk, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %5 = chunk.output query %1, vnew %v_new, states %states, attn %0 : (!bf16_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global) -> !bf16_bthvv
      chunk.store "o", %5 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}
