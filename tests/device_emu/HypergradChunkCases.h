// Shared by the chunked OSDN d-scan checks (HypergradChunkEmuCheck.cpp on the CPU emulator,
// HypergradChunkGpuCheck.cpp on a GPU): the cases, fresh seeded inputs, the chunk list and the float64
// token-by-token scan (docs/math.md §5.2) that the device pieces of runtime/device/dgps/device/hypergrad_chunk.cuh
// must reproduce in f32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace dgps::hgtest {

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

/// Inputs, chunks (in sequence order) and the float64 results of one case.
struct Problem {
  int N = 0, S = 0, rows = 0;
  std::vector<Chunk> chunks;
  std::vector<float> khat, beta, rlog, init;
  std::vector<double> refStart, refCoef, refFinal;
  std::vector<double> refPcoef;  ///< refCoef in the workspace layout pcoef [S][H][C], 0 past a chunk's length
};

inline double relErr(const std::vector<float>& got, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff = std::max(diff, std::fabs(got[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

inline Problem makeProblem(const Case& cs, std::uint64_t seed) {
  Problem P;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  const int H = cs.H, K = cs.K, C = cs.C, N = static_cast<int>(cs.lens.size());
  P.N = N;
  int rows = 0;
  for (int s = 0; s < N; ++s) {
    for (int t = 0; t < cs.lens[s]; t += C)
      P.chunks.push_back({rows + t, std::min(C, cs.lens[s] - t), static_cast<int>(P.chunks.size()), s});
    rows += cs.lens[s];
  }
  P.rows = rows;
  P.S = static_cast<int>(P.chunks.size());
  // Inputs: unit keys (or nearly equal ones), gains, log retentions, initial d.
  P.khat.resize(static_cast<size_t>(rows) * H * K);
  P.beta.resize(static_cast<size_t>(rows) * H);
  P.rlog.resize(P.beta.size());
  P.init.resize(static_cast<size_t>(N) * H * K);
  std::vector<float> common(K);
  for (float& x : common) x = normal(rng);
  for (int r = 0; r < rows * H; ++r) {
    float* k = &P.khat[static_cast<size_t>(r) * K];
    double ss = 0;
    for (int x = 0; x < K; ++x) {
      k[x] = cs.parallelKeys ? common[x] + 1e-3f * normal(rng) : normal(rng);
      ss += double(k[x]) * k[x];
    }
    const bool zero = cs.zeroKeys && r % 3 == 0;
    for (int x = 0; x < K; ++x) k[x] = zero ? 0.f : static_cast<float>(k[x] / std::sqrt(ss));
    P.beta[r] = cs.parallelKeys ? 1.f : uni(rng);
    P.rlog[r] = cs.retention ? -0.2f * uni(rng) : 0.f;
  }
  for (float& x : P.init) x = 0.5f + uni(rng);
  // float64 token-by-token scan.
  P.refStart.assign(static_cast<size_t>(P.S) * H * K, 0.0);
  P.refCoef.assign(P.beta.size(), 0.0);
  P.refFinal.assign(P.init.size(), 0.0);
  for (int s = 0; s < N; ++s)
    for (int h = 0; h < H; ++h) {
      std::vector<double> d(K);
      for (int x = 0; x < K; ++x) d[x] = cs.init ? P.init[(static_cast<size_t>(s) * H + h) * K + x] : 1.0;
      for (const Chunk& c : P.chunks) {
        if (c.seq != s) continue;
        for (int x = 0; x < K; ++x) P.refStart[(static_cast<size_t>(c.slot) * H + h) * K + x] = d[x];
        for (int i = 0; i < c.len; ++i) {
          const size_t r = static_cast<size_t>(c.t0 + i) * H + h;
          const float* k = &P.khat[r * K];
          double kk = 0, du = 0;
          for (int x = 0; x < K; ++x) {
            kk += double(k[x]) * k[x];
            du += d[x] * k[x] * k[x];
          }
          const double cf = kk > 0 ? cs.eta * P.beta[r] / kk * (1.0 - P.beta[r] * du) : 0.0;
          P.refCoef[r] = cf;
          const double rho = std::exp(double(P.rlog[r]));
          for (int x = 0; x < K; ++x) d[x] = rho * d[x] + cf * k[x] * k[x];
        }
      }
      for (int x = 0; x < K; ++x) P.refFinal[(static_cast<size_t>(s) * H + h) * K + x] = d[x];
    }
  P.refPcoef.assign(static_cast<size_t>(P.S) * H * C, 0.0);
  for (const Chunk& c : P.chunks)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < c.len; ++i)
        P.refPcoef[(static_cast<size_t>(c.slot) * H + h) * C + i] = P.refCoef[static_cast<size_t>(c.t0 + i) * H + h];
  return P;
}

/// Prints one line and returns whether the device's chunk-start d (pst), coefficients (pcoef, pad rows 0) and
/// final d are within 1e-4.
inline bool report(const Case& cs, std::uint64_t seed, const Problem& P, const std::vector<float>& pst,
                   const std::vector<float>& pcoef, const std::vector<float>& fin) {
  const double eStart = relErr(pst, P.refStart), eCoef = relErr(pcoef, P.refPcoef), eFinal = relErr(fin, P.refFinal);
  const double tol = 1e-4;
  const bool pass = eStart <= tol && eCoef <= tol && eFinal <= tol;
  std::printf("%s %s (seed %llu): start %.2e, coef %.2e, final %.2e (tolerance %.0e)\n", pass ? "ok  " : "FAIL",
              cs.name.c_str(), static_cast<unsigned long long>(seed), eStart, eCoef, eFinal, tol);
  return pass;
}

/// Partial chunks, one-token and empty sequences, retention on and off, an initial d, zero keys, and nearly
/// parallel keys at the stability limit η β² = 2.
inline std::vector<Case> cases() {
  std::vector<Case> out;
  Case base;
  base.name = "partial chunks, one-token and empty sequences, retention, initial d";
  base.lens = {70, 1, 0, 130};
  out.push_back(base);
  Case plain = base;
  plain.name = "no retention, d_init, K = 128, C = 64";
  plain.retention = false, plain.init = false, plain.K = 128, plain.C = 64, plain.lens = {200, 64};
  out.push_back(plain);
  Case zero = base;
  zero.name = "zero keys every third row";
  zero.zeroKeys = true;
  out.push_back(zero);
  Case par = base;
  par.name = "nearly parallel keys, eta beta^2 = 2";
  par.parallelKeys = true, par.eta = 2.f, par.retention = false, par.lens = {96, 40};
  out.push_back(par);
  return out;
}

inline std::uint64_t freshSeed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace dgps::hgtest
