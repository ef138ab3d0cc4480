// --dgps-lower-state-output-to-tile fails with one error naming what it cannot lower: here a PGDN forward whose
// preconditioner apply scans the query's rows instead of the raw key's (the walk's rescale scans the key rows
// it stages), so no package is written.
// RUN: %dgps-opt %s --dgps-lower-state-output-to-tile -verify-diagnostics

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
      // expected-error @+1 {{key must be the l2norm of the loaded "k"}}
      %14 = chunk.accum_apply %8, key %9 gate %11 gain %12 start %1, center %13 {eps = 9.9999999999999995E-7 : f64, x = 1.500000e+00 : f64} : (!f32_bthk, !f32_bthk, !f32_bth, !f32_bth, !f32_bnthk_global, !f32_h) -> !f32_bthk
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
