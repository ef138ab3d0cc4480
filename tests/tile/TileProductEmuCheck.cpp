// CPU check of the tensor-core product headers of runtime/device/dgps/tile at key dims that are and are not
// multiples of 16 (TileProductKernel.h kDims: 24 and 120 are 8 mod 16, so the products end in an 8-deep
// mma.m16n8k8 step, or, where K is the N dimension, a lone 8-wide n-tile; 128 is the all-16 path). On the
// emulator of tests/emu, against float64 sums of the same bf16-rounded operands:
//   mma_block (lower_product.cuh)                  16 x 16 block of R·Kcᵀ over K channels
//   state_times_rows (state_rows_product.cuh)      Sᵀ Aᵀ and Sᵀ Bᵀ, mma.sync (C = 32) and warpgroup MMA (C = 64)
//   state_rank_update (state_rank_update.cuh)      Sᵀ + bf16(Nᵀ diag(w)) Kw
// Operands are fresh seeded normals; outputs are NaN-poisoned; shared memory starts as NaN and only the real
// channels are staged (TileProductKernel.h), so a product that touches a pad channel fails. Tolerance 1e-5
// relative to the largest reference entry (f32 accumulation of at most 128 exact bf16 products).
//
//   dgps-tile-product-emu-check
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "TileProductKernel.h"
#include "emu_hooks.h"

namespace {

namespace pc = dgps_product_check;

constexpr double kTol = 1e-5;

/// Round-to-nearest-even bf16 bits of x (finite x).
uint16_t bf16Bits(float x) { return dgps_emu::f32_to_bf16(x); }
double bf16Val(uint16_t h) { return (double)dgps_emu::bf16_to_f32(h); }
double bf16Round(float x) { return bf16Val(bf16Bits(x)); }

struct Draw {
  std::mt19937_64 rng;
  std::normal_distribution<float> normal{0.f, 1.f};
  explicit Draw(std::uint64_t seed) : rng(seed) {}
  std::vector<float> f32(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  }
  std::vector<uint16_t> bf16(size_t n) {
    std::vector<uint16_t> v(n);
    for (uint16_t& x : v) x = bf16Bits(normal(rng));
    return v;
  }
};

/// max |got − want| / max(1e-30, max |want|); infinity on a non-finite entry.
double relErr(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return num / den;
}

std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

bool report(const std::string& what, int K, double err, bool launched, const char* emuErr) {
  const bool ok = launched && err <= kTol;
  if (!launched)
    std::printf("  %-34s K=%-3d emulator error: %s  FAIL\n", what.c_str(), K, emuErr);
  else
    std::printf("  %-34s K=%-3d rel err %.2e (tol %.0e)  %s\n", what.c_str(), K, err, kTol, ok ? "ok" : "FAIL");
  return ok;
}

bool checkMmaBlock(int K, std::uint64_t seed) {
  Draw d(seed);
  const std::vector<uint16_t> R = d.bf16(16 * (size_t)K), Kc = d.bf16(16 * (size_t)K);
  std::vector<float> got = poisoned(256);
  char err[512] = {0};
  const bool launched = pc::mmaBlock(K, R.data(), Kc.data(), got.data(), err, sizeof err);
  std::vector<double> want(256, 0.0);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int c = 0; c < K; ++c) want[i * 16 + j] += bf16Val(R[i * K + c]) * bf16Val(Kc[j * K + c]);
  return report("mma_block", K, launched ? relErr(got, want) : INFINITY, launched, err);
}

bool checkStateTimesRows(int K, bool wg, std::uint64_t seed) {
  const int C = wg ? 64 : 32, Vr = wg ? 64 : 16;
  Draw d(seed);
  const std::vector<float> S = d.f32((size_t)Vr * K);
  const std::vector<uint16_t> A = d.bf16((size_t)C * K), B = d.bf16((size_t)C * K);
  std::vector<float> XA = poisoned((size_t)Vr * C), XB = poisoned((size_t)Vr * C);
  char err[512] = {0};
  const bool launched = pc::stateTimesRows(K, wg, S.data(), A.data(), B.data(), XA.data(), XB.data(), err, sizeof err);
  std::vector<double> wa((size_t)Vr * C, 0.0), wb((size_t)Vr * C, 0.0);
  for (int v = 0; v < Vr; ++v)
    for (int j = 0; j < C; ++j)
      for (int c = 0; c < K; ++c) {
        const double s = bf16Round(S[(size_t)v * K + c]);  // the state enters the tensor cores as bf16
        wa[(size_t)v * C + j] += s * bf16Val(A[(size_t)j * K + c]);
        wb[(size_t)v * C + j] += s * bf16Val(B[(size_t)j * K + c]);
      }
  const double e = launched ? std::max(relErr(XA, wa), relErr(XB, wb)) : INFINITY;
  return report(std::string("state_times_rows ") + (wg ? "(warpgroup MMA)" : "(mma.sync)"), K, e, launched, err);
}

bool checkRankUpdate(int K, std::uint64_t seed) {
  constexpr int C = 32;
  Draw d(seed);
  const std::vector<float> S0 = d.f32(16 * (size_t)K), N = d.f32(16 * (size_t)C), w = d.f32(C);
  const std::vector<uint16_t> Kw = d.bf16((size_t)C * K);
  std::vector<float> S1 = poisoned(16 * (size_t)K);
  char err[512] = {0};
  const bool launched = pc::rankUpdate(K, S0.data(), N.data(), w.data(), Kw.data(), S1.data(), err, sizeof err);
  std::vector<double> want(S0.begin(), S0.end());
  for (int v = 0; v < 16; ++v)
    for (int c = 0; c < K; ++c)
      for (int j = 0; j < C; ++j)
        want[(size_t)v * K + c] += bf16Round(N[(size_t)v * C + j] * w[j]) * bf16Val(Kw[(size_t)j * K + c]);
  return report("state_rank_update", K, launched ? relErr(S1, want) : INFINITY, launched, err);
}

}  // namespace

int main() {
  bool ok = true;
  std::uint64_t seed = 9100;
  for (int K : pc::kDims) {
    ok = checkMmaBlock(K, ++seed) && ok;
    ok = checkStateTimesRows(K, false, ++seed) && ok;
    ok = checkStateTimesRows(K, true, ++seed) && ok;
    ok = checkRankUpdate(K, ++seed) && ok;
  }
  std::printf("%s\n", ok ? "all products match" : "FAILED");
  return ok ? 0 : 1;
}
