// --dgps-lower-precond-roles-to-tile fails with one error naming what it cannot lower.
// RUN: %dgps-opt %s -split-input-file --dgps-lower-precond-roles-to-tile -verify-diagnostics

// A token-by-token chunk.hypergrad_pass without a clamp (the chunked rewrite, --chunk-parallel-precond-scan, was
// not run): the device would run the chunked form, so the token scan is refused.
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
    %1:2 = chunk.kernel "precond_scan" -> !f32_bnthk_global, !f32_bth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.load "initial_precond_state" {absent = 1.000000e+00 : f64} : !f32_nhk
      // expected-error @+1 {{'chunk.hypergrad_pass' op is unclamped, so it is affine in d: run --chunk-parallel-precond-scan before partitioning (its chunked form lowers to tile.hypergrad_chunk_summary / _pass)}}
      %start, %coef, %final = chunk.hypergrad_pass %5 gain %4 init %6 {d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthv, !f32_nhk) -> (!f32_bnthk, !f32_bth, !f32_nhk)
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

// The chunked d-scan's pass reads an absent initial d as d_init; a load that says otherwise is refused.
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
      // expected-error @+1 {{'chunk.load' op an absent initial preconditioner state reads as d_init = 1.000000e+00 on the device, but the load's absent value is 0.000000e+00}}
      %3 = chunk.load "initial_precond_state" {absent = 0.000000e+00 : f64} : !f32_nhk
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
