// tile.workspace errors: one per declaration fault, each naming the region (and for a use, the op and function).
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

// A role names a region the declaration lacks.
module attributes {tile.workspace = [{name = "psum", bytes = 4, size = ["slots", "H", "K"]},
                                     {name = "pgam", bytes = 4, size = ["slots", "H"]}]} {
  func.func @scan() {
    // expected-error @+1 {{in @scan writes the workspace region "pst", which the module's tile.workspace does not declare}}
    tile.chunk_affine_scan start "initial_precond_state" decay "pgam" step "psum" into "pst"
    return
  }
}

// -----

// A declared region no role writes.
// expected-error @+1 {{tile.workspace declares region "psum", which no tile function writes}}
module attributes {tile.workspace = [{name = "pst", bytes = 4, size = ["slots", "H", "K"]},
                                     {name = "psum", bytes = 4, size = ["slots", "H", "K"]},
                                     {name = "pgam", bytes = 4, size = ["slots", "H"]}]} {
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

// A declared region no role reads.
// expected-error @+1 {{tile.workspace declares region "pgam", which no tile function reads}}
module attributes {tile.workspace = [{name = "pgam", bytes = 4, size = ["slots", "H"]}]} {
  func.func @summary() {
    %a = tile.chunk_fill 1.0 : !tile.tile<[C], f32, smem, row>
    tile.store_sum_exp %a into "pgam" : !tile.tile<[C], f32, smem, row>
    return
  }
}

// -----

// expected-error @+1 {{tile.workspace entry 0 ("pgam") has the extent "T", which is neither one of}}
module attributes {tile.workspace = [{name = "pgam", bytes = 4, size = ["slots", "T"]}]} {
}

// -----

// expected-error @+1 {{tile.workspace entry 0 ("pgam") has element bytes 3}}
module attributes {tile.workspace = [{name = "pgam", bytes = 3, size = ["slots", "H"]}]} {
}

// -----

// expected-error @+1 {{tile.workspace entry 0 ("pgam") must start its size with "slots" or "segment_slots"}}
module attributes {tile.workspace = [{name = "pgam", bytes = 4, size = ["H", "slots"]}]} {
}

// -----

// expected-error @+1 {{tile.workspace entry 1 must have exactly the keys name, bytes and size}}
module attributes {tile.workspace = [{name = "pgam", bytes = 4, size = ["slots", "H"]}, {name = "pst", bytes = 4}]} {
}

// -----

// expected-error @+1 {{tile.workspace declares region "pgam" twice (entry 1)}}
module attributes {tile.workspace = [{name = "pgam", bytes = 4, size = ["slots", "H"]},
                                     {name = "pgam", bytes = 4, size = ["slots", "H"]}]} {
}

// -----

// expected-error @+1 {{tile.workspace declares the chunk region "pgam" (entry 1) after a segment region}}
module attributes {tile.workspace = [{name = "seg_ext", bytes = 4, size = ["segment_slots", "HV", "K", "V"]},
                                     {name = "pgam", bytes = 4, size = ["slots", "H"]}]} {
}

// -----

// expected-error @+1 {{tile.workspace must be an array of regions in layout order}}
module attributes {tile.workspace = {name = "pgam"}} {
}

// -----

module {
  // expected-error @+1 {{tile.workspace belongs on the module that holds the package's tile functions}}
  func.func @f() attributes {tile.workspace = []} {
    return
  }
}
