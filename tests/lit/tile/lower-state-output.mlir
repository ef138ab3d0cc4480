// --dgps-lower-state-output-to-tile: the state_output kernel of the partitioned plan becomes one tile.state_walk;
// each decay kind and solve form shows up as different operands and attributes (no kind flags).
// RUN: %dgps-opt %s -split-input-file --dgps-lower-state-output-to-tile | %FileCheck %s

// No decay, delta rule: the residual through the solve block, no carry, raw q/k operands.
// CHECK-LABEL: func.func @deltanet_state_output()
// CHECK-SAME: tile.grid = "value_tile", tile.launch_features = array<i32: 0, 1, 0, 0, 0, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry none {write_final, write_output}
// CHECK-NEXT: return
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

// Scalar decay: the record's uniform carry.
// CHECK-LABEL: func.func @gdn_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 0, 0, 0, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
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

// Per-channel decay: the gated operands chunk_local wrote and the per-chunk carry vector.
// CHECK-LABEL: func.func @kda_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 2, 1, 0, 0, 0, 1, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "opq" write_key "opw" read_key "opk" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry columns columns "pdec" {write_final, write_output}
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
    %0:2 = chunk.kernel "chunk_local" -> !bf16_bthvc_global, !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 8, stages = 2>} {
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
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 8, stages = 2>} {
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

// Linear rule without decay: scaled values, no read key, no solve block.
// CHECK-LABEL: func.func @linear_attention_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 0, 0, 0, 0, 0, 0, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none {write_final, write_output}
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

// -----

// Linear rule with a gain (gain_scale) and a scalar decay.
// CHECK-LABEL: func.func @mamba2_state_output()
// CHECK-SAME: tile.launch_features = array<i32: 1, 1, 0, 0, 0, 0, 0>, tile.role = "state_output"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry uniform {write_final, write_output}
!bf16_bthk = !chunk.tensor<[B, T, H, K], bf16>
!bf16_bthvc = !chunk.tensor<[B, T, HV, C], bf16>
!bf16_bthvc_global = !chunk.tensor<[B, T, HV, C], bf16, global>
!bf16_bthvv = !chunk.tensor<[B, T, HV, V], bf16>
!f32_bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!f32_bthv = !chunk.tensor<[B, T, HV], f32>
!f32_bthvv = !chunk.tensor<[B, T, HV, V], f32>
!f32_nhvkv = !chunk.tensor<[N, HV, K, V], f32>
module attributes {dgps.target = "sm_90a"} {
  func.func @mamba2_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 1865, flops_per_token_head = 131202, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
    %0 = chunk.kernel "chunk_local" -> !bf16_bthvc_global attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "g" : !f32_bthv
      %4 = chunk.gate_cumsum %3 : !f32_bthv -> !f32_bthv
      %5 = chunk.qk_attn query %1, write %2 gate %4 {scale = 1.000000e+00 : f64} : (!bf16_bthk, !bf16_bthk, !f32_bthv) -> !bf16_bthvc
      chunk.yield %5 : !bf16_bthvc
    }
    chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 128, warps = 4, stages = 2>} {
      %1 = chunk.load "q" : !bf16_bthk
      %2 = chunk.load "k" : !bf16_bthk
      %3 = chunk.load "v" : !bf16_bthvv
      %4 = chunk.load "g" : !f32_bthv
      %5 = chunk.load "beta" : !f32_bthv
      %6 = chunk.gate_cumsum %4 : !f32_bthv -> !f32_bthv
      %7 = chunk.gain_scale %3 gain %5 : (!bf16_bthvv, !f32_bthv) -> !bf16_bthvv
      %8 = chunk.load "initial_state" {absent = 0.000000e+00 : f64} : !f32_nhvkv
      %v_new, %states, %final = chunk.state_pass u %7, write %2 gate %6 init %8 : (!bf16_bthvv, !bf16_bthk, !f32_bthv, !f32_nhvkv) -> (!f32_bthvv, !f32_bnthvkv, !f32_nhvkv)
      %9 = chunk.output query %1, vnew %v_new, states %states, attn %0 gate %6 {scale = 1.000000e+00 : f64} : (!bf16_bthk, !f32_bthvv, !f32_bnthvkv, !bf16_bthvc_global, !f32_bthv) -> !bf16_bthvv
      chunk.store "o", %9 : !bf16_bthvv
      chunk.store "final_state", %final : !f32_nhvkv
    }
    return
  }
}

// -----

// GVA (2 value heads per key head): the same walk; the grid and the key-head index carry the ratio.
// CHECK-LABEL: func.func @gdn_gva_state_output()
// CHECK-SAME: tile.grid = "value_tile"
// CHECK-NEXT: tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
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
  func.func @gdn_gva_forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 2 : i64, chunk.key_dims = array<i64: 64, 128>, chunk.plan = #chunk.plan<bytes_per_token_head = 2121, flops_per_token_head = 183042, key_dim = 128, value_dim = 128>, chunk.tuning = #dgps.tuning<chunk = [32, 64], block_v = [32, 64, 128], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 64, 128>} {
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

