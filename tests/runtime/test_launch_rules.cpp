// The launch contract (dsl/include/dgps/dsl/LaunchContract.h) for every committed package:
// the default configuration launches within the sm_90 limits, state_output carries its producer warpgroup
// exactly when a preconditioner needs rebuilding, and no workspace buffer holds a preconditioned operand.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dgps/device/abi.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/runtime/Package.h"
#include "dgps/tile/feedback_scan_layout.h"

namespace dgps {
namespace {

namespace fs = std::filesystem;
using namespace launch;

std::vector<std::string> packageDirs() {
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(std::string(DGPS_SOURCE_DIR) + "/generated"))
    if (fs::exists(e.path() / "manifest.yaml")) dirs.push_back(e.path().string());
  return dirs;
}

TEST(LaunchRules, EveryPackageDefaultFitsSm90) {
  const std::vector<std::string> dirs = packageDirs();
  ASSERT_FALSE(dirs.empty()) << "no packages under generated/";
  for (const std::string& dir : dirs) {
    const Package pkg = Package::open(dir);
    const Manifest& m = pkg.manifest();
    SCOPED_TRACE(m.name);
    const FeatureSet f = deviceFeatures(pkg.spec());
    const TileConfig& t = m.default_config;
    for (int K : m.key_dims)
      for (int V : m.value_dims) {
        if (K > 128 || V > 128) continue;  // K > 128 spills by design (README, docs/math.md §7.5)
        ProblemShape s;
        s.B = s.N = 8;
        s.T = 4096;
        s.H = s.HV = 16;
        s.K = K;
        s.V = V;
        int roles[kMaxRoles];
        const int n = forwardRoles(f, roles);
        for (int i = 0; i < n; ++i) {
          const Geometry g = forwardGeometry(roles[i], f, s, t);
          EXPECT_LE(g.smem_bytes, kSm90MaxDynamicSmem) << roleName(roles[i]) << " K=" << K << " V=" << V;
          EXPECT_LE(g.block.x, 1024u) << roleName(roles[i]);
          EXPECT_GT(g.grid.x, 0u) << roleName(roles[i]);
        }
        const Geometry so = forwardGeometry(kStateOutput, f, s, t);
        const int bv = std::min(t.block_v, pad16(V));
        EXPECT_EQ(so.block.x, unsigned((bv / 16 + (f.precond == 1 ? 4 : 0)) * 32));
      }
  }
}

// Per-channel decay (KDA, PKDA): chunk_local's buffers are 16-byte aligned, the gated column copy exists exactly
// when the key is both a row and the column operand, and at every key dim up to 128 two CTAs fit on one sm_90 SM
// (228 KiB of shared memory, 1 KiB of it reserved per CTA). With the column copy (KDA) the layout overlays it on
// the gates and KKT on the operand tiles (tile/lower_product_gated.cuh), each inside the region it overlays, and
// three CTAs fit; without it (PKDA) every buffer is disjoint.
TEST(LaunchRules, PerChannelChunkLocalFitsOnAnSm) {
  constexpr int kSmPerSm = 228 * 1024, kReservedPerCta = 1024;
  for (int precond : {0, 1})
    for (int side : {0, 1})
      for (int solve : {0, 1})
        for (int K : {64, 100, 120, 128}) {
          if (precond == 0 && side == 1) continue;
          FeatureSet f;
          f.decay = 2;
          f.precond = precond;
          f.side = side;
          f.solve = solve;
          ProblemShape s;
          s.K = K;
          s.V = K;
          TileConfig t;
          t.chunk = 64;
          std::map<std::string, long long> at;
          for (const auto& e : smemOffsets(forwardRoleLaunch(kChunkLocal, f).smem, s, t)) at[e.first] = e.second;
          struct {
            long long q, k, kw, mul, kcol, G, A, tok, total;
          } m{at["q"], at["k"], at["kw"], at["mul"], at["kcol"], at["G"], at["A"], at["tok"], at["total"]};
          SCOPED_TRACE("precond " + std::to_string(precond) + " side " + std::to_string(side) + " solve " +
                       std::to_string(solve) + " K " + std::to_string(K));
          const int KP = pad16(K), tile = 64 * bf16Pitch(KP) * 2, nb = 64 / 16;
          const bool asym = precond == 1 && side == 0, colCopy = !asym && solve == 1;
          EXPECT_EQ(m.kcol >= 0, colCopy);
          const long long kkt = 64 * f32Pitch(64) * 4, gates = 64 * KP * 4;
          // [offset, end) of every buffer that must not overlap another, in layout order
          std::vector<std::pair<long long, long long>> bufs = {{m.q, m.q + tile}, {m.k, m.k + tile}};
          if (asym) bufs.push_back({m.kw, m.kw + tile});
          if (colCopy) {
            // KKT over the operand tiles, the column copy over the gates, each within what it overlays
            EXPECT_EQ(m.A, m.q);
            EXPECT_LE(m.A + kkt, m.mul) << "KKT reaches past the operand overlay";
            EXPECT_EQ(m.kcol, m.G);
            EXPECT_LE(tile, gates) << "the column copy is larger than the gates it overlays";
            EXPECT_EQ(m.A % 16, 0);
          }
          bufs.push_back({m.mul, m.mul + nb * (nb + 1) / 2 * KP * 2});
          bufs.push_back({m.G, m.G + gates});
          if (!colCopy) bufs.push_back({m.A, m.A + kkt});
          bufs.push_back({m.tok, m.tok + 64 * 40 + 64});  // per-channel decay: 16 floats of span scratch
          for (size_t i = 0; i < bufs.size(); ++i) {
            EXPECT_EQ(bufs[i].first % 16, 0) << "buffer " << i;
            if (i > 0) EXPECT_GE(bufs[i].first, bufs[i - 1].second) << "buffer " << i << " overlaps its predecessor";
          }
          EXPECT_LE(bufs.back().second, m.total);
          EXPECT_LE((colCopy ? 3 : 2) * (m.total + kReservedPerCta), kSmPerSm)
              << "chunk_local takes " << m.total << " bytes";
        }
}

// Scalar-decay chunk_local at chunk 32 and K = 128 (GDN, PGDN, PDN, ATQ's default): the CTA fits eight to an sm_90
// SM (228 KiB, 1 KiB reserved per CTA, 128-byte allocation units) with the preconditioner's write-key tile and
// state. PGDN's CTA took 28,240 bytes when its token area kept four extra columns and 16 spare floats, and seven
// fit (measured by ncu: block limit 7 by shared memory), 80 bytes above the line.
TEST(LaunchRules, ScalarDecayChunkLocalFitsEightToAnSmAtChunk32) {
  constexpr int kSmPerSm = 228 * 1024, kReservedPerCta = 1024, kUnit = 128;
  for (int precond : {0, 1})
    for (int side : {0, 1}) {
      if (precond == 0 && side == 1) continue;
      FeatureSet f;
      f.decay = 1;
      f.precond = precond;
      f.side = side;
      f.solve = 1;
      ProblemShape s;
      s.K = 128;
      s.V = 128;
      TileConfig t;
      t.chunk = 32;
      std::map<std::string, long long> at;
      for (const auto& e : smemOffsets(forwardRoleLaunch(kChunkLocal, f).smem, s, t)) at[e.first] = e.second;
      const long long perCta = (at["total"] + kReservedPerCta + kUnit - 1) / kUnit * kUnit;
      EXPECT_LE(8 * perCta, kSmPerSm) << "precond " << precond << " side " << side << ": chunk_local takes "
                                      << at["total"] << " bytes";
    }
}

// Two segment-summary CTAs per SM (DGPS_SUMMARY_PAIRS=1, launch_rules.h segmentSummaryCtasPerSm): only without a
// producer warpgroup, at KP <= 128, C <= 32, two stages, bf16 inputs and a 128-column value tile; wherever a shipped
// package's tunable configuration gets two, the summary's launch has 256 threads (two warpgroups, 128 registers each
// under the launch bound) and two of its CTAs' shared memory fit in one SM's (228 KiB, 1 KiB reserved per CTA).
TEST(LaunchRules, TwoSegmentSummariesFitOnAnSmWhereTheRuleAllows) {
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 128, 32, 2, false, 128), 2);
  EXPECT_EQ(segmentSummaryCtasPerSm(false, false, 128, 32, 2, false, 128), 1) << "off unless the variant asks";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, true, 128, 32, 2, false, 128), 1) << "a producer warpgroup keeps one";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 144, 32, 2, false, 128), 1) << "KP > 128";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 128, 64, 2, false, 128), 1) << "chunk 64";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 128, 32, 1, false, 128), 1) << "one stage";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 128, 32, 2, true, 128), 1) << "fp16 inputs";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 128, 32, 2, false, 112), 1) << "a 112-column tile (no warpgroup MMA)";
  EXPECT_EQ(segmentSummaryCtasPerSm(true, false, 128, 32, 2, false, 64), 1) << "64 columns: not capped, not paired";
  constexpr long long kSmPerSm = 228 * 1024, kReservedPerCta = 1024;
  int paired = 0;
  for (const std::string& dir : packageDirs()) {
    const Package pkg = Package::open(dir);
    const Manifest& m = pkg.manifest();
    if (m.launch.forward_segmented.empty()) continue;
    SCOPED_TRACE(m.name);
    FeatureSet f = deviceFeatures(pkg.spec());
    f.write_key = m.features.write_key;
    for (int K : m.key_dims)
      for (int C : m.tunables.chunk)
        for (int bv : m.tunables.block_v)
          for (int st : m.tunables.stages) {
            if (segmentSummaryCtasPerSm(true, walkRebuildsKw(f, true), pad16(K), C, st, false, valueTile(K, bv)) != 2)
              continue;
            ProblemShape s;
            s.T = 32768;
            s.H = s.HV = 16;
            s.K = s.V = K;
            const Geometry g = segmentGeometry(kSegmentSummary, f, s, TileConfig{C, bv, 4, st}, 64);
            // two warpgroups of consumers, whose warpgroup MMA the split product needs
            EXPECT_EQ(g.block.x, 256u) << "K=" << K << " C=" << C << " BV=" << bv;
            EXPECT_LE(2 * ((long long)g.smem_bytes + kReservedPerCta), kSmPerSm) << "K=" << K << " C=" << C << " BV=" << bv;
            ++paired;
          }
  }
  EXPECT_GT(paired, 0) << "no shipped package pairs its summaries at any tunable configuration";
}

// abi.h FastDiv: the chunk-parallel roles split their block index with it instead of dividing. The quotient rule
// below is dev::udiv's (platform.cuh; the CPU emulator's checks run it for every CTA of every role); here it is held
// to the true quotient for every divisor up to 4096 at the ends of the index range and at random indices, and for
// random divisors up to 2^31.
TEST(LaunchRules, FastDivisionEqualsIntegerDivision) {
  auto quotient = [](uint32_t n, dgps::FastDiv d) {
    const uint32_t hi = uint32_t((uint64_t(n) * d.mul) >> 32);
    return uint32_t((uint64_t(hi) + n) >> d.shift);
  };
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> index(0, 0x7fffffffu);
  auto check = [&](uint32_t d) {
    const dgps::FastDiv f = dgps::fast_div(d);
    const uint32_t ends[] = {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0x7fffffffu, 0x7ffffffeu};
    for (uint32_t n : ends)
      if (n <= 0x7fffffffu) ASSERT_EQ(quotient(n, f), n / d) << n << " / " << d;
    for (int i = 0; i < 64; ++i) {
      const uint32_t n = index(rng);
      ASSERT_EQ(quotient(n, f), n / d) << n << " / " << d;
    }
  };
  for (uint32_t d = 1; d <= 4096; ++d) check(d);
  std::uniform_int_distribution<uint32_t> divisor(4097, 0x7fffffffu);
  for (int i = 0; i < 4096; ++i) check(divisor(rng));
}

// The workspace regions a package's manifest lists (the compiler's tile.workspace): the prepared operands opq / opw
// exist only for per-channel decay (q⊙2^G, k⊙2^{G_C−G}; P is rebuilt on chip or stored in them, never stored
// apart from the write key), the preconditioner state only with a preconditioner, the chunked d-scan's records only
// for the chunked hypergrad_ogd scan, and the stored write key pwk only where the compile chose it without opw.
TEST(LaunchRules, NoWorkspaceBufferHoldsAPreconditionedOperand) {
  for (const std::string& dir : packageDirs()) {
    const Package pkg = Package::open(dir);
    const Manifest& m = pkg.manifest();
    SCOPED_TRACE(m.name);
    if (!m.has_forward) continue;
    FeatureSet f = deviceFeatures(pkg.spec());
    f.write_key = m.features.write_key;
    std::set<std::string> names;
    for (const auto& b : m.launch.workspace) names.insert(b.name);
    EXPECT_EQ(names.count("opq"), f.decay == 2 ? 1u : 0u);
    EXPECT_EQ(names.count("opw"), f.decay == 2 ? 1u : 0u);
    EXPECT_EQ(names.count("pdec"), f.decay == 2 ? 1u : 0u);
    EXPECT_EQ(names.count("pst"), f.precond == 1 ? 1u : 0u);
    EXPECT_EQ(names.count("hgtri"), hypergradChunked(f) ? 1u : 0u);
    EXPECT_EQ(names.count("pwk"), storesKw(f) && !needOpW(f) ? 1u : 0u);
    EXPECT_EQ(names.count("aqk"), 1u);
    EXPECT_EQ(names.count("tok"), 1u);
    EXPECT_EQ(names.count("tb"), f.solve == 1 ? 1u : 0u);
  }
}

// The bf16 operand rows chunk_local writes for the walks (opq, opk, opw, the stored pwk and pwq) have pitch
// KP = pad16(K), not K: at K = 120 a row is 256 bytes, so every row of a region (each 256-aligned) starts on a
// 128-byte boundary, as at K = 128 (the regions' sizes are the tile IR's: tests/lit/dgpsc/workspace.test). The
// stored query exists exactly for a query-side preconditioner with write_key 1 and scalar or no decay, and then
// no walk runs a producer warpgroup.
TEST(LaunchRules, OperandRowsHavePitchKPAndAStoredQueryNeedsNoProducer) {
  for (int K : {64, 120, 128}) {
    EXPECT_EQ(workspaceRowPitch(K), (K + 15) / 16 * 16);
    EXPECT_EQ(workspaceRowPitch(K) * 2 % 128, 0) << "K=" << K << ": rows of 128-byte multiples";
  }
  FeatureSet atq;
  atq.decay = 1, atq.gain = 1, atq.precond = 1, atq.side = 1, atq.solve = 1;
  EXPECT_FALSE(needPwq(atq));
  EXPECT_TRUE(walkRebuildsQ(atq));
  atq.write_key = kWriteKeyStored;
  EXPECT_TRUE(needPwq(atq));
  EXPECT_FALSE(walkRebuildsQ(atq));
  EXPECT_FALSE(walkRebuilds(atq, false));
  EXPECT_FALSE(walkRebuilds(atq, true));
  // no stored query for a key-side preconditioner or per-channel decay
  FeatureSet pgdn = atq;
  pgdn.side = 0;
  EXPECT_FALSE(needPwq(pgdn));
  FeatureSet diagQuery = atq;
  diagQuery.decay = 2;
  EXPECT_FALSE(needPwq(diagQuery));
}

// OSDN's d-scan: without a clamp the chunked roles (a per-chunk summary, then the pass over chunks); with a clamp
// the per-token warp scan alone. (Their workspace regions are the tile IR's: tests/lit/tile/workspace.mlir.)
TEST(LaunchRules, AClampDecidesTheHypergradScanForm) {
  FeatureSet f;
  f.decay = 0, f.gain = 1, f.precond = 1, f.side = 0, f.source = 1, f.solve = 1;
  FeatureSet clamped = f;
  clamped.clamp = 1;
  ASSERT_TRUE(hypergradChunked(f));
  ASSERT_FALSE(hypergradChunked(clamped));
  int roles[kMaxRoles];
  ASSERT_EQ(forwardRoles(f, roles), 4);
  EXPECT_EQ(roles[0], kPrecondSummary);
  EXPECT_EQ(roles[1], kPrecondScan);
  ASSERT_EQ(forwardRoles(clamped, roles), 3);
  EXPECT_EQ(roles[0], kPrecondScan);
  ProblemShape s;
  s.B = s.N = 3;
  s.T = 1000;
  s.H = s.HV = 4;
  s.K = s.V = 128;
  const TileConfig t{64, 64, 4, 2};
  // the chunked pass: one CTA per (sequence, key head); the token scan: one warp per pair
  EXPECT_EQ(forwardGeometry(kPrecondScan, f, s, t).grid.x, unsigned(s.N * s.H));
  EXPECT_EQ(forwardGeometry(kPrecondScan, clamped, s, t).grid.x, unsigned(cdiv(s.N * s.H, 4)));
  EXPECT_EQ(forwardGeometry(kPrecondSummary, f, s, t).grid.x, unsigned(chunkSlots(s, t.chunk) * s.H));
  EXPECT_LE(forwardGeometry(kPrecondSummary, f, s, t).smem_bytes, kSm90MaxDynamicSmem);
  EXPECT_LE(forwardGeometry(kPrecondScan, f, s, t).smem_bytes, kSm90MaxDynamicSmem);
}

// The chunked feedback scan carves its shared memory with the tile library's own layout
// (tile/feedback_scan_layout.h); the launch contract declares the same layout for the manifest. Every offset the
// tile headers use must match, at every key dim and chunk the kernels compile.
TEST(LaunchRules, FeedbackScanLayoutsMatchTheTileLibrary) {
  FeatureSet f;
  f.precond = 1;
  f.source = 1;
  f.solve = 1;
  ASSERT_TRUE(hypergradChunked(f));
  for (int K = 8; K <= 256; K += 8)
    for (int C : {16, 32, 64}) {
      SCOPED_TRACE("K " + std::to_string(K) + " C " + std::to_string(C));
      ProblemShape s;
      s.K = K;
      s.V = K;
      TileConfig t;
      t.chunk = C;
      std::map<std::string, long long> sum, pass;
      for (const auto& e : smemOffsets(forwardRoleLaunch(kPrecondSummary, f).smem, s, t)) sum[e.first] = e.second;
      for (const auto& e : smemOffsets(forwardRoleLaunch(kPrecondScan, f).smem, s, t)) pass[e.first] = e.second;
      const tile::FeedbackSummarySmem a = tile::feedbackSummarySmem(K, C);
      EXPECT_EQ(sum["key"], a.key);
      EXPECT_EQ(sum["ulo"], a.ulo);
      EXPECT_EQ(sum["gt"], a.gt);
      EXPECT_EQ(sum["tok"], a.tok);
      EXPECT_EQ(sum["bar"], a.bar);
      EXPECT_EQ(sum["total"], a.total);
      const tile::FeedbackPassSmem b = tile::feedbackPassSmem(K, C);
      EXPECT_EQ(pass["stage_bytes"], b.stage_bytes);
      EXPECT_EQ(pass["key"], b.key);
      EXPECT_EQ(pass["tri"], b.tri);
      EXPECT_EQ(pass["vec"], b.vec);
      EXPECT_EQ(pass["d"], b.d);
      EXPECT_EQ(pass["w"], b.w);
      EXPECT_EQ(pass["c"], b.c);
      EXPECT_EQ(pass["part"], b.part);
      EXPECT_EQ(pass["total"], b.total);
      EXPECT_EQ(forwardGeometry(kPrecondScan, f, s, t).block.x, (unsigned)tile::kFeedbackPassThreads);
    }
}

// The kernels index pipeline stage s at s * stage_bytes from byte 0, so a layout whose stages come after another
// item is refused by every reading rather than printed with offsets the kernels would not use.
TEST(LaunchRules, StagesMustOpenTheLayout) {
  SmemLayout stage, late;
  stage.region("tile", chunk() * KP() * 2);
  late.region("head", 64).stages(stage, 128, stages());
  EXPECT_THROW((void)smemOffsets(late, ProblemShape{}, TileConfig{}), std::logic_error);
  EXPECT_THROW((void)smemLayoutCuda("Late", "late_smem", late), std::logic_error);
  SmemLayout first;
  first.stages(stage, 128, stages()).region("tail", 64);
  std::map<std::string, long long> at;
  for (const auto& e : smemOffsets(first, ProblemShape{}, TileConfig{})) at[e.first] = e.second;
  EXPECT_EQ(at["stage_bytes"], 64 * 128 * 2);  // already a multiple of 128 at chunk 64, K = 128
  EXPECT_EQ(at["tail"], 2 * 64 * 128 * 2);
  EXPECT_EQ(at["total"], 2 * 64 * 128 * 2 + 64);
}

}  // namespace
}  // namespace dgps
