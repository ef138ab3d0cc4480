// The emulator's stmatrix .x4 .trans (emu.cpp stsm_x4_trans), checked against the PTX definition written out
// here element by element: lane L holds, in register i, elements (L / 4, 2(L % 4)) and (L / 4, 2(L % 4) + 1)
// of the 8x8 matrix i; with .trans, element (r, c) is stored at position r of the row whose address lane
// 8i + c supplied. The kernels stage o this way (tile/lower_readout.cuh stage_rows), so a wrong model would let a
// wrong staging pass the emulator checks. Rows are scattered (a random row order, a pitch wider than the
// matrix) so an address mix-up cannot line up by accident; shared memory is poisoned (0xFFFF) before the store
// and every position the store must not write is checked to keep the poison. Then ldmatrix .x4 .trans reads
// the same rows back: it must return each lane's registers (the two are inverses).
//
//   dgps-emu-stmatrix-check        (DGPS_SEED=N fixes the seed)
#include "emu_prelude.h"
#include "dgps/device/platform.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

namespace dev = dgps::dev;

constexpr int kPitch = 24;        // elements per shared row (> 8: the rows do not touch)
constexpr int kRows = 4 * 8;      // four matrices of 8 rows
constexpr uint16_t kPoison = 0xFFFF;

struct Problem {
  uint16_t value[4][8][8];  // value[i][r][c]: matrix i as the lanes hold it (r = L / 4)
  int row_slot[4][8];       // the shared row that lane 8i + c addresses
};

Problem draw(unsigned seed) {
  std::mt19937 rng(seed);
  Problem p;
  std::uniform_int_distribution<int> bits(0, 0x7F7F);  // finite bf16 patterns, never the poison
  for (auto& m : p.value)
    for (auto& row : m)
      for (uint16_t& v : row) v = (uint16_t)bits(rng);
  std::vector<int> slots(kRows);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 8; ++c) p.row_slot[i][c] = slots[8 * i + c];
  return p;
}

struct Result {
  std::vector<uint16_t> smem;  // after the store
  uint32_t loaded[32][4];      // what ldmatrix .trans read back, per lane
};

void kernel(const Problem& p, Result& out) {
  const int L = dev::tid();
  uint16_t* const sm = reinterpret_cast<uint16_t*>(dev::dyn_smem());
  for (int e = L; e < kRows * kPitch; e += 32) sm[e] = kPoison;
  dev::sync_warp();
  uint32_t reg[4];
  for (int i = 0; i < 4; ++i)
    reg[i] = (uint32_t)p.value[i][L / 4][2 * (L % 4)] | ((uint32_t)p.value[i][L / 4][2 * (L % 4) + 1] << 16);
  uint16_t* const my_row = sm + p.row_slot[L / 8][L % 8] * kPitch;
  dev::stsm_x4_trans(my_row, reg);
  dev::sync_warp();
  if (L == 0) out.smem.assign(sm, sm + kRows * kPitch);
  dev::sync_warp();
  dev::ldsm_x4_trans(out.loaded[L], my_row);
}

}  // namespace

int main() {
  const char* env = std::getenv("DGPS_SEED");
  const unsigned seed = env ? (unsigned)std::strtoul(env, nullptr, 10) : std::random_device{}();
  std::printf("dgps-emu-stmatrix-check: seed %u\n", seed);
  const Problem p = draw(seed);
  Result r;
  std::memset(r.loaded, 0, sizeof r.loaded);
  char err[512] = {0};
  if (!dgps_emu::launch([&] { kernel(p, r); }, 1, 32, kRows * kPitch * 2, err, sizeof err)) {
    std::fprintf(stderr, "FAIL: the launch was refused: %s\n", err);
    return 1;
  }
  int bad = 0;
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 8; ++c)
      for (int x = 0; x < kPitch; ++x) {
        const uint16_t got = r.smem[p.row_slot[i][c] * kPitch + x];
        const uint16_t want = x < 8 ? p.value[i][x][c] : kPoison;  // position r of row c holds element (r, c)
        if (got != want && bad++ < 5)
          std::fprintf(stderr, "FAIL: matrix %d, row of column %d, position %d: %#06x, expected %#06x\n", i, c, x,
                       got, want);
      }
  for (int L = 0; L < 32; ++L)
    for (int i = 0; i < 4; ++i) {
      const uint32_t want =
          (uint32_t)p.value[i][L / 4][2 * (L % 4)] | ((uint32_t)p.value[i][L / 4][2 * (L % 4) + 1] << 16);
      if (r.loaded[L][i] != want && bad++ < 10)
        std::fprintf(stderr, "FAIL: ldmatrix .trans after stmatrix .trans, lane %d register %d: %#010x, expected %#010x\n",
                     L, i, r.loaded[L][i], want);
    }
  if (bad) {
    std::fprintf(stderr, "FAIL: %d mismatches\n", bad);
    return 1;
  }
  std::printf("stmatrix .x4 .trans stores the PTX layout (4 matrices, scattered rows); ldmatrix .trans reads it back\n");
  return 0;
}
