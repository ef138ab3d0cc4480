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
