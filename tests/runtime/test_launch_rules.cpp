// The device library's launch rules (runtime/device/dgps/device/launch_rules.h) for every committed package:
// the default configuration launches within the sm_90 limits, state_output carries its producer warpgroup
// exactly when a preconditioner needs rebuilding, and no workspace buffer holds a preconditioned operand.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dgps/device/launch_rules.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/runtime/Package.h"

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

TEST(LaunchRules, NoWorkspaceBufferHoldsAPreconditionedOperand) {
  for (const std::string& dir : packageDirs()) {
    const Package pkg = Package::open(dir);
    const Manifest& m = pkg.manifest();
    SCOPED_TRACE(m.name);
    const FeatureSet f = deviceFeatures(pkg.spec());
    ProblemShape s;
    s.B = s.N = 2;
    s.T = 300;
    s.H = s.HV = 4;
    const WorkspaceLayout w = workspaceLayout(f, s, launch::TileConfig{64, 64, 4, 2});
    // opq / opw exist only for per-channel decay, and then hold q⊙2^G and k⊙2^{G_C−G}: P is rebuilt on chip
    EXPECT_EQ(w.opk - w.opq > 0, f.decay == 2);
    EXPECT_EQ(w.pdec - w.opw > 0, f.decay == 2);
    EXPECT_EQ(w.psum - w.pst > 0, f.precond == 1);
    long long prev = 0;
    for (long long off : {w.tb, w.aqk, w.tok, w.pst, w.psum, w.pgam, w.pcoef, w.opq, w.opk, w.opw, w.pdec, w.total}) {
      EXPECT_EQ(off % 256, 0) << off;
      EXPECT_GE(off, prev);
      prev = off;
    }
  }
}

}  // namespace
}  // namespace dgps
