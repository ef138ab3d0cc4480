// The verifier of tile.state_walk: operand sources, and attributes that must agree with one another.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

func.func @bad_query() {
  // expected-error @+1 {{query reads "k"; expected one of "q", "opq"}}
  tile.state_walk start argument query "k" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none {write_output}
  return
}

// -----

func.func @residual_without_solve() {
  // expected-error @+1 {{value_form residual_lower needs read_key and solve}}
  tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" readout "aqk" value_form residual_lower carry none {write_output}
  return
}

// -----

func.func @scaled_with_read_key() {
  // expected-error @+1 {{value_form scaled takes no read_key and solve}}
  tile.state_walk start argument query "q" write_key "k" read_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none {write_output}
  return
}

// -----

func.func @columns_without_vector() {
  // expected-error @+1 {{carry columns needs columns (the per-chunk [K] carry vector)}}
  tile.state_walk start argument query "opq" write_key "opw" values "v" record "tok" readout "aqk" value_form scaled carry columns {write_output}
  return
}

// -----

func.func @bad_columns() {
  // expected-error @+1 {{columns reads "tok"; expected one of "pdec"}}
  tile.state_walk start argument query "opq" write_key "opw" values "v" record "tok" readout "aqk" value_form scaled carry columns columns "tok" {write_output}
  return
}

// -----

func.func @identity_with_output() {
  // expected-error @+1 {{start identity (a transition product) has no read-out: write_output must be absent}}
  tile.state_walk start identity query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_output, write_final, zero_values}
  return
}

// -----

func.func @writes_nothing() {
  // expected-error @+1 {{writes nothing: set write_output, write_final or end_region}}
  tile.state_walk start zero query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none
  return
}

// -----

// The walks of the sequence-parallel state pass parse and verify: a segment's end state from a zero start
// (no output), a transition product from the identity, the corrected walk and the fold.
func.func @segment_walks() {
  tile.state_walk start zero query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform end_region "seg_ext"
  tile.state_walk start identity query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform end_region "seg_trans" {zero_values}
  tile.state_walk start region query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform start_region "seg_start" {write_output}
  tile.state_fold trans "seg_trans" ext "seg_ext" start "seg_start" {write_final}
  return
}

// -----

func.func @identity_without_zero_values() {
  // expected-error @+1 {{start identity and zero_values go together}}
  tile.state_walk start identity query "q" write_key "k" read_key "k" values "v" record "tok" solve "tb" readout "aqk" value_form residual_lower carry uniform {write_final}
  return
}

// -----

func.func @region_without_name() {
  // expected-error @+1 {{start region needs start_region}}
  tile.state_walk start region query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none {write_output}
  return
}

// -----

func.func @trans_region_of_a_value_walk() {
  // expected-error @+1 {{end_region reads "seg_trans"; expected one of "seg_ext"}}
  tile.state_walk start zero query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none end_region "seg_trans"
  return
}

// -----

func.func @fold_region() {
  // expected-error @+1 {{ext reads "seg_start"; expected one of "seg_ext"}}
  tile.state_fold trans "seg_trans" ext "seg_start" start "seg_start"
  return
}

// -----

func.func @scan_without_rescale() {
  // expected-error @+1 {{has scan or producer attributes without rescale}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none producer_warps 4 registers [224, 56] {write_output}
  return
}

// -----

func.func @rescale_without_producer() {
  // expected-error @+1 {{rescale needs producer_warps and registers}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale write_key scan "k" from "pst" readout clamped_post {write_output}
  return
}

// -----

func.func @rescale_scans_the_query() {
  // expected-error @+1 {{scan_rows reads "q"; expected one of "k"}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale write_key scan "q" from "pst" readout clamped_post producer_warps 4 registers [224, 56] {write_output}
  return
}

// -----

func.func @soft_power_without_base() {
  // expected-error @+1 {{scan_readout soft_power needs scan_base and scan_eps}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale query scan "k" from "pst" readout soft_power producer_warps 4 registers [224, 56] {scan_eps = 1.0e-6 : f32, write_output}
  return
}

// -----

func.func @clamped_with_center() {
  // expected-error @+1 {{scan_readout clamped_pre takes no scan_base, scan_eps or center}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale write_key scan "k" from "pst" readout clamped_pre center "precond_center" producer_warps 4 registers [224, 56] {write_output}
  return
}

// -----

func.func @query_rescale_without_output() {
  // expected-error @+1 {{rescales the query of a walk without write_output}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale query scan "k" from "pst" readout clamped_post producer_warps 4 registers [224, 56] {write_final}
  return
}

// -----

func.func @partial_warpgroup() {
  // expected-error @+1 {{producer_warps 2: expected 4, 8, 12 or 16 (whole warpgroups)}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale write_key scan "k" from "pst" readout clamped_post producer_warps 2 registers [224, 56] {write_output}
  return
}

// -----

func.func @bad_register_budget() {
  // expected-error @+1 {{registers: expected [consumer, producer] per-thread budgets, multiples of 8 in [24, 256]}}
  tile.state_walk start argument query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry none rescale write_key scan "k" from "pst" readout clamped_post producer_warps 4 registers [224, 50] {write_output}
  return
}
