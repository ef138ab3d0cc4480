// The verifiers of the row maps (several steps per token, docs/math.md §3.7): tile.chunk_rows takes row_steps
// with row_phase, tile.state_walk row_steps with query_phase and output_phase; n in 2..4, phases below n.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

func.func @rows_steps_without_phase() {
  // expected-error @+1 {{row_steps and row_phase go together}}
  %q = tile.chunk_rows "q" at key_head {row_steps = 2 : i64} : !tile.tile<[C, K], bf16, smem, row>
  return
}

// -----

func.func @rows_one_step() {
  // expected-error @+1 {{row_steps is 1; expected 2..4 rows per token}}
  %g = tile.chunk_rows "g" at value_head {row_steps = 1 : i64, row_phase = 0 : i64} : !tile.tile<[C], f32, smem, row>
  return
}

// -----

func.func @rows_phase_past_steps() {
  // expected-error @+1 {{row_phase is 3; expected 0..2}}
  %q = tile.chunk_rows "q" at key_head {row_steps = 3 : i64, row_phase = 3 : i64} : !tile.tile<[C, K], bf16, smem, row>
  return
}

// -----

func.func @walk_map_incomplete() {
  // expected-error @+1 {{row_steps, query_phase and output_phase go together (the row map of q and o)}}
  tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_output, row_steps = 2 : i64, query_phase = 1 : i64}
  return
}

// -----

func.func @walk_output_phase_past_steps() {
  // expected-error @+1 {{output_phase is 2; expected 0..1}}
  tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_output, row_steps = 2 : i64, query_phase = 1 : i64, output_phase = 2 : i64}
  return
}

// -----

func.func @walk_map_of_gated_query() {
  // expected-error @+1 {{maps the rows of the query, which must then be the input "q" (got "opq")}}
  tile.state_walk start argument query "opq" write_key "opw" read_key "opk" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry columns columns "pdec" {write_output, row_steps = 2 : i64, query_phase = 1 : i64, output_phase = 1 : i64}
  return
}

// -----

func.func @walk_map_without_output() {
  // expected-error @+1 {{maps the rows of q and o but writes no o}}
  tile.state_walk start zero query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform end_region "seg_ext" {row_steps = 2 : i64, query_phase = 1 : i64, output_phase = 1 : i64}
  return
}
