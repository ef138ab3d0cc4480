// The per-token record of one chunk in device memory: C + 1 rows of 8 floats (launch_rules.h
// the workspace region tok of the compiler's tile.workspace). With per-row vectors a, b, c, log2 gates G (G_last = G_{C-1}) and a uniform s:
//   row i < C: { s·a_i·2^{G_i}, b_i·2^{G_i}, b_i·2^{G_last − G_i}, c_i, e_i, f_i, G_i, 0 }
//   row C:     { 2^{G_last}, 0, 0, 0, 0, 0, 0, 0 }
// e, f default to a, b. Without G every power of 2 is 1 and field 6 is 0.
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// Row i < C of the record (row-local: the tile emitter fuses it into its row loop, chunk_rows.cuh). G_last is
/// read from row C − 1 of G, so G must be complete (published by a barrier) before the loop.
template <int C>
DGPS_DEV void store_token_record(float* out, RowVec a, RowVec b, RowVec c, const RowVec* G, float s,
                                 const RowVec* e, const RowVec* f, int i) {
  const float ai = a[i], bi = b[i], Gi = G ? (*G)[i] : 0.f, GL = G ? (*G)[C - 1] : 0.f;
  const float eg = G ? dev::ex2(Gi) : 1.f;
  const float ew = G ? dev::ex2(GL - Gi) : 1.f;
  // eight 4-byte stores per row: on the H200 the two 16-byte stores per 32-byte row (half a sector each per
  // warp instruction) made deltanet's chunk_local 4% slower than this form
  float* r = out + i * 8;
  r[0] = s * ai * eg;
  r[1] = bi * eg;
  r[2] = bi * ew;
  r[3] = c[i];
  r[4] = e ? (*e)[i] : ai;
  r[5] = f ? (*f)[i] : bi;
  r[6] = Gi;
  r[7] = 0.f;
}

/// Row C of the record, written by the thread that a row loop over C + 1 rows would give it.
template <int C>
DGPS_DEV void store_token_record_last(float* out, const RowVec* G) {
  if (dev::tid() != C % dev::nthreads()) return;
  out[C * 8 + 0] = G ? dev::ex2((*G)[C - 1]) : 1.f;
#pragma unroll
  for (int k = 1; k < 8; ++k) out[C * 8 + k] = 0.f;
}

}  // namespace tile
}  // namespace dgps
