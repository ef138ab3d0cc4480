#include "LaunchPlan.h"

#include <limits>

#include "dgps/device/launch_rules.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace detail {
namespace {

LaunchGeometry toGeometry(const launch::Geometry& g) {
  LaunchGeometry k;
  k.grid = {g.grid.x, g.grid.y, g.grid.z};
  k.block = {g.block.x, g.block.y, g.block.z};
  k.shared_bytes = std::size_t(g.smem_bytes);
  return k;
}

KernelLaunch named(const std::string& role, const std::string& symbol, const LaunchGeometry& g) {
  KernelLaunch k;
  k.role = role;
  k.symbol = symbol;
  k.grid = g.grid;
  k.block = g.block;
  k.shared_bytes = g.shared_bytes;
  return k;
}

// The rules count blocks in grid.x only; refuse a problem whose block count would not fit (it would
// otherwise wrap around in the unsigned conversion and silently skip work).
void checkGridCount(const char* call, const char* role, long long blocks) {
  const long long limit = std::numeric_limits<int>::max();  // 2^31 - 1, CUDA's grid.x limit
  if (blocks > limit || blocks < 1) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string(call) + ": the problem needs " + std::to_string(blocks) + " thread blocks for " +
                           role + ", beyond CUDA's grid limit of 2^31-1; split the batch");
  }
}

launch::ProblemShape forwardShape(const ForwardProblem& p) {
  launch::ProblemShape s;
  s.B = p.batch;
  s.T = p.seq_len;
  s.N = p.num_seqs;
  s.H = p.heads_qk;
  s.HV = p.heads_v;
  s.K = p.key_dim;
  s.V = p.value_dim;
  s.varlen = p.varlen ? 1 : 0;
  s.f16 = p.input_dtype == ScalarType::F16 ? 1 : 0;
  return s;
}

}  // namespace

void checkForwardRoles(const Package& package) {
  const Manifest& m = package.manifest();
  int roles[launch::kMaxRoles];
  const int n = launch::forwardRoles(deviceFeatures(package.spec()), roles);
  // Compared in place (no strings built): forward() runs this on every call.
  bool same = std::size_t(n) == m.forward_roles.size();
  for (int i = 0; same && i < n; ++i) same = m.forward_roles[std::size_t(i)] == launch::roleName(roles[i]);
  if (same) return;
  std::string want, have;
  for (int i = 0; i < n; ++i) want += (want.empty() ? "" : ", ") + std::string(launch::roleName(roles[i]));
  for (const auto& r : m.forward_roles) have += (have.empty() ? "" : ", ") + r;
  throw RuntimeError(RuntimeErrorCode::Package,
                     package.directory() + "/manifest.yaml: forward.roles is [" + have +
                         "] but this runtime's launch rules run [" + want +
                         "] for these features (the package and the runtime's device library disagree; regenerate "
                         "the package with the matching dgpsc)");
}

ForwardGeometry forwardGeometry(const Package& package, const ForwardProblem& p, const TileConfig& config) {
  static_assert(kMaxForwardKernels == launch::kMaxRoles, "ForwardGeometry holds one entry per launch-rules role");
  const launch::FeatureSet f = deviceFeatures(package.spec());
  const launch::ProblemShape s = forwardShape(p);
  const TileConfig& t = config;
  int roles[launch::kMaxRoles];
  const int n = launch::forwardRoles(f, roles);
  const long long slots = launch::chunkSlots(s, t.chunk);
  const long long bv = launch::valueTile(int(s.V), t.block_v);
  ForwardGeometry plan;
  plan.count = n;
  for (int i = 0; i < n; ++i) {
    long long blocks = 0;
    switch (roles[i]) {
      case launch::kPrecondSummary: blocks = slots * s.H; break;
      case launch::kPrecondScan: blocks = f.source == 1 ? launch::cdiv(s.N * s.H, 4) : s.N * s.H; break;
      case launch::kChunkLocal: blocks = slots * s.HV; break;
      default: blocks = s.N * s.HV * launch::cdiv(s.V, bv); break;
    }
    checkGridCount("forward", launch::roleName(roles[i]), blocks);
    plan.kernels[std::size_t(i)] = toGeometry(launch::forwardGeometry(roles[i], f, s, t));
  }
  plan.workspace_bytes = std::size_t(launch::workspaceBytes(f, s, t));
  return plan;
}

LaunchGeometry decodeGeometry(const Package& package, const DecodeProblem& p, const TileConfig& config) {
  const launch::FeatureSet f = deviceFeatures(package.spec());
  launch::ProblemShape s;
  s.B = p.batch;
  s.T = 1;
  s.N = p.batch;
  s.H = p.heads_qk;
  s.HV = p.heads_v;
  s.K = p.key_dim;
  s.V = p.value_dim;
  s.f16 = p.input_dtype == ScalarType::F16 ? 1 : 0;
  const TileConfig& t = config;
  const long long tiles = launch::cdiv(s.V, launch::decodeTile(s, t));
  checkGridCount("decode", "decode", f.precond == 1 ? s.B * s.H : s.B * s.HV * tiles);
  return toGeometry(launch::decodeGeometry(f, s, t));
}

ForwardPlan planForward(const Package& package, const ForwardProblem& p, const TileConfig& config) {
  checkForwardRoles(package);
  const ForwardGeometry g = forwardGeometry(package, p, config);
  const Manifest& m = package.manifest();
  ForwardPlan plan;
  for (int i = 0; i < g.count; ++i) {
    plan.kernels.push_back(named(m.forward_roles[std::size_t(i)], m.forward_symbols[std::size_t(i)],
                                 g.kernels[std::size_t(i)]));
  }
  plan.workspace_bytes = g.workspace_bytes;
  return plan;
}

KernelLaunch planDecode(const Package& package, const DecodeProblem& p, const TileConfig& config) {
  return named("decode", package.manifest().decode_symbol, decodeGeometry(package, p, config));
}

}  // namespace detail
}  // namespace dgps
