// The emulator's model of the async proxy (emu.cpp Block::async_unfenced): one warpgroup fills a bf16 B tile
// (16 x 32, K-major core matrices) by cp.async and multiplies a random A (64 x 16) by it with wgmma m64n32k16.
//   with fence.proxy.async after the copies: the launch succeeds and D equals A·B computed here in double;
//   without it: the launch fails and names the missing fence.
// A kernel that hands a cp.async tile to warpgroup MMA without the fence reads stale data on the GPU only
// sometimes; this check keeps the emulator able to catch it every time.
//
//   dgps-emu-proxy-check        (DGPS_SEED=N fixes the seed)
#include "emu_prelude.h"
#define DGPS_EMU_WGMMA 1
#include "dgps/device/platform.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

namespace dev = dgps::dev;

constexpr int kM = 64, kN = 32, kK = 16;
constexpr int kLbo = 128, kSbo = 256;  // bytes between core matrices adjacent in K / in N

/// Byte offset of B(k, n) in the no-swizzle K-major core-matrix layout wgmma reads with (kLbo, kSbo).
int coreOffset(int k, int n) { return (k / 8) * kLbo + (n / 8) * kSbo + (n % 8) * 16 + (k % 8) * 2; }

uint16_t toBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return (uint16_t)(u >> 16);  // the drawn values are bf16 already: truncation is exact
}

float fromBf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

struct Problem {
  std::vector<float> A, B;        // A[m][k], B[k][n], bf16 values
  std::vector<uint16_t> Bimage;   // B in shared-memory order (1 KiB)
  std::vector<float> D;           // the kernel's output [m][n], NaN-poisoned before each launch
};

Problem draw(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Problem p;
  p.A.resize(kM * kK);
  p.B.resize(kK * kN);
  p.Bimage.assign(kSbo * (kN / 8) / 2, 0);
  for (float& a : p.A) a = fromBf16(toBf16(u(rng)));
  for (int k = 0; k < kK; ++k)
    for (int n = 0; n < kN; ++n) {
      const float b = fromBf16(toBf16(u(rng)));
      p.B[k * kN + n] = b;
      p.Bimage[coreOffset(k, n) / 2] = toBf16(b);
    }
  return p;
}

uint32_t pack(float lo, float hi) { return (uint32_t)toBf16(lo) | ((uint32_t)toBf16(hi) << 16); }

/// One thread of the warpgroup: 64 threads copy the tile's 64 granules, all multiply their warp's 16 rows.
void kernel(const Problem& p, float* D, bool fence) {
  const int t = dev::tid(), w = t / 32, g = (t % 32) / 4, q = t % 4;
  unsigned char* const sm = dev::dyn_smem();
  if (t < 64) dev::cp_async16(sm + 16 * t, reinterpret_cast<const unsigned char*>(p.Bimage.data()) + 16 * t, true);
  dev::cp_async_commit();
  dev::cp_async_wait<0>();
  if (fence) dev::fence_proxy_async();
  dev::sync_threads();
  const int r0 = 16 * w + g, r1 = r0 + 8;
  const float* A = p.A.data();
  const uint32_t a[4] = {pack(A[r0 * kK + 2 * q], A[r0 * kK + 2 * q + 1]), pack(A[r1 * kK + 2 * q], A[r1 * kK + 2 * q + 1]),
                         pack(A[r0 * kK + 2 * q + 8], A[r0 * kK + 2 * q + 9]),
                         pack(A[r1 * kK + 2 * q + 8], A[r1 * kK + 2 * q + 9])};
  float d[kN / 2] = {};
  dev::wgmma_fence();
  dev::wgmma_m64n32k16<0>(d, a, dev::wgmma_desc(sm, kLbo, kSbo));
  dev::wgmma_commit();
  dev::wgmma_wait0();
  for (int i = 0; i < kN / 8; ++i)
    for (int e = 0; e < 4; ++e) D[(e < 2 ? r0 : r1) * kN + 8 * i + 2 * q + (e & 1)] = d[4 * i + e];
}

bool launch(Problem& p, bool fence, std::string& err) {
  p.D.assign(kM * kN, std::nanf(""));
  char buf[512] = {0};
  const bool ok = dgps_emu::launch([&] { kernel(p, p.D.data(), fence); }, 1, 128, kSbo * (kN / 8), buf, sizeof buf);
  err = buf;
  return ok;
}

}  // namespace

int main() {
  const char* env = std::getenv("DGPS_SEED");
  const unsigned seed = env ? (unsigned)std::strtoul(env, nullptr, 10) : std::random_device{}();
  std::printf("dgps-emu-proxy-check: seed %u\n", seed);
  Problem p = draw(seed);
  std::string err;
  if (!launch(p, true, err)) {
    std::fprintf(stderr, "FAIL: the fenced hand-off was refused: %s\n", err.c_str());
    return 1;
  }
  double worst = 0;
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) {
      double want = 0;
      for (int k = 0; k < kK; ++k) want += (double)p.A[m * kK + k] * p.B[k * kN + n];
      const double got = p.D[m * kN + n];
      if (!std::isfinite(got)) {
        std::fprintf(stderr, "FAIL: D[%d][%d] was not written\n", m, n);
        return 1;
      }
      worst = std::fmax(worst, std::fabs(got - want));
    }
  if (worst > 1e-5) {
    std::fprintf(stderr, "FAIL: D differs from A·B by %g\n", worst);
    return 1;
  }
  if (launch(p, false, err)) {
    std::fprintf(stderr, "FAIL: wgmma read a cp.async tile without fence.proxy.async and the emulator accepted it\n");
    return 1;
  }
  if (err.find("fence.proxy.async") == std::string::npos) {
    std::fprintf(stderr, "FAIL: the unfenced hand-off failed for another reason: %s\n", err.c_str());
    return 1;
  }
  std::printf("fenced: D = A·B (max error %.3g); unfenced: refused (%s)\n", worst, err.c_str());
  return 0;
}
