// The per-channel gate rows by one tensor copy (tile/chunk_rows.cuh load_rows32 with a RowCopy; the map of
// launch_rules.h gateRowsMapShape with the copy engine's 32-byte swizzle) against the tile's own cp.async loader
// and against the layout written out here: element (i, d) of the chunk's [C, KP] gate tile sits at
// i·KP + SwizzledF32Row::col(d), and the channels K..KP−1 are zero. Why a check of its own: the chunk checks only
// see this through the end results, and the swizzle equals SwizzledF32Row only for rows of a multiple of 256
// bytes in a 256-byte aligned tile (docs/architecture.md, "Tensor copies"); this pins both conditions, including
// the kernel's fall-back to cp.async for a tile that is only 128-byte aligned. Shared memory is poisoned first and
// the gates are fresh random values, so a copy that misses or misplaces an element cannot pass.
//
//   dgps-emu-gate-copy-check        (DGPS_SEED=N fixes the seed)
#include "emu_prelude.h"
#include "dgps/tile/chunk_rows.cuh"
#include "emu_hooks.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

namespace dev = dgps::dev;
namespace t = dgps::tile;
namespace launch = dgps::launch;

constexpr int kC = 64;         // chunk rows
constexpr int kHeads = 3;      // value heads of g
constexpr int kTokens = 150;   // two full chunks and a partial one
constexpr float kPoison = -7.5f;

/// One case: K channels (KP = pad16(K)), the chunk starting at token t0 of head `head`, the tile `offset` bytes
/// past a 1024-byte aligned base.
struct Case {
  int K;
  int64_t t0, head;
  int offset;
};

template <int KP>
std::vector<float> copyTile(const Case& c, const std::vector<float>& g, bool tensor, unsigned long long& copies) {
  dgps::ForwardArgs a{};
  a.g = g.data();
  a.row_maps = 0;
  if (tensor) {
    const launch::TensorMapShape4 s = launch::gateRowsMapShape(kTokens, kHeads, c.K, kC, KP);
    dgps_emu::encode_tensor_map(a.g_rows.opaque, g.data(), 4, s.dims, s.strides, s.box, 4, 32);
    a.row_maps = 1 | 16;
  }
  const int bytes = kC * KP * 4;
  std::vector<float> out;
  const unsigned long long before = dgps_emu::tensor_copies_issued();
  auto kernel = [&] {
    unsigned char* const sm = dev::dyn_smem();
    float* const tile = reinterpret_cast<float*>(sm + 1024 + c.offset);
    for (int e = dev::tid(); e < kC * KP; e += dev::nthreads()) tile[e] = kPoison;
    dev::sync_threads();
    t::ChunkAt at;
    at.t0 = c.t0;
    at.Lr = (int)std::min<int64_t>(kC, kTokens - c.t0);
    const t::RowCopy rc = t::row_copy<kC>(a, at, reinterpret_cast<uint64_t*>(sm));
    t::load_rows32<kC, KP>(rc, a, tile, KP, g.data(), at, kHeads, c.head, c.K);
    t::wait_rows(rc);
    if (dev::tid() == 0) out.assign(tile, tile + kC * KP);
  };
  char err[512] = {0};
  if (!dgps_emu::launch(kernel, 1, 128, 1024 + 256 + bytes, err, sizeof err)) {
    std::fprintf(stderr, "FAIL: the launch was refused: %s\n", err);
    std::exit(1);
  }
  copies = dgps_emu::tensor_copies_issued() - before;
  return out;
}

/// The layout written out: the expected tile, element by element.
std::vector<float> expected(const Case& c, int KP, const std::vector<float>& g) {
  std::vector<float> want(kC * KP, 0.f);
  for (int i = 0; i < kC; ++i)
    for (int d = 0; d < KP; ++d) {
      const bool in = c.t0 + i < kTokens && d < c.K;
      want[i * KP + t::SwizzledF32Row::col(d)] = in ? g[((c.t0 + i) * kHeads + c.head) * c.K + d] : 0.f;
    }
  return want;
}

template <int KP>
int check(const Case& c, const std::vector<float>& g, bool wantCopy) {
  unsigned long long copies = 0, none = 0;
  const std::vector<float> byCopy = copyTile<KP>(c, g, true, copies);
  const std::vector<float> byThreads = copyTile<KP>(c, g, false, none);
  const std::vector<float> want = expected(c, KP, g);
  const std::string what = "K=" + std::to_string(c.K) + " t0=" + std::to_string(c.t0) + " head=" +
                           std::to_string(c.head) + " offset=" + std::to_string(c.offset);
  int bad = 0;
  if ((copies == 1) != wantCopy) {
    std::fprintf(stderr, "FAIL: %s: %llu tensor copies, expected %s\n", what.c_str(), copies, wantCopy ? "1" : "none");
    ++bad;
  }
  if (none != 0) std::fprintf(stderr, "FAIL: %s: a tensor copy ran without the map\n", what.c_str()), ++bad;
  for (int e = 0; e < kC * KP; ++e) {
    if (std::memcmp(&byCopy[e], &want[e], 4) != 0 && bad++ < 5)
      std::fprintf(stderr, "FAIL: %s: tensor path, row %d column %d: %g, expected %g\n", what.c_str(), e / KP, e % KP,
                   byCopy[e], want[e]);
    if (std::memcmp(&byThreads[e], &want[e], 4) != 0 && bad++ < 5)
      std::fprintf(stderr, "FAIL: %s: cp.async path, row %d column %d: %g, expected %g\n", what.c_str(), e / KP,
                   e % KP, byThreads[e], want[e]);
  }
  if (!bad) std::printf("  %s: %s\n", what.c_str(), wantCopy ? "one tensor copy" : "cp.async (no copy)");
  return bad;
}

}  // namespace

int main() {
  const char* env = std::getenv("DGPS_SEED");
  const unsigned seed = env ? (unsigned)std::strtoul(env, nullptr, 10) : std::random_device{}();
  std::printf("dgps-emu-gate-copy-check: seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.f, -0.01f);  // natural-log decays, never zero
  int bad = 0;
  for (int K : {128, 120, 64}) {
    std::vector<float> g((size_t)kTokens * kHeads * K);
    for (float& x : g) x = u(rng);
    const int KP = launch::pad16(K);
    // full chunks take the copy (any 256-byte aligned tile); a partial chunk, and a tile only 128-byte aligned
    // (where the swizzle would not be SwizzledF32Row), keep cp.async with the same result
    const Case full{K, 64, 2, 256}, first{K, 0, 0, 0}, partial{K, 128, 1, 0}, aligned128{K, 64, 1, 128};
    for (const Case& c : {full, first, partial, aligned128}) {
      const bool wantCopy = c.t0 + kC <= kTokens && c.offset % 256 == 0 && KP % 64 == 0;
      bad += KP == 128 ? check<128>(c, g, wantCopy) : check<64>(c, g, wantCopy);
    }
  }
  if (bad) {
    std::fprintf(stderr, "FAIL: %d mismatches\n", bad);
    return 1;
  }
  std::printf("the gate rows' tensor copy lands chunk_local's swizzled gate layout (K = 128, 120, 64)\n");
  return 0;
}
