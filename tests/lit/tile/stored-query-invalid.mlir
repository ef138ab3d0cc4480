// The stored query of a query-side preconditioner (docs/architecture.md "The write key: stored or rebuilt") as the
// verifiers hold it: the walk's query_form agrees with its rescale and its query's source, tile.launch_features'
// write_key entry is one a query-side preconditioner can take (0 or 1, scalar or no decay), and each role's body
// agrees with it (a chunk_local that should store P ⊙ q holds the store into "pwq", a walk that writes o takes the
// form its role is given).
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

// The stored query without the chunk_local store: the walks would read a region nothing writes.
// expected-error @+1 {{tile.launch_features: write_key is 1 (chunk_local stores the preconditioned query) but the function has no tile.store_rows into "pwq"}}
func.func @atq_chunk_local() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0, 1>, tile.role = "chunk_local"} {
  return
}

// -----

// A store the features do not ask for: the layout has no pwq region.
!bf16_ck = !tile.tile<[C, K], bf16, smem, row>
// expected-error @+1 {{tile.launch_features: write_key is 0 (the walks rebuild the preconditioned query) but the function has a tile.store_rows into "pwq"}}
func.func @atq_chunk_local() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0>, tile.role = "chunk_local"} {
  %q = tile.chunk_rows "q" at key_head : !bf16_ck
  tile.store_rows %q into "pwq" : !bf16_ck
  return
}

// -----

// A walk that says stored where chunk_local does not store the query (write_key 0).
func.func @atq_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0>, tile.role = "state_output"} {
  // expected-error @+1 {{takes the stored query where tile.launch_features (write_key 0) gives this state_output walk the rebuilt one}}
  tile.state_walk start argument query "pwq" as stored write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

// A walk that rebuilds where the features give it the stored query (write_key 1).
func.func @atq_segment_state_output() attributes {tile.grid = "segment", tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0, 1>, tile.role = "segment_state_output"} {
  // expected-error @+1 {{takes the rebuilt query where tile.launch_features (write_key 1) gives this segment_state_output walk the stored one}}
  tile.state_walk start region query "q" as rebuilt write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform start_region "seg_start" rescale query scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
  return
}

// -----

// write_key 2 is the write key's (segment walks only); the segment summaries read no query.
// expected-error @+1 {{write_key 2 (stored for the segment walks only) with a query-side preconditioner}}
func.func @atq_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 1, 1, 1, 1, 0, 1, 0, 2>, tile.role = "state_output"} {
  return
}

// -----

// Per-channel decay: no stored query (opq would have to carry it).
// expected-error @+1 {{write_key is 1 with a query-side preconditioner and per-channel decay}}
func.func @pkdaq_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 2, 1, 1, 1, 0, 1, 0, 1>, tile.role = "state_output"} {
  return
}

// -----

func.func @stored_with_rescale() {
  // expected-error @+1 {{query_form stored has rescale query: a stored query is loaded as it is}}
  tile.state_walk start argument query "pwq" as stored write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform rescale query scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
  return
}

// -----

func.func @stored_raw_query() {
  // expected-error @+1 {{query_form stored reads query "q"; expected "pwq"}}
  tile.state_walk start argument query "q" as stored write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

func.func @pwq_without_form() {
  // expected-error @+1 {{reads the stored query "pwq" without query_form stored}}
  tile.state_walk start argument query "pwq" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

func.func @rebuilt_without_rescale() {
  // expected-error @+1 {{query_form rebuilt needs rescale query}}
  tile.state_walk start argument query "q" as rebuilt write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

func.func @form_without_output() {
  // expected-error @+1 {{has a query_form but writes no o, which is the query's only reader}}
  tile.state_walk start zero query "pwq" as stored write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform end_region "seg_ext" {}
  return
}
