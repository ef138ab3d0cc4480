// --dgps-lower-chunk-local-to-tile fails with one error naming what it cannot lower (here a chunk_local that
// loads v, which the tile lowering of chunk_local has no use for).
// RUN: %dgps-opt %s --dgps-lower-chunk-local-to-tile -verify-diagnostics
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
      // expected-error @+1 {{loads "v", which chunk_local's tile lowering does not read}}
      %9 = chunk.load "v" : !bf16_bthvv
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
