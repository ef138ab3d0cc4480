// The runtime launches what the manifest's `launch` section says (LaunchPlan.cpp evaluates its formulas).
// Those formulas are the launch contract's expression trees printed as text (dsl LaunchContract.h), and the kernels
// carve their shared memory with the same trees printed as CUDA; so the runtime's evaluation of the printed text
// must equal the trees' own host evaluation (launch::forwardGeometry / decodeGeometry over deviceFeatures(spec)),
// which catches a formula printed with the wrong precedence, a let the runtime lacks, or a manifest writer that
// drops a role. The old feature-switched workspace layout is kept here, in the test only, as an independent side (expectedWorkspace below: the compiler now declares the regions in the tile
// IR and prints the kernels' offsets and these formulas from that one declaration): for every shipped package
// and a grid of shapes (dense and varlen, GVA ratios, K and V including 120, odd T) and configurations (chunk
// 32/64, every block_v that compiles, warps, stages) both must agree on every grid, block, shared-memory size,
// workspace buffer offset and total.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "LaunchPlan.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/LaunchManifest.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"

namespace dgps {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> packageDirs() {
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(std::string(DGPS_SOURCE_DIR) + "/generated"))
    if (fs::exists(e.path() / "manifest.yaml")) dirs.push_back(e.path().string());
  return dirs;
}

// The union of a tunables list and the values the test always tries.
std::vector<int> values(std::vector<int> listed, std::initializer_list<int> extra) {
  std::set<int> s(listed.begin(), listed.end());
  s.insert(extra.begin(), extra.end());
  return {s.begin(), s.end()};
}

std::vector<TileConfig> configs(const Manifest& m) {
  std::vector<TileConfig> out;
  for (int c : values(m.tunables.chunk, {32, 64}))
    for (int bv : values(m.tunables.block_v, {16, 32, 48, 64, 128}))
      for (int w : values(m.tunables.warps, {4, 8}))
        for (int st : values(m.tunables.stages, {1, 2})) out.push_back(TileConfig{c, bv, w, st});
  return out;
}

// The workspace a forward of `f` needs, derived independently of the compiler from the features (the layout the
// device library used): (region, byte offset) in layout order, each region 256-aligned, and the total. With
// L >= 1 the segmented pass's regions follow: E and the start states [S, HV, K, V] and M [S, HV, K, K] f32 over
// launch::segmentSlots.
struct ExpectedWorkspace {
  std::vector<std::pair<std::string, long long>> offsets;
  long long total = 0;
};
ExpectedWorkspace expectedWorkspace(const launch::FeatureSet& f, const launch::ProblemShape& s,
                                    const launch::TileConfig& t, long long L = 0) {
  ExpectedWorkspace w;
  const long long S = launch::chunkSlots(s, t.chunk), C = t.chunk;
  const long long KP = (s.K + 15) / 16 * 16;  // the operand rows' pitch, 16-element multiples
  const bool pre = f.precond == 1, diag = f.decay == 2, hgc = launch::hypergradChunked(f);
  auto add = [&](bool used, const char* name, long long bytes) {
    if (!used) return;
    w.offsets.push_back({name, w.total});
    w.total += launch::align_up(bytes, 256);
  };
  add(f.solve == 1, "tb", S * s.HV * C * C * 2);
  add(true, "aqk", S * s.HV * C * C * 2);
  add(true, "tok", S * s.HV * (C + 1) * 8 * 4);
  add(pre, "pst", S * s.H * s.K * 4);
  add(pre && f.source == 0, "psum", S * s.H * s.K * 4);
  add(pre && f.source == 0, "pgam", S * s.H * 4);
  add(pre && f.source == 1, "pcoef", S * s.H * C * 4);
  add(diag, "opq", S * s.HV * C * KP * 2);
  add(diag && f.solve == 1, "opk", S * s.HV * C * KP * 2);
  add(diag, "opw", S * s.HV * C * KP * 2);
  add(diag, "pdec", S * s.HV * s.K * 4);
  add(hgc, "hgtri", S * s.H * (C * (C + 1) / 2) * 4);
  add(hgc, "hgvec", S * s.H * (2 * C + 4) * 4);
  // the stored write key: a key-side preconditioner whose compile stores it, without per-channel decay (then opw)
  add(pre && f.side == 0 && f.write_key != launch::kWriteKeyRebuilt && !diag, "pwk", S * s.HV * C * KP * 2);
  // the stored query: a query-side preconditioner whose compile stores it (scalar or no decay)
  add(pre && f.side == 1 && f.write_key == launch::kWriteKeyStored && !diag, "pwq", S * s.HV * C * KP * 2);
  if (L >= 1) {
    const long long G = launch::segmentSlots(s, t.chunk, L);
    add(true, "seg_ext", G * s.HV * s.K * s.V * 4);
    add(true, "seg_trans", G * s.HV * s.K * s.K * 4);
    add(true, "seg_start", G * s.HV * s.K * s.V * 4);
  }
  return w;
}

void expectSame(const detail::LaunchGeometry& got, const launch::Geometry& want, const std::string& what) {
  EXPECT_EQ(got.grid[0], want.grid.x) << what << " grid.x";
  EXPECT_EQ(got.grid[1], want.grid.y) << what << " grid.y";
  EXPECT_EQ(got.grid[2], want.grid.z) << what << " grid.z";
  EXPECT_EQ(got.block[0], want.block.x) << what << " block.x";
  EXPECT_EQ(got.block[1], want.block.y) << what << " block.y";
  EXPECT_EQ(got.block[2], want.block.z) << what << " block.z";
  EXPECT_EQ(got.shared_bytes, want.smem_bytes) << what << " smem";
}

TEST(ManifestLaunch, FormulasEqualTheLaunchRulesForEveryPackageShapeAndConfig) {
  const std::vector<std::string> dirs = packageDirs();
  ASSERT_GE(dirs.size(), 10u) << "expected every shipped package under generated/";
  long long compared = 0;
  for (const std::string& dir : dirs) {
    const Package pkg = Package::open(dir);
    const Manifest& m = pkg.manifest();
    SCOPED_TRACE(m.name);
    launch::FeatureSet f = deviceFeatures(pkg.spec());
    f.write_key = m.features.write_key;  // not in the spec: the compile chose it (manifest features.write_key)

    if (m.has_forward) {
      int roles[launch::kMaxRoles];
      const int n = launch::forwardRoles(f, roles);
      ASSERT_EQ(m.forward_roles.size(), std::size_t(n));
      for (int i = 0; i < n; ++i) EXPECT_EQ(m.forward_roles[std::size_t(i)], launch::roleName(roles[i]));
    }
    for (const TileConfig& t : configs(m))
      for (int K : m.key_dims)
        for (int V : m.value_dims)
          for (int ratio : {1, 2, 4})
            for (bool varlen : {false, true})
              for (long long T : {1LL, 63LL, 64LL, 65LL, 1000LL}) {
                ForwardProblem p;
                p.varlen = varlen;
                p.num_seqs = varlen ? 3 : 2;
                p.batch = varlen ? 1 : 2;
                p.seq_len = varlen ? 3 * T : T;
                p.heads_qk = 3;
                p.heads_v = 3 * ratio;
                p.key_dim = K;
                p.value_dim = V;
                p.input_dtype = (T % 2) ? ScalarType::F16 : ScalarType::BF16;
                launch::ProblemShape s;
                s.B = p.batch;
                s.T = p.seq_len;
                s.N = p.num_seqs;
                s.H = p.heads_qk;
                s.HV = p.heads_v;
                s.K = K;
                s.V = V;
                s.varlen = varlen;
                s.f16 = p.input_dtype == ScalarType::F16;
                const std::string what = toString(t) + " K=" + std::to_string(K) + " V=" + std::to_string(V) +
                                         " HV=" + std::to_string(p.heads_v) + " T=" + std::to_string(T) +
                                         (varlen ? " varlen" : "");
                if (m.has_forward) {
                  const detail::ForwardGeometry g = detail::forwardGeometry(pkg, p, t);
                  int roles[launch::kMaxRoles];
                  ASSERT_EQ(g.count, launch::forwardRoles(f, roles));
                  for (int i = 0; i < g.count; ++i)
                    expectSame(g.kernels[std::size_t(i)], launch::forwardGeometry(roles[i], f, s, t),
                               what + " " + launch::roleName(roles[i]));
                  const ExpectedWorkspace w = expectedWorkspace(f, s, t);
                  EXPECT_EQ(g.workspace_bytes, std::size_t(w.total)) << what << " workspace";
                  ASSERT_EQ(g.buffers, int(w.offsets.size())) << what;
                  ASSERT_EQ(m.launch.workspace.size(), w.offsets.size());
                  for (int i = 0; i < g.buffers; ++i) {
                    EXPECT_EQ(m.launch.workspace[std::size_t(i)].name, w.offsets[std::size_t(i)].first) << what;
                    EXPECT_EQ(g.buffer_offsets[std::size_t(i)], std::size_t(w.offsets[std::size_t(i)].second))
                        << what << " " << w.offsets[std::size_t(i)].first;
                  }
                }
                if (m.has_decode && T == 1) {
                  DecodeProblem d;
                  d.batch = varlen ? 5 : 2;
                  d.heads_qk = p.heads_qk;
                  d.heads_v = p.heads_v;
                  d.key_dim = K;
                  d.value_dim = V;
                  d.input_dtype = p.input_dtype;
                  launch::ProblemShape ds = s;
                  ds.B = ds.N = d.batch;
                  ds.T = 1;
                  ds.varlen = 0;
                  expectSame(detail::decodeGeometry(pkg, d, t), launch::decodeGeometry(f, ds, t), what + " decode");
                }
                ++compared;
              }
  }
  EXPECT_GT(compared, 10000);
}

// A problem whose grid needs more than 2^31-1 blocks, or whose formulas overflow 64 bits, is one
// InvalidArgument naming the role or the formula; it never wraps around into a small launch.
TEST(ManifestLaunch, HugeProblemsAreRefusedNotWrapped) {
  const Package pkg = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  ForwardProblem p;
  p.batch = p.num_seqs = 1LL << 20;
  p.seq_len = 1LL << 20;
  p.heads_qk = p.heads_v = 4;
  p.key_dim = p.value_dim = 128;
  try {
    detail::forwardGeometry(pkg, p, pkg.manifest().default_config);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("forward: the problem needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("beyond CUDA's grid limit of 2^31-1"), std::string::npos) << e.what();
  }
  p.batch = p.num_seqs = 1LL << 40;
  p.seq_len = 1LL << 40;
  try {
    detail::forwardGeometry(pkg, p, pkg.manifest().default_config);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("overflows 64-bit integers for this problem"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.yaml: launch."), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgps

namespace dgps {
namespace {

// The segmented forward (launch.forward_segmented, written for every package with a chunk forward, preconditioned
// ones and several steps per token included) against LaunchContract.h forwardGeometry / segmentGeometry and expectedWorkspace: kernels in the order of the plain roles before state_output
// (precond_summary and precond_scan where there is a preconditioner, chunk_local), then segment_summary,
// segment_fold, segment_state_output, and the segment regions after the chunk regions, for shapes with one
// segment, a partial last segment, many segments, and a packed batch.
TEST(ManifestLaunch, SegmentedFormulasEqualTheLaunchRules) {
  int packages = 0;
  for (const std::string& dir : packageDirs()) {
    const Package pkg = Package::open(dir);
    const Manifest& m = pkg.manifest();
    SCOPED_TRACE(m.name);
    // several Householder steps per token too: the walks run over the step rows (T·n_h of them)
    const bool covered = m.has_forward;
    ASSERT_EQ(!m.launch.forward_segmented.empty(), covered) << "launch.forward_segmented presence";
    if (!covered) continue;
    ++packages;
    launch::FeatureSet f = deviceFeatures(pkg.spec());
    f.write_key = m.features.write_key;  // not in the spec: the compile chose it (manifest features.write_key)
    int plain[launch::kMaxRoles];
    const int np = launch::forwardRoles(f, plain);
    std::vector<int> before;  // the plain roles the segmented forward launches first
    for (int i = 0; i < np && plain[i] != launch::kStateOutput; ++i) before.push_back(plain[i]);
    std::vector<std::string> roles;
    for (int r : before) roles.push_back(launch::roleName(r));
    for (const char* r : {"segment_summary", "segment_fold", "segment_state_output"}) roles.push_back(r);
    ASSERT_EQ(m.launch.forward_segmented.size(), roles.size());
    for (std::size_t i = 0; i < roles.size(); ++i) EXPECT_EQ(m.launch.forward_segmented[i].role, roles[i]);
    for (const TileConfig& t : configs(m))
      for (int K : m.key_dims)
        for (bool varlen : {false, true})
          for (long long T : {65LL, 1000LL, 4096LL})
            for (long long L : {1LL, 3LL, 100LL}) {
              ForwardProblem p;
              p.varlen = varlen;
              p.num_seqs = varlen ? 3 : 2;
              p.batch = varlen ? 1 : 2;
              p.seq_len = varlen ? 3 * T + 7 : T;
              p.row_steps = m.features.steps;  // the manifest's T is the kernels' row axis (T·n_h)
              p.heads_qk = 2;
              p.heads_v = 4;
              p.key_dim = K;
              p.value_dim = m.value_dims.back();
              launch::ProblemShape s;
              s.B = p.batch;
              s.T = p.rows();
              s.N = p.num_seqs;
              s.H = p.heads_qk;
              s.HV = p.heads_v;
              s.K = K;
              s.V = p.value_dim;
              s.varlen = varlen;
              const std::string what = toString(t) + " K=" + std::to_string(K) + " T=" + std::to_string(T) +
                                       " L=" + std::to_string(L) + (varlen ? " varlen" : "");
              const detail::ForwardGeometry g = detail::forwardGeometrySegmented(pkg, p, t, L);
              ASSERT_EQ(g.count, int(roles.size()));
              for (std::size_t i = 0; i < before.size(); ++i)
                expectSame(g.kernels[i], launch::forwardGeometry(before[i], f, s, t), what + " " + roles[i]);
              for (int r = 0; r < launch::kSegmentRoles; ++r)
                expectSame(g.kernels[before.size() + std::size_t(r)], launch::segmentGeometry(r, f, s, t, L),
                           what + " " + launch::segmentRoleName(r));
              const ExpectedWorkspace w = expectedWorkspace(f, s, t, L);
              EXPECT_EQ(g.workspace_bytes, std::size_t(w.total)) << what << " workspace";
              const std::size_t chunkBuffers = m.launch.workspace.size();
              ASSERT_EQ(g.buffers, int(chunkBuffers + 3));
              ASSERT_EQ(w.offsets.size(), chunkBuffers + 3);
              for (std::size_t i = chunkBuffers; i < chunkBuffers + 3; ++i)
                EXPECT_EQ(g.buffer_offsets[i], std::size_t(w.offsets[i].second)) << what << " " << w.offsets[i].first;
            }
    // L < 1 is the caller's error, named
    ForwardProblem p;
    p.batch = p.num_seqs = 1;
    p.seq_len = 100;
    p.heads_qk = p.heads_v = 1;
    p.key_dim = m.key_dims.front();
    p.value_dim = m.value_dims.front();
    try {
      detail::forwardGeometrySegmented(pkg, p, m.default_config, 0);
      ADD_FAILURE() << "L = 0 accepted";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("expected >= 1 chunk"), std::string::npos) << e.what();
    }
  }
  // every package with a chunk forward
  EXPECT_EQ(packages, 13) << "deltanet, gated_deltaproduct, gdn, gdn_gva, kda, linear_attention, mamba2 and the "
                             "preconditioned atq, osdn, osdn_apf, pdn, pgdn, pkda carry the segmented forward";
}


// A package's write key stored by chunk_local (DeviceFeatures.h FeatureSet::write_key, set by the tile IR): the
// manifest's formulas (dsl LaunchManifest.cpp, written with the package's write_key) against the launch contract's host
// values for the same FeatureSet: the walks' threads (no producer warpgroup in a walk that loads the
// key) and shared memory, plain and segmented. (The workspace's pwk region per write key is the compiler's
// declaration: tests/lit/dgpsc/write-key.test compiles each form and checks its manifest.) The shipped packages
// take the key in the form their manifest names (features.write_key, the tests above); here each key-side
// preconditioned package's manifest is
// rewritten with write_key 1 and, for a scalar decay, 2 (segment walks only), and the query-side atq's with 0 and
// 1 (the stored query: the pwq region, no producer warpgroup in the walks that write o).
TEST(ManifestLaunch, WriteKeyFormulasEqualTheLaunchRules) {
  int variants = 0;
  for (const std::string& dir : packageDirs()) {
    const Package shipped = Package::open(dir);
    const launch::FeatureSet base = deviceFeatures(shipped.spec());
    const bool querySide = launch::rebuildsQ(base);
    if (!(launch::rebuildsKw(base) || querySide) || shipped.manifest().features.steps != 1) continue;
    for (int wk : {launch::kWriteKeyRebuilt, launch::kWriteKeyStored, launch::kWriteKeyStoredSegments}) {
      if (wk == launch::kWriteKeyStoredSegments && (launch::needOpW(base) || querySide)) continue;
      if (wk == launch::kWriteKeyRebuilt && !querySide) continue;
      launch::FeatureSet f = base;
      f.write_key = wk;
      SCOPED_TRACE(shipped.name() + " write_key " + std::to_string(wk));
      // the package with its launch section written for f
      const fs::path tmp = fs::path(::testing::TempDir()) / ("write_key_" + shipped.name() + std::to_string(wk));
      fs::remove_all(tmp);
      fs::create_directories(tmp);
      for (const char* file : {"kernels.cu", "spec.yaml"}) fs::copy_file(fs::path(dir) / file, tmp / file);
      std::ifstream in(fs::path(dir) / "manifest.yaml");
      std::stringstream text;
      text << in.rdbuf();
      const std::string manifest = text.str();
      const size_t from = manifest.find("launch:\n"), to = manifest.find("tunables:");
      ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to);
      LaunchSectionRequest r;
      r.name = shipped.name();
      r.features = f;
      r.forward_roles = shipped.manifest().forward_roles;
      r.decode = shipped.manifest().launch.has_decode;
      r.segmented = true;
      // a one-region placeholder workspace: this test checks the kernels' geometry, not the workspace (the
      // compiler's, see above)
      r.workspace = {{"aqk", "slots * HV * chunk * chunk * 2"}};
      r.segment_workspace = {{"seg_ext", "HV * K * V * 4"}};
      std::string launchYaml, error;
      ASSERT_TRUE(launchSectionYaml(r, &launchYaml, &error)) << error;
      std::ofstream(tmp / "manifest.yaml") << manifest.substr(0, from) << launchYaml << manifest.substr(to);
      const Package pkg = Package::open(tmp.string());
      const Manifest& m = pkg.manifest();
      int plain[launch::kMaxRoles];
      const int np = launch::forwardRoles(f, plain);
      for (const TileConfig& t : configs(m))
        for (int K : m.key_dims)
          for (bool varlen : {false, true}) {
            ForwardProblem p;
            p.varlen = varlen;
            p.num_seqs = varlen ? 3 : 2;
            p.batch = varlen ? 1 : 2;
            p.seq_len = varlen ? 3007 : 1000;
            p.heads_qk = 2;
            p.heads_v = 4;
            p.key_dim = K;
            p.value_dim = m.value_dims.back();
            launch::ProblemShape s;
            s.B = p.batch;
            s.T = p.seq_len;
            s.N = p.num_seqs;
            s.H = p.heads_qk;
            s.HV = p.heads_v;
            s.K = K;
            s.V = p.value_dim;
            s.varlen = varlen;
            const std::string what = toString(t) + " K=" + std::to_string(K) + (varlen ? " varlen" : "");
            const detail::ForwardGeometry g = detail::forwardGeometry(pkg, p, t);
            ASSERT_EQ(g.count, np);
            for (int i = 0; i < np; ++i)
              expectSame(g.kernels[std::size_t(i)], launch::forwardGeometry(plain[i], f, s, t),
                         what + " " + launch::roleName(plain[i]));
            for (long long L : {1LL, 3LL}) {
              const detail::ForwardGeometry gs = detail::forwardGeometrySegmented(pkg, p, t, L);
              for (int r = 0; r < launch::kSegmentRoles; ++r)
                expectSame(gs.kernels[std::size_t(np - 1 + r)], launch::segmentGeometry(r, f, s, t, L),
                           what + " " + launch::segmentRoleName(r));
            }
          }
      // the rule itself: a walk given the stored key (or query) runs its consumer warps only; a query-side
      // preconditioner's summary walks read no query and never have producers
      launch::ProblemShape bvShape;
      launch::TileConfig bvTile;
      bvTile.block_v = 64;
      const long long consumers = 64 / 16 * 32, withProducers = (64 / 16 + 4) * 32;
      auto threads = [&](const launch::RoleLaunch& r) { return r.threads.eval(bvShape, bvTile); };
      EXPECT_EQ(threads(launch::forwardRoleLaunch(launch::kStateOutput, f)),
                wk == launch::kWriteKeyStored ? consumers : withProducers);
      EXPECT_EQ(threads(launch::segmentRoleLaunch(launch::kSegmentStateOutput, f)),
                querySide && wk == launch::kWriteKeyRebuilt ? withProducers : consumers);
      EXPECT_EQ(threads(launch::segmentRoleLaunch(launch::kSegmentSummary, f)), consumers);
      ++variants;
    }
  }
  // the key-side preconditioned packages: pdn, pgdn, osdn, osdn_apf (write_key 1 and 2), pkda (1); atq (0 and 1)
  EXPECT_EQ(variants, 11);
}

}  // namespace
}  // namespace dgps
