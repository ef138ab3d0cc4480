// What --chunk-segment-state-pass refuses, and a clamped OSDN scan kept sequential with a remark.
// RUN: %dgps-opt %s -split-input-file --chunk-segment-state-pass -verify-diagnostics

// expected-error @+1 {{is already partitioned into kernels; run --chunk-segment-state-pass before --chunk-partition-kernels}}
func.func @partitioned() attributes {chunk.chunk_size = 64 : i64} {
  chunk.kernel "chunk_local" attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 1>} {
    %v = chunk.load "v" : !chunk.tensor<[B, T, HV, V], bf16>
    chunk.yield
  }
  return
}

// -----

func.func @unfused() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], f32>
  // expected-error @+1 {{is a token-by-token preconditioner scan; run --chunk-fuse-preconditioner before --chunk-segment-state-pass}}
  %d, %f = chunk.hypergrad_scan %k {eta = 1.0 : f64, d_init = 1.0 : f64, post = false} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[N, H, K], f32>)
  return
}

// -----

func.func @clamped() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], f32>
  // expected-remark @+1 {{kept sequential: the clamped hypergradient step is not affine in d}}
  %s, %c, %f = chunk.hypergrad_pass %k {eta = 1.0 : f64, d_init = 1.0 : f64, post = false, clamp_max = 2.0 : f64} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, NT, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[N, H, K], f32>)
  chunk.store "final_precond_state", %f : !chunk.tensor<[N, H, K], f32>
  return
}

// -----

func.func @clamped_segment_op() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], f32>
  // expected-error @+1 {{has a clamp: a clamped hypergradient step is not affine in d}}
  %s, %c, %f = chunk.hypergrad_segment_pass %k {eta = 1.0 : f64, d_init = 1.0 : f64, post = false, clamp_min = 0.5 : f64} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, NT, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[N, H, K], f32>)
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.segment_chunks' must be an i64 segment length in chunks >= 1}}
func.func @bad_length() attributes {chunk.chunk_size = 64 : i64, chunk.segment_chunks = 0 : i64} {
  return
}
