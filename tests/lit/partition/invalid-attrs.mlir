// The chunk.* function attributes hold spec values (chunk size, GVA ratio, head dims, tuning space):
// the chunk dialect verifies them with the spec language's rules, so a zero or negative chunk size, GVA
// ratio or tile width never reaches the planner's divisions (they used to end in SIGFPE or a plan with
// C=-1), and an i64 beyond int is reported, not narrowed.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics --chunk-partition-kernels

// expected-error @+1 {{attribute 'chunk.chunk_size': 0 is not one of {16, 32, 64}}}
func.func @forward() attributes {chunk.chunk_size = 0 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.chunk_size': -1 is not one of {16, 32, 64}}}
func.func @forward() attributes {chunk.chunk_size = -1 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.chunk_size' must be an i64 integer}}
func.func @forward() attributes {chunk.chunk_size = 64 : i32, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.gva_ratio': must be in 1..64, got 0}}
func.func @forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 0 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.gva_ratio': must be in 1..64, got 4294967297}}
func.func @forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 4294967297 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.tuning' block_v[0]: 0 is not one of {16, 32, 64, 128}}}
func.func @forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [0], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.value_dims'[0]: V = 0 is outside 16..256}}
func.func @forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 128>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 0>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.key_dims'[0]: K = 4294967424 is outside 16..256}}
func.func @forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64: 4294967424>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

// expected-error @+1 {{attribute 'chunk.key_dims': must not be empty}}
func.func @forward() attributes {chunk.chunk_size = 64 : i64, chunk.gva_ratio = 1 : i64, chunk.key_dims = array<i64>, chunk.tuning = #dgps.tuning<chunk = [64], block_v = [32, 64], warps = [4, 8], stages = [1, 2]>, chunk.value_dims = array<i64: 128>} {
  return
}

// -----

func.func @bad_tile() attributes {chunk.chunk_size = 64 : i64} {
  // expected-error @+1 {{#chunk.tile block_v = 0: 0 is not one of {16, 32, 64, 128}}}
  chunk.kernel "state_output" attributes {tile = #chunk.tile<chunk = 64, block_v = 0, warps = 4, stages = 1>} {
  }
  return
}
