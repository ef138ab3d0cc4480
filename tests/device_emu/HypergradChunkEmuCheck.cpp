// CPU emulator check (tests/emu) of the chunked OSDN d-scan device pieces (runtime/device/dgps/device/
// hypergrad_chunk.cuh): stage 1 (per chunk and key head) then stage 2 (per sequence and key head, over its
// chunks) in f32 against the float64 token-by-token scan (HypergradChunkCases.h). Fresh seeded inputs,
// NaN-poisoned outputs; chunk-start d, every token's step coefficient and the final d must match to 1e-4
// relative. The same cases run on a GPU in HypergradChunkGpuCheck.cpp.
//
// This file is compiled with tests/emu/emu_prelude.h force-included (tests/device_emu/CMakeLists.txt).
#include "HypergradChunkCases.h"
#include "dgps/device/hypergrad_chunk.cuh"
#include "emu_hooks.h"

using namespace dgps::hgtest;

namespace {

bool run(const Case& cs, std::uint64_t seed) {
  Problem P = makeProblem(cs, seed);
  const int H = cs.H, K = cs.K, C = cs.C, N = P.N, S = P.S;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t perChunk = static_cast<size_t>(S) * H * C;
  std::vector<float> R(perChunk * K, nan), Y(perChunk * K, nan), a(perChunk, nan), ld(static_cast<size_t>(S) * H, nan),
      pst(P.refStart.size(), nan), pcoef(perChunk, nan), fin(P.init.size(), nan);
  dgps::dev::HypergradChunkArgs sa{P.khat.data(), P.beta.data(), cs.retention ? P.rlog.data() : nullptr, cs.eta,
                                   H, K, C, R.data(), a.data(), Y.data(), ld.data()};
  char err[256] = {0};
  bool ok = dgps_emu::launch(
      [&] {
        const int b = static_cast<int>(dgps::dev::block_x());
        const Chunk& c = P.chunks[b / H];
        dgps::dev::hypergrad_chunk_summary_cta(sa, c.t0, c.len, c.slot, b % H);
      },
      static_cast<unsigned long long>(S) * H, 128, dgps::dev::hypergrad_chunk_summary_smem(C, K), err, sizeof err);
  if (!ok) {
    std::printf("FAIL %s: stage 1: %s\n", cs.name.c_str(), err);
    return false;
  }
  std::vector<std::vector<int>> len(N), slot(N);
  for (const Chunk& c : P.chunks) len[c.seq].push_back(c.len), slot[c.seq].push_back(c.slot);
  dgps::dev::HypergradPassArgs pa{R.data(), a.data(), Y.data(), ld.data(), cs.init ? P.init.data() : nullptr, 1.f,
                                  H, K, C, pst.data(), pcoef.data(), fin.data()};
  ok = dgps_emu::launch(
      [&] {
        const int b = static_cast<int>(dgps::dev::block_x()), s = b / H;
        dgps::dev::hypergrad_chunk_pass_cta(pa, len[s].data(), slot[s].data(), static_cast<int>(len[s].size()), s,
                                            b % H);
      },
      static_cast<unsigned long long>(N) * H, 64, dgps::dev::hypergrad_chunk_pass_smem(C, K), err, sizeof err);
  if (!ok) {
    std::printf("FAIL %s: stage 2: %s\n", cs.name.c_str(), err);
    return false;
  }
  return report(cs, seed, P, pst, pcoef, fin);
}

}  // namespace

int main() {
  bool all = true;
  for (const Case& c : cases()) all &= run(c, freshSeed());
  return all ? 0 : 1;
}
