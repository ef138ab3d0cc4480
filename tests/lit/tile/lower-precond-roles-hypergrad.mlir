// --dgps-lower-precond-roles-to-tile on OSDN's chunked hypergradient d-scan (docs/math.md §5.2 "Chunked form"):
// precond_summary (chunk.hypergrad_chunk_summary) becomes the chunk's raw key rows, β at the value head and the
// retention log-gate, then tile.hypergrad_chunk_summary into "hgtri" / "hgvec"; precond_scan
// (chunk.hypergrad_chunk_pass) becomes one tile.hypergrad_chunk_pass over the chunks from the same raw key. The rest
// of the plan is left alone.
// RUN: %dgps-opt %s -split-input-file --dgps-lower-precond-roles-to-tile | %FileCheck %s
// (The printer aliases !tile.tile<[C, K], bf16, smem, row> as !bf16_ck_smem_row and [C] f32 as !f32_c_smem_row.)

// OSDN (gain, l2-normalised key, no retention): the retention is a zero vector, the l2 factor and η are
// attributes of the summary (the device normalises the raw key itself); the pass starts from
// initial_precond_state, reads an absent one as d_init = 1 and writes the final d.
// CHECK-LABEL: func.func @osdn_precond_summary()
// CHECK-SAME: tile.grid = "chunk_key_head"
// CHECK-SAME: tile.role = "precond_summary"
// CHECK-NEXT: %[[K:.*]] = tile.chunk_rows "k" at key_head : !bf16_ck_smem_row
// CHECK-NEXT: %[[B:.*]] = tile.chunk_rows "beta" at value_head : !f32_c_smem_row
// CHECK-NEXT: %[[R:.*]] = tile.chunk_fill 0.000000e+00 : !f32_c_smem_row
// CHECK-NEXT: tile.barrier
// CHECK-NEXT: tile.hypergrad_chunk_summary %[[K]], %[[B]], %[[R]] into "hgtri", "hgvec" {eta = 1.000000e+00 : f32, l2_eps = 9.99999997E-7 : f32}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @osdn_precond_scan()
// CHECK-SAME: tile.grid = "sequence_key_head"
// CHECK-SAME: tile.launch_features = array<i32: 0, 1, 1, 0, 1, 1, 0>
// CHECK-SAME: tile.role = "precond_scan"
// CHECK-NEXT: tile.hypergrad_chunk_pass key "k" start "initial_precond_state" summary "hgtri", "hgvec" into "pst", "pcoef" final "final_precond_state" {absent = 1.000000e+00 : f32}
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

// OSDN with APF retention, η = 0.5, d_init = 2, no initial-state load and no final store: the retention rows are
// loaded at the key head, the pass reads an absent start as 2 and writes no final d.
// CHECK-LABEL: func.func @apf_precond_summary()
// CHECK-NEXT: %[[K:.*]] = tile.chunk_rows "k" at key_head
// CHECK-NEXT: %[[B:.*]] = tile.chunk_rows "beta" at value_head
// CHECK-NEXT: %[[R:.*]] = tile.chunk_rows "precond_g" at key_head
// CHECK-NEXT: tile.barrier
// CHECK-NEXT: tile.hypergrad_chunk_summary %[[K]], %[[B]], %[[R]] into "hgtri", "hgvec" {eta = 5.000000e-01 : f32, l2_eps = 9.99999997E-7 : f32}
// CHECK-LABEL: func.func @apf_precond_scan()
// CHECK-NEXT: tile.hypergrad_chunk_pass key "k" start "initial_precond_state" summary "hgtri", "hgvec" into "pst", "pcoef" {absent = 2.000000e+00 : f32}
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
  func.func @apf_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2942, flops_per_token_head = 204245, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0:4 = chunk.kernel "precond_summary" -> !f32_bthk_global, !f32_bth_global, !f32_bthk_global, !f32_bnth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.load "precond_g" : !f32_bth
      %read_rows, %base, %write_rows, %log_decay = chunk.hypergrad_chunk_summary %5 gain %4 retention %6 {eta = 5.000000e-01 : f64} : (!f32_bthk, !f32_bthv, !f32_bth) -> (!f32_bthk, !f32_bth, !f32_bthk, !f32_bnth)
      chunk.yield %read_rows, %base, %write_rows, %log_decay : !f32_bthk, !f32_bth, !f32_bthk, !f32_bnth
    }
    %1:2 = chunk.kernel "precond_scan" -> !f32_bnthk_global, !f32_bth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %start, %coef, %final = chunk.hypergrad_chunk_pass %0#0, %0#1, %0#2, %0#3 {d_init = 2.000000e+00 : f64} : (!f32_bthk_global, !f32_bth_global, !f32_bthk_global, !f32_bnth_global) -> (!f32_bnthk, !f32_bth, !f32_nhk)
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

// A clamped d-scan (chunk.hypergrad_pass with bounds, a precond_scan without a precond_summary) is not affine in d:
// one tile.hypergrad_token_scan, one warp per (sequence, key head), the gain by name and the bounds as attributes;
// no precond_summary function.
// CHECK-NOT: func.func @clamped_precond_summary
// CHECK-LABEL: func.func @clamped_precond_scan()
// CHECK-SAME: tile.grid = "sequence_key_head_warp"
// The launch features carry the clamp (last entry): the workspace has no chunked d-scan regions.
// CHECK-SAME: tile.launch_features = array<i32: 0, 1, 1, 0, 1, 1, 1>
// CHECK-SAME: tile.role = "precond_scan"
// CHECK-NEXT: tile.hypergrad_token_scan key "k" gain "beta" start "initial_precond_state" into "pst", "pcoef" final "final_precond_state" {absent = 1.000000e+00 : f32, clamp_max = 2.000000e+00 : f32, clamp_min = 5.000000e-01 : f32, eta = 1.000000e+00 : f32, l2_eps = 9.99999997E-7 : f32}
// CHECK-NEXT: return
// CHECK-NOT: func.func @clamped_precond_summary

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
  func.func @clamped_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2942, flops_per_token_head = 204245, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %1:2 = chunk.kernel "precond_scan" -> !f32_bnthk_global, !f32_bth_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %3 = chunk.load "k" : !bf16_bthk
      %4 = chunk.load "beta" : !f32_bthv
      %5 = chunk.l2norm %3 {eps = 9.9999999999999995E-7 : f64} : !bf16_bthk -> !f32_bthk
      %6 = chunk.load "initial_precond_state" {absent = 1.000000e+00 : f64} : !f32_nhk
      %start, %coef, %final = chunk.hypergrad_pass %5 gain %4 init %6 {clamp_max = 2.000000e+00 : f64, clamp_min = 5.000000e-01 : f64, d_init = 1.000000e+00 : f64, eta = 1.000000e+00 : f64, post = false} : (!f32_bthk, !f32_bthv, !f32_nhk) -> (!f32_bnthk, !f32_bth, !f32_nhk)
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

