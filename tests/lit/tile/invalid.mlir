// The tile type and ops check memory spaces, layouts and shapes.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{register layout frag needs shape [K] (split), [BV] (quad) or [K, BV] (frag)}}
func.func private @bad_frag(!tile.tile<[K], f32, reg, frag>)

// -----

// expected-error @+1 {{a shared tile is [K], [C] or [C, C] f32, or [C, K]}}
func.func private @bad_smem(!tile.tile<[K, BV], f32, smem, row>)

// -----

// expected-error @+1 {{unknown tile extent 'T'; expected K, V, BV or C}}
func.func private @bad_extent(!tile.tile<[T], f32, reg, split>)

// -----

// expected-error @+1 {{a register tile holds f32, got 'bf16'}}
func.func private @bad_dtype(!tile.tile<[K], bf16, reg, split>)

// -----

func.func @view_outside_loop() {
  // expected-error @+1 {{a view at bhv must be inside tile.for_value_tiles}}
  %0 = tile.view "state" at bhv : !tile.tile<[K, V], f32, global, row>
  return
}

// -----

func.func @load_shape() {
  tile.for_value_tiles {
    %0 = tile.view "state" at bhv : !tile.tile<[K, V], f32, global, row>
    // expected-error @+1 {{gives !tile.tile<[K, BV], f32, reg, frag>, not !tile.tile<[K], f32, reg, split>}}
    %1 = tile.load %0 : !tile.tile<[K, V], f32, global, row> -> !tile.tile<[K], f32, reg, split>
  }
  return
}

// -----

func.func @mixed_elementwise(%a: !tile.tile<[K], f32, reg, split>, %b: !tile.tile<[BV], f32, reg, quad>) {
  // expected-error @+1 {{operand type !tile.tile<[BV], f32, reg, quad> differs from the result type}}
  %0 = tile.add %a, %b : !tile.tile<[K], f32, reg, split>, !tile.tile<[BV], f32, reg, quad> -> !tile.tile<[K], f32, reg, split>
  return
}

// -----

func.func @contract_needs_smem(%s: !tile.tile<[K, BV], f32, reg, frag>, %x: !tile.tile<[K], f32, reg, split>) {
  // expected-error @+1 {{vector must be a [K] shared tile}}
  %0 = tile.contract %s, %x : !tile.tile<[K, BV], f32, reg, frag>, !tile.tile<[K], f32, reg, split> -> !tile.tile<[BV], f32, reg, quad>
  return
}

// -----

func.func @outer_needs_quad(%s: !tile.tile<[K, BV], f32, reg, frag>, %a: !tile.tile<[K], f32, smem, row>, %e: !tile.tile<[K], f32, reg, split>) {
  // expected-error @+1 {{column vector must be a register tile with layout quad}}
  %0 = tile.outer_add %s, %a, %e : !tile.tile<[K, BV], f32, reg, frag>, !tile.tile<[K], f32, smem, row>, !tile.tile<[K], f32, reg, split>
  return
}

// -----

func.func @store_to_reg(%x: !tile.tile<[K], f32, reg, split>) {
  // expected-error @+1 {{destination must be a global view}}
  tile.store %x, %x : !tile.tile<[K], f32, reg, split>, !tile.tile<[K], f32, reg, split>
  return
}

// -----

// Chunk-role tiles: a shared [C, K] tile may hold 16-bit rows; [C] vectors are f32.
// expected-error @+1 {{a shared tile is [K], [C] or [C, C] f32, or [C, K]}}
func.func private @bad_vec(!tile.tile<[C], bf16, smem, row>)

// -----

func.func @bad_cumsum_reuse() {
  %g = tile.chunk_rows "g" at value_head : !tile.tile<[C], f32, smem, row>
  // expected-error @+1 {{works in place: its operand must not be used after it (use the result)}}
  %G = tile.cumsum %g {scale = 1.0 : f32} : !tile.tile<[C], f32, smem, row>
  %b = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
  %s = tile.load_scalar "scale" at none : f32
  tile.store_token_record %g, %b, %b, %s into "tok" : !tile.tile<[C], f32, smem, row>
  return
}

// -----

func.func @bad_region() {
  %t = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
  %G = tile.chunk_rows "g" at value_head : !tile.tile<[C, K], f32, smem, row>
  // expected-error @+1 {{writes workspace region "aqk"; expected one of "opq", "opk", "opw"}}
  tile.store_gated_rows %t, %G into "aqk" : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C, K], f32, smem, row>
  return
}

// -----

func.func @bad_products() {
  %k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
  %r = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
  // expected-error @+1 {{has one result per part but the last (1), got 0}}
  tile.lower_products rows(%k, %k) cols %k row_factors(%r, %r) (%r, %r) col_factor %r into "aqk" : (!tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>) -> ()
  return
}

// -----

// A [C, K] gate scales the operands in place: a later reader of one is an error.
func.func @products_operand_used_after_channel_gate() {
  %q = tile.chunk_rows "q" at key_head : !tile.tile<[C, K], bf16, smem, row>
  %k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
  %G = tile.chunk_rows "g" at value_head : !tile.tile<[C, K], f32, smem, row>
  %r = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
  // expected-error @+1 {{overwrites its column operand (a [C, K] gate scales it in place): it must not be used after this op}}
  tile.lower_products rows(%q) cols %k row_factors(%r) (%r) col_factor %r gate %G into "aqk" : (!tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C, K], f32, smem, row>) -> ()
  tile.store_gated_rows %k, %G into "opw" : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C, K], f32, smem, row>
  return
}

// -----

func.func @bad_scan() {
  %k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
  %s0 = tile.workspace_rows "pst" : !tile.tile<[K], f32, smem, row>
  %a = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
  // expected-error @+1 {{readout soft_power needs `base` and `eps`, and only it takes them}}
  %p = tile.channel_scan %k, %s0, %a, %a apply %k readout soft_power : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[K], f32, smem, row>, !tile.tile<[C], f32, smem, row> -> !tile.tile<[C, K], bf16, smem, row>
  return
}

// -----

func.func @bad_workspace() {
  // expected-error @+1 {{reads workspace region "tok"; expected "pcoef" or "pst"}}
  %s0 = tile.workspace_rows "tok" : !tile.tile<[K], f32, smem, row>
  return
}

// -----

// The loop's reads are issued ahead of the function's first op, so a tensor it reads may not be written
// before the loop.
func.func @read_ahead_written_before(%x: !tile.tile<[K], f32, reg, split>) {
  %0 = tile.view "g" at bh : !tile.tile<[K], f32, global, row>
  tile.store %x, %0 : !tile.tile<[K], f32, reg, split>, !tile.tile<[K], f32, global, row>
  // expected-error @+1 {{reads 'g' ahead of its body (tile.for_value_tiles prefetch), so it may write it only through a view at bhv inside the body, not at bh outside the body}}
  tile.for_value_tiles {
    %1 = tile.load_scalar "g" at bhv : f32
  }
  return
}

// -----

// Inside the body a tensor it reads is written only after its reads (the read of the tile goes ahead).
func.func @read_ahead_written_first(%x: !tile.tile<[K, BV], f32, reg, frag>) {
  // expected-error @+1 {{writes 'state' before reading it in the same tile}}
  tile.for_value_tiles {
    %0 = tile.view "state" at bhv : !tile.tile<[K, V], f32, global, row>
    tile.store %x, %0 : !tile.tile<[K, BV], f32, reg, frag>, !tile.tile<[K, V], f32, global, row>
    %1 = tile.load %0 : !tile.tile<[K, V], f32, global, row> -> !tile.tile<[K, BV], f32, reg, frag>
  }
  return
}

// -----

// A decode's launch bound (tile.min_ctas_per_sm): one CTA count per key width, each in [1, 16].
// expected-error @+1 {{tile.min_ctas_per_sm holds 0 CTAs per SM; expected 1 to 16 (CTAs of 128 threads that fit one SM)}}
func.func @zero_ctas() attributes {tile.grid = "key_head", tile.min_ctas_per_sm = array<i32: 4, 0, 2>, tile.role = "decode", tile.value_tile = 32 : i64} {
  return
}

// -----

// expected-error @+1 {{tile.min_ctas_per_sm holds 17 CTAs per SM; expected 1 to 16}}
func.func @too_many_ctas() attributes {tile.grid = "key_head", tile.min_ctas_per_sm = array<i32: 17, 3, 2>, tile.role = "decode", tile.value_tile = 32 : i64} {
  return
}

// -----

// expected-error @+1 {{tile.min_ctas_per_sm must be array<i32: dense, padded, wide> (CTAs per SM for K = KP <= 128, K < KP <= 128 and KP > 128), got array<i32: 4, 3>}}
func.func @two_widths() attributes {tile.grid = "key_head", tile.min_ctas_per_sm = array<i32: 4, 3>, tile.role = "decode", tile.value_tile = 32 : i64} {
  return
}

// -----

// expected-error @+1 {{tile.min_ctas_per_sm must be array<i32: dense, padded, wide>}}
func.func @not_an_array() attributes {tile.grid = "key_head", tile.min_ctas_per_sm = 4 : i32, tile.role = "decode", tile.value_tile = 32 : i64} {
  return
}

// -----

// expected-error @+1 {{tile.min_ctas_per_sm belongs on a decode tile function (tile.role = "decode")}}
func.func @not_decode() attributes {tile.grid = "chunk", tile.min_ctas_per_sm = array<i32: 4, 3, 2>, tile.role = "chunk_local"} {
  return
}

// -----

// tile.launch_features: a DeviceFeatures.h FeatureSet, 7 codes, the clamp only with hypergrad_ogd.
// expected-error @+1 {{tile.launch_features must be array<i32: decay, gain, precond, side, source, solve, clamp[, write_key]> (DeviceFeatures.h FeatureSet), got array<i32: 1, 1, 0, 0, 0, 1>}}
func.func @six_features() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 0, 0, 0, 1>, tile.role = "chunk_local"} {
  return
}

// -----

// expected-error @+1 {{tile.launch_features: decay is 3; expected 0 to 2 (DeviceFeatures.h FeatureSet)}}
func.func @bad_decay() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 3, 1, 0, 0, 0, 1, 0>, tile.role = "chunk_local"} {
  return
}

// -----

// expected-error @+1 {{tile.launch_features: clamp is 1 without a hypergrad_ogd preconditioner (precond 1, source 1)}}
func.func @clamp_without_hypergrad() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 1>, tile.role = "chunk_local"} {
  return
}

// -----

// tile/reduce.cuh reduces one or two vectors per exchange.
func.func @reduce_three(%a: !tile.tile<[K], f32, reg, split>) {
  // expected-error @+1 {{takes one or two operands, not 3}}
  %0:3 = tile.reduce_sum %a, %a, %a : !tile.tile<[K], f32, reg, split>, !tile.tile<[K], f32, reg, split>, !tile.tile<[K], f32, reg, split> -> f32, f32, f32
  return
}

// -----

func.func @reduce_result_count(%a: !tile.tile<[K], f32, reg, split>) {
  // expected-error @+1 {{has 1 results for 2 operands (one sum per operand)}}
  %0 = tile.reduce_sum %a, %a : !tile.tile<[K], f32, reg, split>, !tile.tile<[K], f32, reg, split> -> f32
  return
}
