// --dgps-lower-chunk-local-to-tile on preconditioned specs: the preconditioner's in-chunk multiplier rebuild
// (chunk.accum_apply / chunk.hypergrad_apply) becomes one tile.channel_scan applied to the write key (key side)
// or the read query (query side); the rest is as without a preconditioner (lower-chunk-local.mlir).
// RUN: %dgps-opt %s -split-input-file --dgps-lower-chunk-local-to-tile | %FileCheck %s
// write-key=auto: pgdn's walks take the write key chunk_local stores (every walk: write_key 1), so after
// the pre-products barrier it writes the scanned tile to "pwk"; atq (query side) stores its scanned query
// (write_key 1) to "pwq" at the same point; osdn (hypergrad_ogd) stores its scanned key to "pwk" as pgdn does.
// RUN: %dgps-opt %s -split-input-file --dgps-lower-chunk-local-to-tile=write-key=auto | %FileCheck %s --check-prefix=AUTO

// PGDN (ema_sq_squash, key side): the in-chunk accumulator is a channel scan from the chunk-start state "pst",
// decaying by e^{precond_g}, stepping by precond_beta·rk²·k², read out as a soft power; it multiplies the write
// key into a new tile (the products' column operand). The scan's row decay is taken beside the loads (before
// the first barrier); the record carries the scan's coefficients.
// AUTO-LABEL: func.func @pgdn_chunk_local()
// AUTO-SAME: tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0, 1>
// AUTO: %[[KW:.*]] = tile.channel_scan
// AUTO: tile.barrier
// AUTO-NEXT: tile.store_rows %[[KW]] into "pwk"
// AUTO-NEXT: tile.lower_products rows({{.*}}) cols %[[KW]]
// CHECK-LABEL: func.func @pgdn_chunk_local()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0>
// CHECK: %[[Q:.*]] = tile.chunk_rows "q"
// CHECK: %[[K:.*]] = tile.chunk_rows "k"
// CHECK: %[[B:.*]] = tile.chunk_rows "beta"
// CHECK: %[[PG:.*]] = tile.chunk_rows "precond_g" at key_head : !f32_c_smem_row
// CHECK: %[[PB:.*]] = tile.chunk_rows "precond_beta" at key_head : !f32_c_smem_row
// CHECK: %[[C:.*]] = tile.load_scalar "precond_center" at h {absent = 0.000000e+00 : f32} : f32
// CHECK: %[[S0:.*]] = tile.workspace_rows "pst" : !f32_k_smem_row
// CHECK-NEXT: %[[A:.*]] = tile.row_exp %[[PG]] {pad = 1.000000e+00 : f32}
// CHECK-NEXT: tile.barrier
// CHECK: %[[R:.*]]:2 = tile.row_rsqrt_norm %[[K]], %[[Q]]
// CHECK: tile.barrier
// CHECK: %[[RK2:.*]] = tile.row_mul %[[R]]#0, %[[R]]#0
// CHECK: %[[BK:.*]] = tile.row_mul %[[PB]], %[[RK2]]
// CHECK: tile.store_token_record %[[R]]#1, %[[R]]#0, %[[B]], %{{.*}} gate %{{.*}} fields(%[[A]], %[[BK]] : {{.*}}) into "tok"
// CHECK-NEXT: tile.barrier
// CHECK-NEXT: %[[KW:.*]] = tile.channel_scan %[[K]], %[[S0]], %[[A]], %[[BK]] apply %[[K]] center %[[C]] readout soft_power {base = 1.500000e+00 : f32, eps = 9.99999997E-7 : f32}
// CHECK: %[[QB:.*]] = tile.encode_bf16 %[[Q]]
// CHECK: %[[KB:.*]] = tile.encode_bf16 %[[K]]
// CHECK: tile.lower_products rows(%[[KB]], %[[QB]]) cols %[[KW]]
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvk = !chunk.tensor<[B, T, HV, K], bf16>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnth = !chunk.tensor<[B, NT, H], f32>
!f32_bnth_global = !chunk.tensor<[B, NT, H], f32, global>
!f32_bnthk = !chunk.tensor<[B, NT, H, K], f32>
!f32_bnthk_global = !chunk.tensor<[B, NT, H, K], f32, global>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bth = !chunk.tensor<[B, T, H], f32>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_h = !chunk.tensor<[H], f32>
!f32_nhk = !chunk.tensor<[N, H, K], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @pgdn_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2433, flops_per_token_head = 219910, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %5 = chunk.load "precond_g" : !f32_bth
      %6 = chunk.load "precond_beta" : !f32_bth
      %sum, %log_decay = chunk.accum_summary %4 gate %5 gain %6 : (!f32_bthk, !f32_bth, !f32_bth) -> (!f32_bnthk, !f32_bnth)
      chunk.yield %sum, %log_decay : !f32_bnthk, !f32_bnth
    }
    %1 = chunk.kernel "precond_scan" -> !f32_bnthk_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "initial_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
      %start, %final = chunk.accum_pass %0#0, %0#1 init %3 : (!f32_bnthk_global, !f32_bnth_global, !f32_nhk) -> (!f32_bnthk, !f32_nhk)
      chunk.store "final_precond_state", %final : !f32_nhk
      chunk.yield %start : !f32_bnthk
    }
    %2:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "g" : !f32_bthv
      %6 = chunk.load "beta" : !f32_bthv
      %7 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.gate_cumsum %5 : !f32_bthv -> !f32_bthv
      %10 = chunk.load "precond_g" : !f32_bth
      %11 = chunk.load "precond_beta" : !f32_bth
      %12 = chunk.load "precond_center" : !f32_h
      %13 = chunk.accum_apply %7, key %7 gate %10 gain %11 start %1, center %12 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
      %14 = chunk.kkt read %7, write %13 gain %6 gate %9 : (!f32_bthk, !f32_bthk, !f32_bthv, !f32_bthv) -> !f32_bthvc
      %15 = chunk.solve_tril %14 : !f32_bthvc -> !bf16_bthvc
      %16 = chunk.qk_attn query %8, write %13 gate %9 : (!f32_bthk, !f32_bthk, !f32_bthv) -> !bf16_bthvc
      chunk.yield %15, %16 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "v" : !bf16_bthvv
      %6 = chunk.load "g" : !f32_bthv
      %7 = chunk.load "beta" : !f32_bthv
      %8 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %10 = chunk.gate_cumsum %6 : !f32_bthv -> !f32_bthv
      %11 = chunk.load "precond_g" : !f32_bth
      %12 = chunk.load "precond_beta" : !f32_bth
      %13 = chunk.load "precond_center" : !f32_h
      %14 = chunk.accum_apply %8, key %8 gate %11 gain %12 start %1, center %13 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
      %w, %u = chunk.wy_recompute %2#0, read %8, value %5 gain %7 gate %10 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv, !f32_bthv) -> (!bf16_bthvk, !bf16_bthvv)
      %15 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %14 gate %10 init %15 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_bthv, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %16 = chunk.output query %9, vnew %v_new, states %states, attn %2#1 gate %10 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global, !f32_bthv) -> !bf16_bthvv
      chunk.store "o", %16 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}

// -----

// ATQ (ema_sq_squash, query side): the scan multiplies the read query in place; the write key stays k.
// AUTO-LABEL: func.func @atq_chunk_local()
// AUTO-SAME: tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0, 1>
// AUTO: %[[QP:.*]] = tile.channel_scan
// AUTO: tile.barrier
// AUTO-NEXT: tile.store_rows %[[QP]] into "pwq"
// AUTO-NEXT: tile.lower_products rows(%{{.*}}, %[[QP]])
// CHECK-LABEL: func.func @atq_chunk_local()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0>
// CHECK: %[[Q:.*]] = tile.chunk_rows "q"
// CHECK: %[[K:.*]] = tile.chunk_rows "k"
// CHECK: %[[QP:.*]] = tile.channel_scan %[[K]], %{{.*}}, %{{.*}}, %{{.*}} apply %[[Q]] center %{{.*}} readout soft_power
// CHECK-NOT: tile.encode_bf16 %[[Q]]
// CHECK: %[[KB:.*]] = tile.encode_bf16 %[[K]]
// CHECK-NOT: tile.store_rows
// CHECK: tile.lower_products rows(%[[KB]], %[[QP]]) cols %[[KB]]
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvk = !chunk.tensor<[B, T, HV, K], bf16>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnth = !chunk.tensor<[B, NT, H], f32>
!f32_bnth_global = !chunk.tensor<[B, NT, H], f32, global>
!f32_bnthk = !chunk.tensor<[B, NT, H, K], f32>
!f32_bnthk_global = !chunk.tensor<[B, NT, H, K], f32, global>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bth = !chunk.tensor<[B, T, H], f32>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_h = !chunk.tensor<[H], f32>
!f32_nhk = !chunk.tensor<[N, H, K], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @atq_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2433, flops_per_token_head = 219910, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %5 = chunk.load "precond_g" : !f32_bth
      %6 = chunk.load "precond_beta" : !f32_bth
      %sum, %log_decay = chunk.accum_summary %4 gate %5 gain %6 : (!f32_bthk, !f32_bth, !f32_bth) -> (!f32_bnthk, !f32_bnth)
      chunk.yield %sum, %log_decay : !f32_bnthk, !f32_bnth
    }
    %1 = chunk.kernel "precond_scan" -> !f32_bnthk_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "initial_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
      %start, %final = chunk.accum_pass %0#0, %0#1 init %3 : (!f32_bnthk_global, !f32_bnth_global, !f32_nhk) -> (!f32_bnthk, !f32_nhk)
      chunk.store "final_precond_state", %final : !f32_nhk
      chunk.yield %start : !f32_bnthk
    }
    %2:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "g" : !f32_bthv
      %6 = chunk.load "beta" : !f32_bthv
      %7 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.gate_cumsum %5 : !f32_bthv -> !f32_bthv
      %10 = chunk.load "precond_g" : !f32_bth
      %11 = chunk.load "precond_beta" : !f32_bth
      %12 = chunk.load "precond_center" : !f32_h
      %13 = chunk.accum_apply %8, key %7 gate %10 gain %11 start %1, center %12 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
      %14 = chunk.kkt read %7, write %7 gain %6 gate %9 : (!f32_bthk, !f32_bthk, !f32_bthv, !f32_bthv) -> !f32_bthvc
      %15 = chunk.solve_tril %14 : !f32_bthvc -> !bf16_bthvc
      %16 = chunk.qk_attn query %13, write %7 gate %9 : (!f32_bthk, !f32_bthk, !f32_bthv) -> !bf16_bthvc
      chunk.yield %15, %16 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "v" : !bf16_bthvv
      %6 = chunk.load "g" : !f32_bthv
      %7 = chunk.load "beta" : !f32_bthv
      %8 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %10 = chunk.gate_cumsum %6 : !f32_bthv -> !f32_bthv
      %11 = chunk.load "precond_g" : !f32_bth
      %12 = chunk.load "precond_beta" : !f32_bth
      %13 = chunk.load "precond_center" : !f32_h
      %14 = chunk.accum_apply %9, key %8 gate %11 gain %12 start %1, center %13 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
      %w, %u = chunk.wy_recompute %2#0, read %8, value %5 gain %7 gate %10 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv, !f32_bthv) -> (!bf16_bthvk, !bf16_bthvv)
      %15 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %8 gate %10 init %15 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_bthv, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %16 = chunk.output query %14, vnew %v_new, states %states, attn %2#1 gate %10 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global, !f32_bthv) -> !bf16_bthvv
      chunk.store "o", %16 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}

// -----

// OSDN-APF (hypergrad_ogd with retention, pre timing): the scan steps by the workspace coefficients "pcoef"
// (times rk²), decays by e^{precond_g} and reads out the state before each step.
// AUTO-LABEL: func.func @osdn_apf_chunk_local()
// AUTO-SAME: tile.launch_features = array<i32: 0, 1, 1, 0, 1, 1, 0, 1>
// AUTO: %[[KW:.*]] = tile.channel_scan
// AUTO: tile.barrier
// AUTO-NEXT: tile.store_rows %[[KW]] into "pwk"
// AUTO-NEXT: tile.lower_products rows({{.*}}) cols %[[KW]]
// CHECK-LABEL: func.func @osdn_apf_chunk_local()
// CHECK-SAME: tile.launch_features = array<i32: 0, 1, 1, 0, 1, 1, 0>
// CHECK: %[[K:.*]] = tile.chunk_rows "k"
// CHECK: %[[PG:.*]] = tile.chunk_rows "precond_g" at key_head
// CHECK: %[[S0:.*]] = tile.workspace_rows "pst" : !f32_k_smem_row
// CHECK: %[[PC:.*]] = tile.workspace_rows "pcoef" : !f32_c_smem_row
// CHECK-NEXT: %[[A:.*]] = tile.row_exp %[[PG]]
// CHECK-NEXT: tile.barrier
// CHECK: %[[BK:.*]] = tile.row_mul %[[PC]], %{{.*}}
// CHECK: %[[KW:.*]] = tile.channel_scan %[[K]], %[[S0]], %[[A]], %[[BK]] apply %[[K]] readout clamped_pre :
// CHECK: tile.lower_products rows(%{{.*}}, %{{.*}}) cols %[[KW]]
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvk = !chunk.tensor<[B, T, HV, K], bf16>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnthk = !chunk.tensor<[B, NT, H, K], f32>
!f32_bnthk_global = !chunk.tensor<[B, NT, H, K], f32, global>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bth = !chunk.tensor<[B, T, H], f32>
!f32_bth_global = !chunk.tensor<[B, T, H], f32, global>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhk = !chunk.tensor<[N, H, K], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @osdn_apf_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2417, flops_per_token_head = 186112, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:2 = chunk.kernel "precond_scan" -> !f32_bnthk_global, !f32_bth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "beta" : !f32_bthv
      %4 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %5 = chunk.load "precond_g" : !f32_bth
      %6 = chunk.load "initial_precond_state" {absent = 1.000000e+00 : f64} : !f32_nhk
      %start, %coef, %final = chunk.hypergrad_pass %4 gain %3 retention %5 init %6 {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthv, !f32_bth, !f32_nhk) -> (!f32_bnthk, !f32_bth, !f32_nhk)
      chunk.store "final_precond_state", %final : !f32_nhk
      chunk.yield %start, %coef : !f32_bnthk, !f32_bth
    }
    %1:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %2 = chunk.load "q" : !bf16_bthk
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.load "precond_g" : !f32_bth
      %8 = chunk.hypergrad_apply %5, key %5, coef %0#1 retention %7, start %0#0 {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthk, !f32_bth_global, !f32_bth, !f32_bnthk_global) -> !f32_bthk
      %9 = chunk.kkt read %5, write %8 gain %4 : (!f32_bthk, !f32_bthk, !f32_bthv) -> !f32_bthvc
      %10 = chunk.solve_tril %9 : !f32_bthvc -> !bf16_bthvc
      %11 = chunk.qk_attn query %6, write %8 : (!f32_bthk, !f32_bthk) -> !bf16_bthvc
      chunk.yield %10, %11 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %2 = chunk.load "q" : !bf16_bthk
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.load "v" : !bf16_bthvv
      %5 = chunk.load "beta" : !f32_bthv
      %6 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.l2norm %2 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.load "precond_g" : !f32_bth
      %9 = chunk.hypergrad_apply %6, key %6, coef %0#1 retention %8, start %0#0 {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthk, !f32_bth_global, !f32_bth, !f32_bnthk_global) -> !f32_bthk
      %w, %u = chunk.wy_recompute %1#0, read %6, value %4 gain %5 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv) -> (!bf16_bthvk, !bf16_bthvv)
      %10 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %9 init %10 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %11 = chunk.output query %7, vnew %v_new, states %states, attn %1#1 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global) -> !bf16_bthvv
      chunk.store "o", %11 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}
