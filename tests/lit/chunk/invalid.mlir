// chunk ops check the symbolic shapes of their operands and results.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

func.func @kda_gate_to_kkt() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], bf16>
  %b = chunk.load "beta" : !chunk.tensor<[B, T, HV], f32>
  %g = chunk.load "g" : !chunk.tensor<[B, T, H], f32>
  // expected-error @+1 {{gate has dims [B, T, H]; expected [B, T, HV] or [B, T, HV, K]}}
  %a = chunk.kkt read %k, write %k gain %b gate %g : (!chunk.tensor<[B, T, H, K], bf16>, !chunk.tensor<[B, T, H, K], bf16>, !chunk.tensor<[B, T, HV], f32>, !chunk.tensor<[B, T, H], f32>) -> !chunk.tensor<[B, T, HV, C], f32>
  return
}

// -----

func.func @unknown_input() {
  // expected-error @+1 {{loads unknown input 'keys'}}
  %k = chunk.load "keys" : !chunk.tensor<[B, T, H, K], bf16>
  return
}

// -----

// expected-error @+1 {{unknown dimension 'X'}}
func.func @bad_dim(%x: !chunk.tensor<[B, X], f32>) {
  return
}

// -----

func.func @bad_role() {
  // expected-error @+1 {{unknown role 'everything'}}
  chunk.kernel "everything" attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 1>} {
  }
  return
}

// -----

func.func @buffer_not_global() {
  // expected-error @+1 {{must be marked global}}
  %0 = chunk.kernel "chunk_local" -> !chunk.tensor<[B, T, HV, C], f32> attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 1>} {
    %s = chunk.splat 0.0 : !chunk.tensor<[B, T, HV, C], f32>
    chunk.yield %s : !chunk.tensor<[B, T, HV, C], f32>
  }
  return
}
