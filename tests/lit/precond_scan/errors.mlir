// What --chunk-parallel-precond-scan refuses, a clamped OSDN scan kept token by token with a remark, and the
// verifiers of the chunked-scan ops.
// RUN: %dgps-opt %s -split-input-file --chunk-parallel-precond-scan -verify-diagnostics

// expected-error @+1 {{is already partitioned into kernels; run --chunk-parallel-precond-scan before --chunk-partition-kernels}}
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
  // expected-error @+1 {{is the unfused token-by-token scan; run --chunk-fuse-preconditioner before --chunk-parallel-precond-scan}}
  %d, %f = chunk.hypergrad_scan %k {eta = 1.0 : f64, d_init = 1.0 : f64, post = false} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[N, H, K], f32>)
  return
}

// -----

func.func @clamped() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], f32>
  // expected-remark @+1 {{kept token by token: the clamped hypergradient step is not affine in d}}
  %s, %c, %f = chunk.hypergrad_pass %k {eta = 1.0 : f64, d_init = 1.0 : f64, post = false, clamp_max = 2.0 : f64} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, NT, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[N, H, K], f32>)
  chunk.store "final_precond_state", %f : !chunk.tensor<[N, H, K], f32>
  return
}

// -----

func.func @summary_bad_rows() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], f32>
  // expected-error @+1 {{read_rows has dims [B, NT, H, K]; expected [B, T, H, K]}}
  %r, %a, %y, %l = chunk.hypergrad_chunk_summary %k {eta = 1.0 : f64} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, NT, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[B, NT, H], f32>)
  return
}

// -----

func.func @summary_negative_eta() attributes {chunk.chunk_size = 64 : i64} {
  %k = chunk.load "k" : !chunk.tensor<[B, T, H, K], f32>
  // expected-error @+1 {{eta must be finite and >= 0, got -1}}
  %r, %a, %y, %l = chunk.hypergrad_chunk_summary %k {eta = -1.0 : f64} : (!chunk.tensor<[B, T, H, K], f32>) -> (!chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[B, NT, H], f32>)
  return
}

// -----

func.func @pass_bad_log_decay(%r: !chunk.tensor<[B, T, H, K], f32>, %a: !chunk.tensor<[B, T, H], f32>,
                              %l: !chunk.tensor<[B, T, H], f32>) attributes {chunk.chunk_size = 64 : i64} {
  // expected-error @+1 {{log_decay has dims [B, T, H]; expected [B, NT, H]}}
  %s, %c, %f = chunk.hypergrad_chunk_pass %r, %a, %r, %l {d_init = 1.0 : f64} : (!chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[B, T, H, K], f32>, !chunk.tensor<[B, T, H], f32>) -> (!chunk.tensor<[B, NT, H, K], f32>, !chunk.tensor<[B, T, H], f32>, !chunk.tensor<[N, H, K], f32>)
  return
}
