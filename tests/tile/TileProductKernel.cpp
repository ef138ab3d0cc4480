// The product kernels of TileProductEmuCheck.cpp, compiled with tests/emu/emu_prelude.h force-included
// (CMakeLists.txt) so that the tile headers run on the CPU emulator. Each host entry launches one CTA whose
// threads stage the operands into shared memory (real channels only), run the header, and write the result
// from its register fragments (accumulator layout: element e of fragment nt at row g + 8·(e >> 1), column
// 8·nt + 2t + (e & 1), g = lane / 4, t = lane % 4, rows offset by 16 per warp).
#include "TileProductKernel.h"

#include <cstdio>
#include <functional>
#include <type_traits>

#include "dgps/tile/lower_product.cuh"
#include "dgps/tile/state_rank_update.cuh"
#include "dgps/tile/state_rows_product.cuh"

namespace dgps_product_check {
namespace {

namespace dev = dgps::dev;
namespace t = dgps::tile;

constexpr int pad16(int k) { return (k + 15) / 16 * 16; }

/// Row of element e of accumulator fragment nt for this lane (within the warp's 16 rows), and its column.
int fragRow(int e) { return (dev::lane() >> 2) + 8 * (e >> 1); }
int fragCol(int nt, int e) { return 8 * nt + 2 * (dev::lane() & 3) + (e & 1); }

bool run(const std::function<void()>& kernel, unsigned threads, size_t smem, char* err, size_t errlen) {
  return dgps_emu::launch(kernel, 1, threads, smem, err, errlen);
}

template <int K>
bool mmaBlockK(const uint16_t* rows, const uint16_t* cols, float* out, char* err, size_t errlen) {
  constexpr int PITCH = pad16(K) + 8;
  return run(
      [&] {
        uint16_t* sR = reinterpret_cast<uint16_t*>(dev::dyn_smem());
        uint16_t* sC = sR + 16 * PITCH;
        for (int e = dev::tid(); e < 16 * K; e += dev::nthreads()) {
          sR[(e / K) * PITCH + e % K] = rows[e];
          sC[(e / K) * PITCH + e % K] = cols[e];
        }
        dev::sync_threads();
        float acc[2][4] = {};
        t::mma_block<K, PITCH>(acc, sR, 0, sC, 0);
        for (int nt = 0; nt < 2; ++nt)
          for (int e = 0; e < 4; ++e) out[fragRow(e) * 16 + fragCol(nt, e)] = acc[nt][e];
      },
      32, 2 * 16 * PITCH * 2, err, errlen);
}

template <int K, int C, bool kWG>
bool stateTimesRowsK(const float* S, const uint16_t* A, const uint16_t* B, float* XA, float* XB, char* err,
                     size_t errlen) {
  constexpr int KP = pad16(K), NW = kWG ? 4 : 1;
  return run(
      [&] {
        uint16_t* sA = reinterpret_cast<uint16_t*>(dev::dyn_smem());
        uint16_t* sB = sA + C * KP;
        // the warpgroup path multiplies the pad channels by a zero A half: its loaders zero them
        for (int e = dev::tid(); e < C * KP; e += dev::nthreads()) {
          const int j = e / KP, d = e % KP;
          if (d < K || kWG) {
            sA[dev::core_off<C>(j, d)] = d < K ? A[j * K + d] : 0;
            sB[dev::core_off<C>(j, d)] = d < K ? B[j * K + d] : 0;
          }
        }
        dev::sync_threads();
        const int v0 = 16 * dev::warp();
        float Sf[t::state_frags(K)][4];
        for (int nt = 0; nt < t::state_frags(K); ++nt)
          for (int e = 0; e < 4; ++e) Sf[nt][e] = S[(v0 + fragRow(e)) * K + fragCol(nt, e)];
        float xa[C / 8][4], xb[C / 8][4];
        t::state_times_rows<C, KP, kWG, true>(xa, xb, Sf, sA, sB);
        for (int nt = 0; nt < C / 8; ++nt)
          for (int e = 0; e < 4; ++e) {
            XA[(v0 + fragRow(e)) * C + fragCol(nt, e)] = xa[nt][e];
            XB[(v0 + fragRow(e)) * C + fragCol(nt, e)] = xb[nt][e];
          }
      },
      32 * NW, 2 * C * KP * 2, err, errlen);
}

template <int K>
bool rankUpdateK(const float* S0, const float* N, const float* w, const uint16_t* Kw, float* S1, char* err,
                 size_t errlen) {
  constexpr int C = 32, KP = pad16(K);
  return run(
      [&] {
        uint16_t* sKw = reinterpret_cast<uint16_t*>(dev::dyn_smem());
        float* sw = reinterpret_cast<float*>(sKw + C * KP);
        for (int e = dev::tid(); e < C * K; e += dev::nthreads()) sKw[dev::core_off<C>(e / K, e % K)] = Kw[e];
        for (int j = dev::tid(); j < C; j += dev::nthreads()) sw[j] = w[j];
        dev::sync_threads();
        float Sf[t::state_frags(K)][4], Nf[C / 8][4];
        uint32_t NA[C / 16][4];
        for (int nt = 0; nt < t::state_frags(K); ++nt)
          for (int e = 0; e < 4; ++e) Sf[nt][e] = S0[fragRow(e) * K + fragCol(nt, e)];
        for (int nt = 0; nt < C / 8; ++nt)
          for (int e = 0; e < 4; ++e) Nf[nt][e] = N[fragRow(e) * C + fragCol(nt, e)];
        t::state_rank_update<C, KP, 1>(Sf, NA, Nf, sw, sKw);
        for (int nt = 0; nt < t::state_frags(K); ++nt)
          for (int e = 0; e < 4; ++e) S1[fragRow(e) * K + fragCol(nt, e)] = Sf[nt][e];
      },
      32, C * KP * 2 + C * 4, err, errlen);
}

/// Calls f.template operator()<K>() for the runtime K, one of kDims.
template <class F>
bool byDim(int K, char* err, size_t errlen, F&& f) {
  switch (K) {
    case 24: return f(std::integral_constant<int, 24>{});
    case 120: return f(std::integral_constant<int, 120>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: std::snprintf(err, errlen, "no product kernel instantiated for K = %d", K); return false;
  }
}

}  // namespace

bool mmaBlock(int K, const uint16_t* rows, const uint16_t* cols, float* out, char* err, size_t errlen) {
  return byDim(K, err, errlen, [&](auto k) { return mmaBlockK<decltype(k)::value>(rows, cols, out, err, errlen); });
}

bool stateTimesRows(int K, bool wg, const float* S, const uint16_t* A, const uint16_t* B, float* XA, float* XB,
                    char* err, size_t errlen) {
  return byDim(K, err, errlen, [&](auto k) {
    constexpr int KK = decltype(k)::value;
    return wg ? stateTimesRowsK<KK, 64, true>(S, A, B, XA, XB, err, errlen)
              : stateTimesRowsK<KK, 32, false>(S, A, B, XA, XB, err, errlen);
  });
}

bool rankUpdate(int K, const float* S0, const float* N, const float* w, const uint16_t* Kw, float* S1, char* err,
                size_t errlen) {
  return byDim(K, err, errlen, [&](auto k) { return rankUpdateK<decltype(k)::value>(S0, N, w, Kw, S1, err, errlen); });
}

}  // namespace dgps_product_check
