// The partitioner reports what it cannot place instead of asserting.
// RUN: %dgps-opt %s -split-input-file --chunk-partition-kernels -verify-diagnostics

func.func @store_of_an_input() attributes {chunk.chunk_size = 64 : i64} {
  %v = chunk.load "v" : !chunk.tensor<[B, T, HV, V], bf16>
  // expected-error @+1 {{stores a value no kernel computes}}
  chunk.store "o", %v : !chunk.tensor<[B, T, HV, V], bf16>
  return
}

// -----

// expected-error @+1 {{is already partitioned into kernels}}
func.func @twice() attributes {chunk.chunk_size = 64 : i64} {
  chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 64, warps = 4, stages = 1>} {
  }
  return
}
