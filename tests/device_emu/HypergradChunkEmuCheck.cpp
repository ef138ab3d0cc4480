// CPU emulator check (tests/emu) of the chunked OSDN d-scan device pieces (runtime/device/dgps/device/
// hypergrad_chunk.cuh): stage 1 (per chunk and key head) then stage 2 (per sequence and key head, over its
// chunks) in f32 against the float64 token-by-token scan computed here. Fresh seeded inputs, NaN-poisoned
// outputs; chunk-start d, every token's step coefficient and the final d must match to 1e-4 relative (f32).
// Cases: partial chunks, one-token and empty sequences, retention on and off, an initial d, zero keys, and
// nearly parallel keys at the stability limit η β² = 2.
//
// This file is compiled with tests/emu/emu_prelude.h force-included (tests/device_emu/CMakeLists.txt).
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dgps/device/hypergrad_chunk.cuh"
#include "emu_hooks.h"

namespace {

struct Case {
  std::string name;
  std::vector<int> lens;  ///< sequence lengths, packed one after another
  int H = 2, K = 64, C = 32;
  bool retention = true, init = true, zeroKeys = false, parallelKeys = false;
  float eta = 1.f;
};

struct Chunk {
  int t0, len, slot, seq;
};

double relErr(const std::vector<float>& got, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff = std::max(diff, std::fabs(got[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

bool run(const Case& cs, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  const int H = cs.H, K = cs.K, C = cs.C, N = static_cast<int>(cs.lens.size());
  std::vector<Chunk> chunks;
  int rows = 0;
  for (int s = 0; s < N; ++s) {
    for (int t = 0; t < cs.lens[s]; t += C)
      chunks.push_back({rows + t, std::min(C, cs.lens[s] - t), static_cast<int>(chunks.size()), s});
    rows += cs.lens[s];
  }
  const int S = static_cast<int>(chunks.size());
  // Inputs: unit keys (or nearly equal ones), gains, log retentions, initial d.
  std::vector<float> khat(static_cast<size_t>(rows) * H * K), beta(static_cast<size_t>(rows) * H),
      rlog(beta.size()), init(static_cast<size_t>(N) * H * K);
  std::vector<float> common(K);
  for (float& x : common) x = normal(rng);
  for (int r = 0; r < rows * H; ++r) {
    float* k = &khat[static_cast<size_t>(r) * K];
    double ss = 0;
    for (int x = 0; x < K; ++x) {
      k[x] = cs.parallelKeys ? common[x] + 1e-3f * normal(rng) : normal(rng);
      ss += double(k[x]) * k[x];
    }
    const bool zero = cs.zeroKeys && r % 3 == 0;
    for (int x = 0; x < K; ++x) k[x] = zero ? 0.f : static_cast<float>(k[x] / std::sqrt(ss));
    beta[r] = cs.parallelKeys ? 1.f : uni(rng);
    rlog[r] = cs.retention ? -0.2f * uni(rng) : 0.f;
  }
  for (float& x : init) x = 0.5f + uni(rng);
  // float64 token-by-token scan (docs/math.md §5.2).
  std::vector<double> refStart(static_cast<size_t>(S) * H * K), refCoef(beta.size(), 0.0),
      refFinal(init.size());
  for (int s = 0; s < N; ++s)
    for (int h = 0; h < H; ++h) {
      std::vector<double> d(K);
      for (int x = 0; x < K; ++x) d[x] = cs.init ? init[(static_cast<size_t>(s) * H + h) * K + x] : 1.0;
      for (const Chunk& c : chunks) {
        if (c.seq != s) continue;
        for (int x = 0; x < K; ++x) refStart[(static_cast<size_t>(c.slot) * H + h) * K + x] = d[x];
        for (int i = 0; i < c.len; ++i) {
          const size_t r = static_cast<size_t>(c.t0 + i) * H + h;
          const float* k = &khat[r * K];
          double kk = 0, du = 0;
          for (int x = 0; x < K; ++x) {
            kk += double(k[x]) * k[x];
            du += d[x] * k[x] * k[x];
          }
          const double cf = kk > 0 ? cs.eta * beta[r] / kk * (1.0 - beta[r] * du) : 0.0;
          refCoef[r] = cf;
          const double rho = std::exp(double(rlog[r]));
          for (int x = 0; x < K; ++x) d[x] = rho * d[x] + cf * k[x] * k[x];
        }
      }
      for (int x = 0; x < K; ++x) refFinal[(static_cast<size_t>(s) * H + h) * K + x] = d[x];
    }
  // Device pieces on the emulator, outputs poisoned.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> R(khat.size(), nan), Y(khat.size(), nan), a(beta.size(), nan),
      ld(static_cast<size_t>(S) * H, nan), pst(refStart.size(), nan), coef(beta.size(), nan), fin(init.size(), nan);
  dgps::dev::HypergradChunkArgs sa{khat.data(), beta.data(), cs.retention ? rlog.data() : nullptr, cs.eta, H, K,
                                   R.data(), a.data(), Y.data(), ld.data()};
  char err[256] = {0};
  bool ok = dgps_emu::launch(
      [&] {
        const int b = static_cast<int>(dgps::dev::block_x());
        const Chunk& c = chunks[b / H];
        dgps::dev::hypergrad_chunk_summary_cta(sa, c.t0, c.len, c.slot, b % H);
      },
      static_cast<unsigned long long>(S) * H, 128, dgps::dev::hypergrad_chunk_summary_smem(C, K), err, sizeof err);
  if (!ok) {
    std::printf("FAIL %s: stage 1: %s\n", cs.name.c_str(), err);
    return false;
  }
  std::vector<std::vector<int>> t0(N), len(N), slot(N);
  for (const Chunk& c : chunks) t0[c.seq].push_back(c.t0), len[c.seq].push_back(c.len), slot[c.seq].push_back(c.slot);
  dgps::dev::HypergradPassArgs pa{R.data(), a.data(), Y.data(), ld.data(), cs.init ? init.data() : nullptr, 1.f,
                                  H, K, pst.data(), coef.data(), fin.data()};
  ok = dgps_emu::launch(
      [&] {
        const int b = static_cast<int>(dgps::dev::block_x()), s = b / H;
        dgps::dev::hypergrad_chunk_pass_cta(pa, t0[s].data(), len[s].data(), slot[s].data(),
                                            static_cast<int>(t0[s].size()), s, b % H);
      },
      static_cast<unsigned long long>(N) * H, 64, dgps::dev::hypergrad_chunk_pass_smem(C, K), err, sizeof err);
  if (!ok) {
    std::printf("FAIL %s: stage 2: %s\n", cs.name.c_str(), err);
    return false;
  }
  // Rows past the last sequence's end do not exist here; every coef row belongs to a chunk.
  const double eStart = relErr(pst, refStart), eCoef = relErr(coef, refCoef), eFinal = relErr(fin, refFinal);
  const double tol = 1e-4;
  const bool pass = eStart <= tol && eCoef <= tol && eFinal <= tol;
  std::printf("%s %s (seed %llu): start %.2e, coef %.2e, final %.2e (tolerance %.0e)\n", pass ? "ok  " : "FAIL",
              cs.name.c_str(), static_cast<unsigned long long>(seed), eStart, eCoef, eFinal, tol);
  return pass;
}

}  // namespace

int main() {
  std::vector<Case> cases;
  Case base;
  base.name = "partial chunks, one-token and empty sequences, retention, initial d";
  base.lens = {70, 1, 0, 130};
  cases.push_back(base);
  Case plain = base;
  plain.name = "no retention, d_init, K = 128, C = 64";
  plain.retention = false, plain.init = false, plain.K = 128, plain.C = 64, plain.lens = {200, 64};
  cases.push_back(plain);
  Case zero = base;
  zero.name = "zero keys every third row";
  zero.zeroKeys = true;
  cases.push_back(zero);
  Case par = base;
  par.name = "nearly parallel keys, eta beta^2 = 2";
  par.parallelKeys = true, par.eta = 2.f, par.retention = false, par.lens = {96, 40};
  cases.push_back(par);
  std::random_device rd;
  bool all = true;
  for (const Case& c : cases) all &= run(c, (static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  return all ? 0 : 1;
}
