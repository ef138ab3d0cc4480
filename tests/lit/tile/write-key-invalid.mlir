// The write-key decision (docs/architecture.md "The write key: stored or rebuilt") as the verifiers hold it: the
// walk's write_key_form agrees with its rescale and its write key's source, tile.launch_features' write_key entry
// is one a key-side preconditioner can take, and each role's body agrees with that entry (a chunk_local that
// should store P ⊙ k holds the store, a walk takes the form its role is given).
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

// The stored key without the chunk_local store: the walks would read a region nothing writes.
// expected-error @+1 {{tile.launch_features: write_key is 1 (chunk_local stores the preconditioned write key) but the function has no tile.store_rows into "pwk"}}
func.func @pgdn_chunk_local() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0, 1>, tile.role = "chunk_local"} {
  return
}

// -----

// Per-channel decay: the stored key is the opw store of the scanned key; a chunk_local without any opw store fails.
// expected-error @+1 {{tile.launch_features: write_key is 1 (chunk_local stores the preconditioned write key) but the function has no tile.store_gated_rows into "opw" of the scanned key (P ⊙ k)}}
func.func @pkda_chunk_local() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 2, 1, 1, 0, 0, 1, 0, 1>, tile.role = "chunk_local"} {
  return
}

// -----

// A store the features do not ask for: the layout has no pwk region.
!bf16_ck = !tile.tile<[C, K], bf16, smem, row>
// expected-error @+1 {{tile.launch_features: write_key is 0 (the walks rebuild the preconditioned write key) but the function has a tile.store_rows into "pwk"}}
func.func @pgdn_chunk_local() attributes {tile.grid = "chunk", tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0>, tile.role = "chunk_local"} {
  %k = tile.chunk_rows "k" at key_head : !bf16_ck
  tile.store_rows %k into "pwk" : !bf16_ck
  return
}

// -----

// A walk that rebuilds where the features give state_output the stored key (write_key 1).
func.func @pgdn_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0, 1>, tile.role = "state_output"} {
  // expected-error @+1 {{takes the rebuilt write key where tile.launch_features (write_key 1) gives a state_output walk the stored one}}
  tile.state_walk start argument query "q" write_key "k" as rebuilt read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform rescale write_key scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
  return
}

// -----

// write_key 2: the segment walks load the stored key, state_output rebuilds it; a stored state_output walk fails.
func.func @pgdn_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 1, 1, 1, 0, 0, 1, 0, 2>, tile.role = "state_output"} {
  // expected-error @+1 {{takes the stored write key where tile.launch_features (write_key 2) gives a state_output walk the rebuilt one}}
  tile.state_walk start argument query "q" write_key "pwk" as stored read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

// write_key 2 with per-channel decay: opw is read by every walk, so state_output cannot rebuild it.
// expected-error @+1 {{write_key 2 (stored for the segment walks only) with per-channel decay}}
func.func @pkda_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 2, 1, 1, 0, 0, 1, 0, 2>, tile.role = "state_output"} {
  return
}

// -----

// No preconditioner, no write key or query to store.
// expected-error @+1 {{write_key is 1 without a preconditioner (precond 1)}}
func.func @gdn_state_output() attributes {tile.grid = "value_tile", tile.launch_features = array<i32: 1, 1, 0, 0, 0, 1, 0, 1>, tile.role = "state_output"} {
  return
}

// -----

func.func @stored_with_rescale() {
  // expected-error @+1 {{write_key_form stored has rescale write_key: a stored write key is loaded as it is}}
  tile.state_walk start argument query "q" write_key "pwk" as stored read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform rescale write_key scan "k" from "pst" readout soft_power center "precond_center" producer_warps 4 registers [224, 56] {scan_base = 1.500000e+00 : f32, scan_eps = 9.99999997E-7 : f32, write_final, write_output}
  return
}

// -----

func.func @stored_raw_key() {
  // expected-error @+1 {{write_key_form stored reads write key "k"; expected "pwk" or "opw"}}
  tile.state_walk start argument query "q" write_key "k" as stored read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

func.func @pwk_without_form() {
  // expected-error @+1 {{reads the stored write key "pwk" without write_key_form stored}}
  tile.state_walk start argument query "q" write_key "pwk" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

func.func @rebuilt_without_rescale() {
  // expected-error @+1 {{write_key_form rebuilt needs rescale write_key}}
  tile.state_walk start argument query "q" write_key "k" as rebuilt read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final, write_output}
  return
}

// -----

func.func @store_rows_elsewhere() {
  %k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
  // expected-error @+1 {{writes workspace region "opw"; expected one of "pwk", "pwq"}}
  tile.store_rows %k into "opw" : !tile.tile<[C, K], bf16, smem, row>
  return
}
