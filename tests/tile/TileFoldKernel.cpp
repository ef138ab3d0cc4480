// The fold kernel of TileFoldEmuCheck.cpp, compiled with tests/emu/emu_prelude.h force-included (CMakeLists.txt)
// so that runtime/device/dgps/tile/state_fold.cuh runs on the CPU emulator. The block decomposition is the one
// the runtime will launch: block = (n · HV + hv) · VT + vt.
#include "TileFoldKernel.h"

#include "dgps/tile/state_fold.cuh"

namespace dgps_fold_check {

int64_t firstSlot(const FoldArgs& a, int64_t n) {
  return dgps::tile::first_segment_slot(a.cu, n, a.seqLen, a.C, a.L);
}

int64_t segmentCount(const FoldArgs& a, int64_t n) {
  return dgps::tile::segment_count(a.cu != nullptr ? a.cu[n + 1] - a.cu[n] : a.seqLen, a.C, a.L);
}

int64_t slotBound(const FoldArgs& a, int64_t T) { return dgps::tile::segment_slots(a.cu != nullptr, a.N, T, a.C, a.L); }

void foldKernel(const FoldArgs& a) {
  namespace dev = dgps::dev;
  const int64_t VT = (a.V + kFoldBV - 1) / kFoldBV, b = dev::block_x();
  const int64_t vt = b % VT, nh = b / VT, hv = nh % a.HV, n = nh / a.HV;
  float* const X = reinterpret_cast<float*>(dev::dyn_smem());
  float* const Y = X + a.K * kFoldBV;
  dgps::tile::state_fold<kFoldBV>(X, Y, a.trans, a.ext, a.init, a.start, a.final, n, firstSlot(a, n),
                                  segmentCount(a, n), hv, a.HV, a.K, a.V, (int)vt * kFoldBV, dev::tid(),
                                  dev::nthreads());
}

}  // namespace dgps_fold_check
