#include "LaunchPlan.h"

#include <cstdint>
#include <limits>

#include "dgps/runtime/Error.h"

namespace dgps {
namespace detail {
namespace {

// The evaluation environment of one call: the symbols (LaunchFormula.h order), then the manifest's lets.
struct Env {
  std::int64_t v[kFormulaEnvSize] = {};
  std::int64_t& operator[](FormulaSymbol s) { return v[int(s)]; }
};

void bindConfig(Env& e, const TileConfig& c) {
  e[FormulaSymbol::chunk] = c.chunk;
  e[FormulaSymbol::block_v] = c.block_v;
  e[FormulaSymbol::warps] = c.warps;
  e[FormulaSymbol::stages] = c.stages;
}

Env forwardEnv(const ForwardProblem& p, const TileConfig& c) {
  Env e;
  e[FormulaSymbol::B] = p.batch;
  e[FormulaSymbol::T] = p.rows();  // the kernels' row axis: T·n_h steps with several steps per token
  e[FormulaSymbol::N] = p.num_seqs;
  e[FormulaSymbol::H] = p.heads_qk;
  e[FormulaSymbol::HV] = p.heads_v;
  e[FormulaSymbol::K] = p.key_dim;
  e[FormulaSymbol::V] = p.value_dim;
  e[FormulaSymbol::varlen] = p.varlen ? 1 : 0;
  e[FormulaSymbol::f16] = p.input_dtype == ScalarType::F16 ? 1 : 0;
  bindConfig(e, c);
  return e;
}

// Decode is one token per batch row: B = N = rows, T = 1, never varlen.
Env decodeEnv(const DecodeProblem& p, const TileConfig& c) {
  Env e;
  e[FormulaSymbol::B] = p.batch;
  e[FormulaSymbol::T] = 1;
  e[FormulaSymbol::N] = p.batch;
  e[FormulaSymbol::H] = p.heads_qk;
  e[FormulaSymbol::HV] = p.heads_v;
  e[FormulaSymbol::K] = p.key_dim;
  e[FormulaSymbol::V] = p.value_dim;
  e[FormulaSymbol::f16] = p.input_dtype == ScalarType::F16 ? 1 : 0;
  bindConfig(e, c);
  return e;
}

std::string shapeText(const Env& e) {
  std::string s;
  for (int i = 0; i < kFormulaSymbols; ++i)
    s += (i ? ", " : "") + std::string(toString(FormulaSymbol(i))) + "=" + std::to_string(e.v[i]);
  return s;
}

// Error path only (builds strings): a formula that cannot be evaluated for this problem. An overflow means the
// problem is too large (the caller's input); a division by zero or a divisor <= 0 means the package's formula
// is wrong for a valid problem (the package's fault).
[[noreturn]] void formulaFault(const char* call, const Package& package, const std::string& key, const Formula& f,
                               FormulaFault fault, const Env& e) {
  const bool tooLarge = fault == FormulaFault::Overflow;
  throw RuntimeError(tooLarge ? RuntimeErrorCode::InvalidArgument : RuntimeErrorCode::Package,
                     std::string(call) + ": " + package.directory() + "/manifest.yaml: " + key + " = \"" + f.text() +
                         "\" " + toString(fault) + " for this problem (" + shapeText(e) + "); " +
                         (tooLarge ? "the problem is too large for the package's launch plan"
                                   : "the package's launch plan is broken: regenerate it with dgpsc compile"));
}

std::int64_t eval(const char* call, const Package& package, const Formula& f, const Env& e, const char* section,
                  int index, const char* what) {
  std::int64_t out = 0;
  const FormulaFault fault = f.evaluate(e.v, &out);
  if (fault != FormulaFault::None) {
    formulaFault(call, package,
                 std::string(section) + (index >= 0 ? "[" + std::to_string(index) + "]" : std::string()) + "." + what,
                 f, fault, e);
  }
  return out;
}

void evalLets(const char* call, const Package& package, Env& e) {
  const LaunchRules& L = package.manifest().launch;
  for (std::size_t i = 0; i < L.lets.size(); ++i)
    e.v[kFormulaSymbols + i] = eval(call, package, L.lets[i], e, "launch.let", int(i), "value");
}

[[noreturn]] void impossible(const char* call, const Package& package, const KernelLaunchRule& k,
                             const std::string& what, long long value, const std::string& expected, const Env& e) {
  throw RuntimeError(RuntimeErrorCode::Package,
                     std::string(call) + ": " + package.directory() + "/manifest.yaml: launch " + k.role + "." + what +
                         " is " + std::to_string(value) + " for this problem (" + shapeText(e) + "), expected " +
                         expected + " (regenerate the package with dgpsc compile)");
}

// One kernel's geometry. grid.x may count up to 2^31-1 blocks, y and z 65535 (CUDA's limits); a grid
// beyond them means the problem is too large (it would otherwise wrap in the unsigned conversion and
// silently skip work).
LaunchGeometry kernelGeometry(const char* call, const Package& package, const KernelLaunchRule& k, const Env& e,
                              const char* section, int index) {
  static const char* const grid[] = {"grid[0]", "grid[1]", "grid[2]"};
  static const char* const block[] = {"block[0]", "block[1]", "block[2]"};
  LaunchGeometry g;
  long long threads = 1;
  for (int d = 0; d < 3; ++d) {
    const std::int64_t n = eval(call, package, k.grid[d], e, section, index, grid[d]);
    const std::int64_t limit = d == 0 ? std::numeric_limits<int>::max() : 65535;
    if (n < 1) impossible(call, package, k, grid[d], n, "at least 1 block", e);
    if (n > limit) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         std::string(call) + ": the problem needs " + std::to_string(n) + " thread blocks for " +
                             k.role + " (" + grid[d] + "), beyond CUDA's grid limit of " +
                             (d == 0 ? std::string("2^31-1") : std::string("65535")) + "; split the batch");
    }
    g.grid[std::size_t(d)] = unsigned(n);
    const std::int64_t t = eval(call, package, k.block[d], e, section, index, block[d]);
    if (t < 1 || t > 1024) impossible(call, package, k, block[d], t, "1..1024 threads", e);
    threads *= t;
    g.block[std::size_t(d)] = unsigned(t);
  }
  if (threads > 1024) impossible(call, package, k, "block", threads, "at most 1024 threads per block", e);
  const std::int64_t smem = eval(call, package, k.smem, e, section, index, "smem");
  if (smem < 0 || smem > std::numeric_limits<std::uint32_t>::max())
    impossible(call, package, k, "smem", smem, "0..2^32-1 bytes", e);
  g.shared_bytes = std::size_t(smem);
  return g;
}

KernelLaunch named(const KernelLaunchRule& k, const LaunchGeometry& g) {
  KernelLaunch l;
  l.role = k.role;
  l.symbol = k.symbol;
  l.grid = g.grid;
  l.block = g.block;
  l.shared_bytes = g.shared_bytes;
  return l;
}

// The kernels `rules` and the workspace of `buffers` then `more` (back to back, each starting at a multiple of the
// alignment: the device side lays them out the same way, so the offsets agree by construction of the plan).
ForwardGeometry geometryOf(const Package& package, const Env& e, const std::vector<KernelLaunchRule>& rules,
                           const char* section, const std::vector<WorkspaceBufferRule>& buffers,
                           const std::vector<WorkspaceBufferRule>& more) {
  const LaunchRules& L = package.manifest().launch;
  ForwardGeometry plan;
  plan.count = int(rules.size());
  for (int i = 0; i < plan.count; ++i)
    plan.kernels[std::size_t(i)] = kernelGeometry("forward", package, rules[std::size_t(i)], e, section, i);
  std::int64_t off = 0;
  plan.buffers = int(buffers.size() + more.size());
  for (int i = 0; i < plan.buffers; ++i) {
    const bool first = std::size_t(i) < buffers.size();
    const WorkspaceBufferRule& b = first ? buffers[std::size_t(i)] : more[std::size_t(i) - buffers.size()];
    const std::int64_t bytes =
        eval("forward", package, b.bytes, e, first ? "launch.workspace.buffers" : "launch.forward_segmented.buffers",
             first ? i : i - int(buffers.size()), "bytes");
    if (bytes < 0) {
      throw RuntimeError(RuntimeErrorCode::Package, "forward: " + package.directory() +
                                                        "/manifest.yaml: launch.workspace buffer " + b.name + " is " +
                                                        std::to_string(bytes) + " bytes for this problem (" +
                                                        shapeText(e) + "), expected >= 0");
    }
    plan.buffer_offsets[std::size_t(i)] = std::size_t(off);
    const std::int64_t a = L.workspace_align;
    std::int64_t padded = 0;
    if (__builtin_add_overflow(bytes, a - 1, &padded) || __builtin_add_overflow(off, padded / a * a, &off)) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         "forward: the workspace overflows 64-bit sizes for this problem (" + shapeText(e) + ")");
    }
  }
  plan.workspace_bytes = std::size_t(off);
  return plan;
}

}  // namespace

ForwardGeometry forwardGeometry(const Package& package, const ForwardProblem& p, const TileConfig& config) {
  const LaunchRules& L = package.manifest().launch;
  Env e = forwardEnv(p, config);
  evalLets("forward", package, e);
  static const std::vector<WorkspaceBufferRule> none;
  return geometryOf(package, e, L.forward, "launch.forward", L.workspace, none);
}

ForwardGeometry forwardGeometrySegmented(const Package& package, const ForwardProblem& p, const TileConfig& config,
                                         std::int64_t segmentChunks) {
  const LaunchRules& L = package.manifest().launch;
  if (L.forward_segmented.empty()) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: package " + package.name() + " has no segmented state pass (launch.forward_segmented; "
                       "the compiler writes it for every chunk forward: recompile the package with dgpsc "
                       "compile): use segment_chunks 0");
  }
  if (segmentChunks < 1) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: segment length " + std::to_string(segmentChunks) + ": expected >= 1 chunk");
  }
  Env e = forwardEnv(p, config);
  e[FormulaSymbol::L] = segmentChunks;
  evalLets("forward", package, e);
  return geometryOf(package, e, L.forward_segmented, "launch.forward_segmented.kernels", L.workspace,
                    L.workspace_segmented);
}

LaunchGeometry decodeGeometry(const Package& package, const DecodeProblem& p, const TileConfig& config) {
  const LaunchRules& L = package.manifest().launch;
  Env e = decodeEnv(p, config);
  evalLets("decode", package, e);
  return kernelGeometry("decode", package, L.decode, e, "launch.decode", -1);
}

ForwardPlan planForward(const Package& package, const ForwardProblem& p, const TileConfig& config) {
  const ForwardGeometry g = forwardGeometry(package, p, config);
  const LaunchRules& L = package.manifest().launch;
  ForwardPlan plan;
  for (int i = 0; i < g.count; ++i) plan.kernels.push_back(named(L.forward[std::size_t(i)], g.kernels[std::size_t(i)]));
  plan.workspace_bytes = g.workspace_bytes;
  return plan;
}

ForwardPlan planForwardSegmented(const Package& package, const ForwardProblem& p, const TileConfig& config,
                                 std::int64_t segmentChunks) {
  const ForwardGeometry g = forwardGeometrySegmented(package, p, config, segmentChunks);
  const LaunchRules& L = package.manifest().launch;
  ForwardPlan plan;
  for (int i = 0; i < g.count; ++i)
    plan.kernels.push_back(named(L.forward_segmented[std::size_t(i)], g.kernels[std::size_t(i)]));
  plan.workspace_bytes = g.workspace_bytes;
  return plan;
}

KernelLaunch planDecode(const Package& package, const DecodeProblem& p, const TileConfig& config) {
  return named(package.manifest().launch.decode, decodeGeometry(package, p, config));
}

}  // namespace detail
}  // namespace dgps
