// CPU check of the sequence-parallel state pass's fold (runtime/device/dgps/tile/state_fold.cuh) on the emulator
// of tests/emu: random segment summaries (M_s near the identity, E_s and the initial states drawn from a seeded
// normal) are folded by the emulated kernel into NaN-poisoned start and final buffers, and every segment's start
// state and every sequence's final state are compared with dsl SegmentScan.h foldSegments<double> on the same
// (f32) inputs. Tolerance 1e-5 relative (f32 sums of K products per step, reassociated only by the compiler).
// The summaries sit at the segment slots of state_fold.cuh (first_segment_slot: no host sync, slack slots
// between packed sequences), which are checked against the host's splitSequences: same segment count per
// sequence, slots disjoint and below the bound, slack slots never written.
// Problems: a packed varlen batch with a long, an empty and a short sequence, with and without initial states;
// a fixed-length batch B = 2; a value width that is not a multiple of the value tile (a partial last tile).
//
//   dgps-tile-fold-emu-check
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "TileFoldKernel.h"
#include "dgps/dsl/SegmentScan.h"
#include "emu_hooks.h"

namespace {

using dgps::segment::Segment;
using dgps_fold_check::FoldArgs;
using dgps_fold_check::kFoldCols;
using dgps_fold_check::kFoldThreads;

constexpr double kTol = 1e-5;

struct Problem {
  std::string name;
  std::vector<int64_t> cu;  ///< cu_seqlens (empty: fixed length)
  int64_t batch, T, C, L, HV;
  int K, V;
  bool init;
};

/// max |got − want| / max(1, max |want|) over all entries; infinity on a non-finite entry.
double relErr(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return num / den;
}

/// The device slot of every host segment (splitSequences order), checking the slot layout of state_fold.cuh
/// against the host bookkeeping: the same segment count per sequence, slots below the bound and disjoint.
bool slotsOf(const Problem& p, const FoldArgs& a, const std::vector<Segment>& segs, std::vector<int64_t>& slot) {
  const int64_t bound = dgps_fold_check::slotBound(a, p.T);
  std::vector<bool> used((size_t)bound, false);
  std::vector<int64_t> seen((size_t)a.N, 0);
  for (const Segment& s : segs) {
    const int64_t j = seen[(size_t)s.seq]++, x = dgps_fold_check::firstSlot(a, s.seq) + j;
    if (j >= dgps_fold_check::segmentCount(a, s.seq) || x < 0 || x >= bound || used[(size_t)x]) {
      std::fprintf(stderr, "%s: segment %lld of sequence %lld: slot %lld is past its count, out of [0, %lld) or "
                   "taken twice\n", p.name.c_str(), (long long)j, (long long)s.seq, (long long)x, (long long)bound);
      return false;
    }
    used[(size_t)x] = true;
    slot.push_back(x);
  }
  for (int64_t n = 0; n < a.N; ++n)
    if (seen[(size_t)n] != dgps_fold_check::segmentCount(a, n)) {
      std::fprintf(stderr, "%s: sequence %lld: %lld host segments, the device counts %lld\n", p.name.c_str(),
                   (long long)n, (long long)seen[(size_t)n], (long long)dgps_fold_check::segmentCount(a, n));
      return false;
    }
  return true;
}

bool runProblem(const Problem& p, std::mt19937_64& rng) {
  const std::vector<Segment> segs = dgps::segment::splitSequences(p.cu, p.batch, p.T, p.C * p.L);
  const int64_t N = p.cu.empty() ? p.batch : (int64_t)p.cu.size() - 1, S = (int64_t)segs.size();
  const int64_t K = p.K, V = p.V, KV = K * V, HV = p.HV;
  FoldArgs a{nullptr, nullptr, nullptr, nullptr, nullptr, p.cu.empty() ? nullptr : p.cu.data(),
             p.T, p.C, p.L, N, HV, p.K, p.V};
  std::vector<int64_t> slot;
  if (!slotsOf(p, a, segs, slot)) return false;
  const int64_t SB = dgps_fold_check::slotBound(a, p.T);

  // Dense summaries (host segment order) for the reference, scattered to the device slots for the kernel.
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> trans((size_t)(S * HV * K * K)), ext((size_t)(S * HV * KV)), init((size_t)(N * HV * KV));
  const float spread = 0.3f / std::sqrt((float)K);  // M = 0.9 I + noise: a contracting, non-diagonal transition
  for (int64_t sh = 0; sh < S * HV; ++sh)
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < K; ++c)
        trans[(size_t)((sh * K + r) * K + c)] = (r == c ? 0.9f : 0.f) + spread * normal(rng);
  for (float& x : ext) x = normal(rng);
  for (float& x : init) x = normal(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> transD((size_t)(SB * HV * K * K), nan), extD((size_t)(SB * HV * KV), nan);
  for (int64_t i = 0; i < S; ++i) {
    std::copy_n(&trans[(size_t)(i * HV * K * K)], HV * K * K, &transD[(size_t)(slot[(size_t)i] * HV * K * K)]);
    std::copy_n(&ext[(size_t)(i * HV * KV)], HV * KV, &extD[(size_t)(slot[(size_t)i] * HV * KV)]);
  }

  std::vector<float> start((size_t)(SB * HV * KV), nan), fin((size_t)(N * HV * KV), nan);
  a.trans = transD.data();
  a.ext = extD.data();
  a.init = p.init ? init.data() : nullptr;
  a.start = start.data();
  a.final = fin.data();
  const int64_t VT = (V + kFoldCols - 1) / kFoldCols;
  char err[512] = {0};
  if (!dgps_fold_check::foldSupports((int)K)) {
    std::fprintf(stderr, "%s: no fold kernel compiled for K = %lld (TileFoldKernel.cpp)\n", p.name.c_str(), (long long)K);
    return false;
  }
  if (!dgps_emu::launch([&] { dgps_fold_check::foldKernel(a); }, (unsigned long long)(N * HV * VT), kFoldThreads,
                        dgps_fold_check::foldSmemBytes((int)K), err, sizeof err)) {
    std::fprintf(stderr, "%s: emulator error: %s\n", p.name.c_str(), err);
    return false;
  }

  auto wide = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const std::vector<double> transW = wide(trans), extW = wide(ext), initW = wide(init);
  std::vector<double> wantStart((size_t)(S * HV * KV)), wantFin(fin.size());
  dgps::segment::foldSegments<double>(segs, dgps::segment::FoldShape{N, HV, K, V, false}, transW.data(),
                                      extW.data(), p.init ? initW.data() : nullptr, wantStart.data(), wantFin.data());
  std::vector<float> gotStart((size_t)(S * HV * KV));
  for (int64_t i = 0; i < S; ++i)
    std::copy_n(&start[(size_t)(slot[(size_t)i] * HV * KV)], HV * KV, &gotStart[(size_t)(i * HV * KV)]);
  // slots that hold no segment are never written
  size_t untouched = 0, slack = 0;
  std::vector<bool> isSlot((size_t)SB, false);
  for (int64_t x : slot) isSlot[(size_t)x] = true;
  for (int64_t x = 0; x < SB; ++x)
    if (!isSlot[(size_t)x]) {
      ++slack;
      bool allNaN = true;
      for (int64_t e = 0; e < HV * KV; ++e) allNaN = allNaN && std::isnan(start[(size_t)(x * HV * KV + e)]);
      untouched += allNaN ? 1 : 0;
    }
  const double es = relErr(gotStart, wantStart), ef = relErr(fin, wantFin);
  const bool ok = es <= kTol && ef <= kTol && untouched == slack;
  std::printf("%-26s N=%lld segments=%lld slots=%lld HV=%lld K=%d V=%d init=%d  start rel %.2e  final rel %.2e  "
              "(tol %.0e)  slack slots untouched %zu/%zu  %s\n",
              p.name.c_str(), (long long)N, (long long)S, (long long)SB, (long long)HV, p.K, p.V, p.init ? 1 : 0, es,
              ef, kTol, untouched, slack, ok ? "ok" : "FAIL");
  return ok;
}

}  // namespace

int main() {
  std::mt19937_64 rng(20261201);
  const std::vector<Problem> problems = {
      // a long document of 300 tokens (chunks of 32, segments of 2 chunks: 4 segments of 64 and one of 44), an
      // empty one and a short one; V = 40 leaves a partial value tile; a token row past cu[N] (slack)
      {"varlen long/empty/short", {0, 300, 300, 337}, 1, 340, 32, 2, 2, 32, 40, true},
      {"varlen without init", {0, 300, 300, 337}, 1, 337, 32, 2, 2, 32, 40, false},
      {"fixed B=2 T=300 C=64", {}, 2, 300, 64, 2, 1, 32, 64, true},
      {"one segment per sequence", {0, 50, 90}, 1, 90, 32, 4, 3, 16, 24, true},
      // the shipped head dims: K = V = 128 (full slabs) and 120 (a half slab, rows past K in idle threads)
      {"K = V = 128", {0, 700, 1000}, 1, 1000, 64, 2, 1, 128, 128, true},
      {"K = V = 120", {}, 1, 640, 64, 2, 1, 120, 120, false},
  };
  bool ok = true;
  for (const Problem& p : problems) ok = runProblem(p, rng) && ok;
  if (!ok) {
    std::fprintf(stderr, "dgps-tile-fold-emu-check: the emulated fold differs from foldSegments<double>\n");
    return 1;
  }
  return 0;
}
