// tile.workspace: the package's workspace regions in layout order, declared on the module of its tile functions
// (--dgps-declare-tile-workspace builds it from the regions the ops name) and checked against them: every region a
// role names is declared, every declared region is written by some role and read by some role.
// RUN: %dgps-opt %s -split-input-file | %FileCheck %s --check-prefix=ROUNDTRIP
// RUN: %dgps-opt %s -split-input-file --dgps-declare-tile-workspace | %FileCheck %s --check-prefix=DECLARE

// An ema_sq_squash preconditioner's regions: precond_summary writes psum and pgam, precond_scan reads them and
// writes pst, chunk_local reads pst. Declared in catalog order (pst, psum, pgam), whatever order the roles name
// them in.
// ROUNDTRIP: module attributes {tile.workspace = [{bytes = 4 : i64, name = "pst", size = ["slots", "H", "K"]}, {bytes = 4 : i64, name = "psum", size = ["slots", "H", "K"]}, {bytes = 4 : i64, name = "pgam", size = ["slots", "H"]}]}
// DECLARE: module attributes {tile.workspace = [{bytes = 4 : i64, name = "pst", size = ["slots", "H", "K"]}, {bytes = 4 : i64, name = "psum", size = ["slots", "H", "K"]}, {bytes = 4 : i64, name = "pgam", size = ["slots", "H"]}]}
module attributes {tile.workspace = [{name = "pst", bytes = 4, size = ["slots", "H", "K"]},
                                     {name = "psum", bytes = 4, size = ["slots", "H", "K"]},
                                     {name = "pgam", bytes = 4, size = ["slots", "H"]}]} {
  func.func @summary() {
    %k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
    %a = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
    tile.channel_scan_total %k, %a, %a, %a into "psum" : !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>
    tile.store_sum_exp %a into "pgam" : !tile.tile<[C], f32, smem, row>
    return
  }
  func.func @scan() {
    tile.chunk_affine_scan start "initial_precond_state" decay "pgam" step "psum" into "pst"
    return
  }
  func.func @local() {
    %s0 = tile.workspace_rows "pst" : !tile.tile<[K], f32, smem, row>
    return
  }
}

// -----

// The segmented state pass's regions come last, sized by segment slots; a walk's "q" and "k" are input tensors,
// not regions.
// DECLARE: module attributes {tile.workspace = [{bytes = 2 : i64, name = "aqk", size = ["slots", "HV", "chunk", "chunk"]}, {bytes = 4 : i64, name = "tok", size = ["slots", "HV", "chunk + 1", "8"]}, {bytes = 4 : i64, name = "seg_ext", size = ["segment_slots", "HV", "K", "V"]}, {bytes = 4 : i64, name = "seg_trans", size = ["segment_slots", "HV", "K", "K"]}, {bytes = 4 : i64, name = "seg_start", size = ["segment_slots", "HV", "K", "V"]}]}
module {
  func.func @local() {
    %k = tile.chunk_rows "k" at key_head : !tile.tile<[C, K], bf16, smem, row>
    %r = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
    %s = tile.load_scalar "scale" at none : f32
    tile.store_token_record %r, %r, %r, %s into "tok" : !tile.tile<[C], f32, smem, row>
    tile.lower_products rows(%k) cols %k row_factors(%r) (%r) col_factor %r into "aqk" : (!tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C, K], bf16, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>, !tile.tile<[C], f32, smem, row>) -> ()
    return
  }
  func.func @segment_walks() {
    tile.state_walk start zero query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry uniform end_region "seg_ext"
    tile.state_walk start identity query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry uniform end_region "seg_trans" {zero_values}
    tile.state_walk start region query "q" write_key "k" values "v" record "tok" readout "aqk" value_form scaled carry uniform start_region "seg_start" {write_output}
    tile.state_fold trans "seg_trans" ext "seg_ext" start "seg_start" {write_final}
    return
  }
}
