// --dgps-lower-state-output-to-tile on preconditioned forwards: the preconditioner's in-chunk rebuild
// (chunk.accum_apply / chunk.hypergrad_apply) becomes the walk's rescale — which operand is rebuilt, the
// per-channel scan that gives the factor (rows, start vector, read-out and its parameters) and the producer
// warps with their register budget — and the rest of the walk is what the same forward without a
// preconditioner gets.
// RUN: %dgps-opt %s -split-input-file --dgps-lower-state-output-to-tile | %FileCheck %s
// RUN: %dgps-opt %s -split-input-file --dgps-lower-state-output-to-tile | %dgps-opt -split-input-file | %FileCheck %s
// With the write key stored by chunk_local (write-key=stored: launch_features' write_key entry 1), the key-side
// walks load it ("pwk", or "opw" with a per-channel gate) with no rescale and no producers; ATQ's walk loads the
// query chunk_local stored ("pwq"), likewise. (write-key=segments is the write key's only: for ATQ an error naming
// the option.)
// RUN: %dgps-opt %s -split-input-file --dgps-lower-state-output-to-tile=write-key=stored | %FileCheck %s --check-prefix=STORED
// RUN: not %dgps-opt %s -split-input-file --dgps-lower-state-output-to-tile=write-key=segments 2>&1 >/dev/null | %FileCheck %s --check-prefix=SEGMENTS-ERR
// PGDN: scalar decay, the accumulator's soft power scales the write key (raw key rows into the write-key tile).
// STORED-LABEL: func.func @pgdn_state_output()
// STORED-SAME: tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0, 1>, tile.role = "state_output"
// STORED-NEXT: tile.state_walk start argument query "q" write_key "pwk" as stored read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
// CHECK-LABEL: func.func @pgdn_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" as rebuilt read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform rescale write_key scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
// CHECK-NEXT: return
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

// PKDA: per-channel decay; the rescale rewrites the gated write key "opw" in place, the scan still reads the
// raw key.
// STORED-LABEL: func.func @pkda_state_output()
// STORED-SAME: tile.launch_features = array<i32: 2, 1, 1, 0, 0, 1, 0, 1>, tile.role = "state_output"
// STORED-NEXT: tile.state_walk start argument query "opq" write_key "opw" as stored read_key "opk" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry columns columns "pdec" {write_final, write_output}
// CHECK-LABEL: func.func @pkda_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 2, 1, 1, 0, 0, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "opq" write_key "opw" as rebuilt read_key "opk" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry columns columns "pdec" rescale write_key scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
// CHECK-NEXT: return
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
!f32_bthvk = !chunk.tensor<[B, T, HV, K], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_h = !chunk.tensor<[H], f32>
!f32_nhk = !chunk.tensor<[N, H, K], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @pkda_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 120, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 4237, flops_per_token_head = 220164, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 120, 128>} {
    %0:2 = chunk.kernel "precond_summary" -> !f32_bnthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 8, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %5 = chunk.load "precond_g" : !f32_bth
      %6 = chunk.load "precond_beta" : !f32_bth
      %sum, %log_decay = chunk.accum_summary %4 gate %5 gain %6 : (!f32_bthk, !f32_bth, !f32_bth) -> (!f32_bnthk, !f32_bnth)
      chunk.yield %sum, %log_decay : !f32_bnthk, !f32_bnth
    }
    %1 = chunk.kernel "precond_scan" -> !f32_bnthk_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 8, stages = 2>} {
      %3 = chunk.load "initial_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
      %start, %final = chunk.accum_pass %0#0, %0#1 init %3 : (!f32_bnthk_global, !f32_bnth_global, !f32_nhk) -> (!f32_bnthk, !f32_nhk)
      chunk.store "final_precond_state", %final : !f32_nhk
      chunk.yield %start : !f32_bnthk
    }
    %2:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 8, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "g" : !f32_bthvk
      %6 = chunk.load "beta" : !f32_bthv
      %7 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.gate_cumsum %5 : !f32_bthvk -> !f32_bthvk
      %10 = chunk.load "precond_g" : !f32_bth
      %11 = chunk.load "precond_beta" : !f32_bth
      %12 = chunk.load "precond_center" : !f32_h
      %13 = chunk.accum_apply %7, key %7 gate %10 gain %11 start %1, center %12 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
      %14 = chunk.kkt read %7, write %13 gain %6 gate %9 : (!f32_bthk, !f32_bthk, !f32_bthv, !f32_bthvk) -> !f32_bthvc
      %15 = chunk.solve_tril %14 : !f32_bthvc -> !bf16_bthvc
      %16 = chunk.qk_attn query %8, write %13 gate %9 : (!f32_bthk, !f32_bthk, !f32_bthvk) -> !bf16_bthvc
      chunk.yield %15, %16 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 8, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "v" : !bf16_bthvv
      %6 = chunk.load "g" : !f32_bthvk
      %7 = chunk.load "beta" : !f32_bthv
      %8 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %10 = chunk.gate_cumsum %6 : !f32_bthvk -> !f32_bthvk
      %11 = chunk.load "precond_g" : !f32_bth
      %12 = chunk.load "precond_beta" : !f32_bth
      %13 = chunk.load "precond_center" : !f32_h
      %14 = chunk.accum_apply %8, key %8 gate %11 gain %12 start %1, center %13 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
      %w, %u = chunk.wy_recompute %2#0, read %8, value %5 gain %7 gate %10 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv, !f32_bthvk) -> (!bf16_bthvk, !bf16_bthvv)
      %15 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %14 gate %10 init %15 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_bthvk, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %16 = chunk.output query %9, vnew %v_new, states %states, attn %2#1 gate %10 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global, !f32_bthvk) -> !bf16_bthvv
      chunk.store "o", %16 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}


// -----

// OSDN: no decay; the hypergradient state before each token's step (write timing pre), no clamp, no centre.
// STORED-LABEL: func.func @osdn_state_output()
// STORED-SAME: tile.launch_features = array<i32: 0, 1, 1, 0, 1, 1, 0, 1>, tile.role = "state_output"
// STORED-NEXT: tile.state_walk start argument query "q" write_key "pwk" as stored read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry none {write_final, write_output}
// CHECK-LABEL: func.func @osdn_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 0, 1, 1, 0, 1, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" as rebuilt read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry none rescale write_key scan "k" from "pst" readout clamped_pre producer_warps 4 registers [224, 56] {write_final, write_output}
// CHECK-NEXT: return
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
!f32_bth_global = !chunk.tensor<[B, T, H], f32, global>
!f32_bthk = !chunk.tensor<[B, T, H, K], f32>
!f32_bthk_global = !chunk.tensor<[B, T, H, K], f32, global>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvc = !chunk.tensor<[B, T, HV, C], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhk = !chunk.tensor<[N, H, K], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @osdn_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2942, flops_per_token_head = 204245, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:4 = chunk.kernel "precond_summary" -> !f32_bthk_global, !f32_bth_global, !f32_bthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %read_rows, %base, %write_rows, %log_decay = chunk.hypergrad_chunk_summary %5 gain %4 {eta = 1.000000e+00 : f64} : (!f32_bthk, !f32_bthv) -> (!f32_bthk, !f32_bth, !f32_bthk, !f32_bnth)
      chunk.yield %read_rows, %base, %write_rows, %log_decay : !f32_bthk, !f32_bth, !f32_bthk, !f32_bnth
    }
    %1:2 = chunk.kernel "precond_scan" -> !f32_bnthk_global, !f32_bth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "initial_precond_state" {absent = 1.000000e+00 : f64} : !f32_nhk
      %start, %coef, %final = chunk.hypergrad_chunk_pass %0#0, %0#1, %0#2, %0#3 init %3 {d_init = 1.000000e+00 : f64} : (!f32_bthk_global, !f32_bth_global, !f32_bthk_global, !f32_bnth_global, !f32_nhk) -> (!f32_bnthk, !f32_bth, !f32_nhk)
      chunk.store "final_precond_state", %final : !f32_nhk
      chunk.yield %start, %coef : !f32_bnthk, !f32_bth
    }
    %2:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "beta" : !f32_bthv
      %6 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %7 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.hypergrad_apply %6, key %6, coef %1#1, start %1#0 {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthk, !f32_bth_global, !f32_bnthk_global) -> !f32_bthk
      %9 = chunk.kkt read %6, write %8 gain %5 : (!f32_bthk, !f32_bthk, !f32_bthv) -> !f32_bthvc
      %10 = chunk.solve_tril %9 : !f32_bthvc -> !bf16_bthvc
      %11 = chunk.qk_attn query %7, write %8 : (!f32_bthk, !f32_bthk) -> !bf16_bthvc
      chunk.yield %10, %11 : !bf16_bthvc, !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "q" : !bf16_bthk
      %4 = chunk.load "k" : !bf16_bthk
      %5 = chunk.load "v" : !bf16_bthvv
      %6 = chunk.load "beta" : !f32_bthv
      %7 = chunk.l2norm %4 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %8 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %9 = chunk.hypergrad_apply %7, key %7, coef %1#1, start %1#0 {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthk, !f32_bth_global, !f32_bnthk_global) -> !f32_bthk
      %w, %u = chunk.wy_recompute %2#0, read %7, value %5 gain %6 : (!bf16_bthvc_global, !f32_bthk, !bf16_bthvv, !f32_bthv) -> (!bf16_bthvk, !bf16_bthvv)
      %10 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass w %w, u %u, write %9 init %10 : (!bf16_bthvk, !bf16_bthvv, !f32_bthk, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %11 = chunk.output query %8, vnew %v_new, states %states, attn %2#1 : (!f32_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global) -> !bf16_bthvv
      chunk.store "o", %11 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}


// -----

// ATQ: the preconditioner scales the read query (in place), the write key stays the raw key.
// SEGMENTS-ERR: error: write-key segments: the forward has a query-side preconditioner
// STORED-LABEL: func.func @atq_state_output()
// STORED-SAME: tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0, 1>, tile.role = "state_output"
// STORED-NEXT: tile.state_walk start argument query "pwq" as stored write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
// STORED-NEXT: return
// CHECK-LABEL: func.func @atq_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" as rebuilt write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform rescale query scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
// CHECK-NEXT: return
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

