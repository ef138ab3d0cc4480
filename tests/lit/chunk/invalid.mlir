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

// -----

// Householder steps (ChunkStepOps.td): spread_steps maps [B, TQ, ...] to [B, T, ...], gather_steps back.
func.func @spread_from_steps() attributes {chunk.chunk_size = 64 : i64, chunk.householder_steps = 2 : i64} {
  %g = chunk.load "g" : !chunk.tensor<[B, T, HV], f32>
  // expected-error @+1 {{input has dims [B, T, HV]; expected [B, TQ, ...]}}
  %s = chunk.spread_steps %g {steps = 2 : i64, step = 0 : i64} : !chunk.tensor<[B, T, HV], f32> -> !chunk.tensor<[B, T, HV], f32>
  return
}

// -----

func.func @spread_step_out_of_range() attributes {chunk.chunk_size = 64 : i64, chunk.householder_steps = 2 : i64} {
  %g = chunk.load "g" : !chunk.tensor<[B, TQ, HV], f32>
  // expected-error @+1 {{step must be in [0, 2), got 2}}
  %s = chunk.spread_steps %g {steps = 2 : i64, step = 2 : i64} : !chunk.tensor<[B, TQ, HV], f32> -> !chunk.tensor<[B, T, HV], f32>
  return
}

// -----

func.func @gather_changes_a_dim() attributes {chunk.chunk_size = 64 : i64, chunk.householder_steps = 3 : i64} {
  %v = chunk.load "v" : !chunk.tensor<[B, T, HV, V], bf16>
  // expected-error @+1 {{result has dims [B, TQ, HV, K]; expected [B, TQ, HV, V]}}
  %o = chunk.gather_steps %v {steps = 3 : i64, step = 2 : i64} : !chunk.tensor<[B, T, HV, V], bf16> -> !chunk.tensor<[B, TQ, HV, K], bf16>
  return
}

// -----

func.func @one_step_is_not_a_step_op() attributes {chunk.chunk_size = 64 : i64} {
  %v = chunk.load "v" : !chunk.tensor<[B, T, HV, V], bf16>
  // expected-error @+1 {{steps must be >= 2 (Householder steps per token), got 1}}
  %o = chunk.gather_steps %v {steps = 1 : i64, step = 0 : i64} : !chunk.tensor<[B, T, HV, V], bf16> -> !chunk.tensor<[B, TQ, HV, V], bf16>
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.householder_steps' must be in 2..4}}
func.func @steps_attribute_range() attributes {chunk.chunk_size = 64 : i64, chunk.householder_steps = 1 : i64} {
  return
}
