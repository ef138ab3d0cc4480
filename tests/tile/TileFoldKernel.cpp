// The fold kernel of TileFoldEmuCheck.cpp, compiled with tests/emu/emu_prelude.h force-included (CMakeLists.txt)
// so that runtime/device/dgps/tile/state_fold.cuh runs on the CPU emulator. The block decomposition is the one
// the runtime will launch: block = (n · HV + hv) · VT + vt.
#include "TileFoldKernel.h"

#include "dgps/tile/state_fold.cuh"

namespace dgps_fold_check {

int64_t firstSlot(const FoldArgs& a, int64_t n) {
  return dgps::tile::first_segment_slot(a.cu, n, a.seqLen, a.C, a.L, 1);  // one row per token
}

int64_t segmentCount(const FoldArgs& a, int64_t n) {
  return dgps::tile::segment_count(a.cu != nullptr ? a.cu[n + 1] - a.cu[n] : a.seqLen, a.C, a.L);
}

int64_t slotBound(const FoldArgs& a, int64_t T) { return dgps::tile::segment_slots(a.cu != nullptr, a.N, T, a.C, a.L); }

static_assert(kFoldCols == dgps::tile::kFoldCols && kFoldThreads == dgps::tile::kFoldThreads,
              "TileFoldKernel.h mirrors state_fold.cuh's slab width and thread count");

namespace {
template <int K>
void foldAt(const FoldArgs& a) {
  namespace dev = dgps::dev;
  const int64_t VT = (a.V + kFoldCols - 1) / kFoldCols, b = dev::block_x();
  const int64_t vt = b % VT, nh = b / VT, hv = nh % a.HV, n = nh / a.HV;
  dgps::tile::state_fold<K>(reinterpret_cast<float*>(dev::dyn_smem()), a.trans, a.ext, a.init, a.start, a.final, n,
                            firstSlot(a, n), segmentCount(a, n), hv, a.HV, a.V, (int)vt * kFoldCols, dev::tid());
}
}  // namespace

size_t foldSmemBytes(int K) { return (size_t)(2 * K * (K + 4) + 2 * K * kFoldCols) * sizeof(float); }

bool foldSupports(int K) { return K == 16 || K == 32 || K == 120 || K == 128; }

void foldKernel(const FoldArgs& a) {
  switch (a.K) {  // the kernels compile K as a constant (cfg::K)
    case 16: foldAt<16>(a); break;
    case 32: foldAt<32>(a); break;
    case 120: foldAt<120>(a); break;
    case 128: foldAt<128>(a); break;
    default: break;  // foldSupports is checked before the launch
  }
}

}  // namespace dgps_fold_check
