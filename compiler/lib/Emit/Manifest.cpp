// manifest.yaml and spec.yaml of a generated package, the plan summary they are built from, and
// writing the package directory.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Emit/Package.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"
#include "dgps/Emit/TileEmitter.h"
#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/LaunchManifest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace dgps {

namespace {

template <typename T>
std::string flowList(const std::vector<T>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

std::string dtypeList(const std::vector<DType>& v) {
  std::vector<std::string> names;
  for (DType d : v) names.push_back(toString(d));
  return flowList(names);
}

const char* yamlBool(bool b) { return b ? "true" : "false"; }

/// The launch contract's forward roles for this spec (LaunchContract.h forwardRoles).
std::vector<std::string> deviceRoles(const Spec& s) {
  const launch::FeatureSet f = deviceFeatures(s);
  int roles[launch::kMaxRoles];
  int n = launch::forwardRoles(f, roles);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(launch::roleName(roles[i]));
  return out;
}

/// The package's write-key form (DeviceFeatures.h FeatureSet::write_key): what its chunk_local stores and every walk
/// reads (tile.launch_features); all roles that read the workspace layout must agree. Fails with an error at the
/// disagreeing function.
FailureOr<int> writeKeyOf(const Spec& spec, ModuleOp tileModule) {
  func::FuncOp chunkLocal = tileModule ? tileModule.lookupSymbol<func::FuncOp>(spec.name + "_chunk_local") : nullptr;
  if (!chunkLocal) return launch::kWriteKeyRebuilt;
  FailureOr<launch::FeatureSet> stored = tile::launchFeaturesOf(chunkLocal);
  if (failed(stored)) return failure();
  for (const char* role : {"_state_output", "_segment_summary", "_segment_fold", "_segment_state_output"}) {
    func::FuncOp fn = tileModule.lookupSymbol<func::FuncOp>(spec.name + role);
    if (!fn) continue;
    FailureOr<launch::FeatureSet> f = tile::launchFeaturesOf(fn);
    if (failed(f)) return failure();
    if (f->write_key != stored->write_key)
      return fn.emitOpError() << "takes write_key " << f->write_key << " where @" << chunkLocal.getSymName()
                              << " takes " << stored->write_key
                              << " (tile.launch_features): the roles of one package share it";
  }
  return stored->write_key;
}

/// The forward of a kernel plan (the function --chunk-partition-kernels costed), or null.
func::FuncOp planFunction(ModuleOp plan) {
  func::FuncOp fn;
  for (func::FuncOp f : plan.getOps<func::FuncOp>())
    if (f->hasAttr(chunk::kPlanAttr)) fn = f;
  return fn;
}

}  // namespace

FailureOr<PlanSummary> summarizePlan(const Spec& spec, ModuleOp plan) {
  func::FuncOp fn = planFunction(plan);
  if (!fn) {
    plan.emitError() << "is not a kernel plan: no function carries " << chunk::kPlanAttr
                     << " (run --chunk-partition-kernels first)";
    return failure();
  }
  PlanSummary s;
  auto cost = fn->getAttrOfType<chunk::PlanAttr>(chunk::kPlanAttr);
  s.bytes_per_token_head = cost.getBytesPerTokenHead();
  s.flops_per_token_head = cost.getFlopsPerTokenHead();
  bool first = true;
  for (chunk::KernelOp k : fn.getBody().getOps<chunk::KernelOp>()) {
    s.roles.push_back(k.getRole().str());
    chunk::TileAttr t = k.getTile();
    if (first) {
      s.tile = {int(t.getChunk()), int(t.getBlockV()), int(t.getWarps()), int(t.getStages())};
      first = false;
    }
  }
  std::vector<std::string> expected = deviceRoles(spec);
  if (s.roles != expected) {
    fn.emitError() << "the plan's kernel roles " << flowList(s.roles)
                   << " are not the launch contract's roles for this spec " << flowList(expected)
                   << " (dsl/include/dgps/dsl/LaunchContract.h forwardRoles)";
    return failure();
  }
  return s;
}

FailureOr<std::string> emitManifest(const Spec& s, const PlanSummary& plan, std::string* error) {
  // The launch section: the plan's roles in its order, each with its geometry as formulas.
  LaunchSectionRequest launch;
  launch.name = s.name;
  launch.features = deviceFeatures(s);
  launch.features.write_key = plan.write_key;
  if (hasKernel(s, KernelKind::ChunkForward)) launch.forward_roles = plan.roles;
  launch.decode = hasKernel(s, KernelKind::Decode);
  launch.segmented = plan.segmented && hasKernel(s, KernelKind::ChunkForward);
  for (const tile::WorkspaceRegion& r : plan.workspace) {
    std::pair<std::string, std::string> buffer = tile::workspaceBufferFormulas({r}).front();
    (tile::isSegmentRegion(r) ? launch.segment_workspace : launch.workspace).push_back(buffer);
  }
  std::string launchYaml;
  if (!launchSectionYaml(launch, &launchYaml, error)) return failure();
  std::ostringstream os;
  os << "dgps_package: " << kPackageFormatVersion << "\n";
  os << "codegen_version: " << kCodegenVersion << "\n";
  os << "name: " << s.name << "\n";
  os << "spec_hash: \"" << specHash(s) << "\"\n";
  os << "source: kernels.cu\n";
  os << "spec: spec.yaml\n";
  os << "features: {decay: " << toString(s.decay.kind) << ", gain: " << toString(s.gain.kind)
     << ", precond: " << toString(s.precond.kind) << ", precond_side: " << toString(s.precond.side)
     << ", precond_source: " << toString(s.precond.source) << ", solve: " << toString(s.solve.kind);
  // Householder steps per token (docs/math.md §3.7): k, v, beta carry steps rows per token; absent = 1
  if (householderSteps(s) > 1) os << ", steps: " << householderSteps(s);
  // where the walks take a preconditioner's write key or query (DeviceFeatures.h FeatureSet::write_key: the launch
  // rules' threads, shared memory and workspace depend on it); absent = rebuilt
  if (plan.write_key != launch::kWriteKeyRebuilt) os << ", write_key: " << writeKeyName(plan.write_key);
  os << "}\n";
  os << "dims: {key: " << flowList(s.key_dims) << ", value: " << flowList(s.value_dims) << "}\n";
  os << "dtypes: {inputs: " << dtypeList(s.input_dtypes) << ", state: " << toString(s.state_dtype) << "}\n";
  os << "io: {initial_state: " << yamlBool(s.initial_state) << ", final_state: " << yamlBool(s.final_state)
     << ", initial_precond_state: " << yamlBool(s.initial_precond_state)
     << ", final_precond_state: " << yamlBool(s.final_precond_state) << ", varlen: " << yamlBool(s.varlen) << "}\n";
  os << layerSectionYaml(s);
  os << launchYaml;
  os << "tunables: {chunk: " << flowList(s.tuning.chunk) << ", block_v: " << flowList(s.tuning.block_v)
     << ", warps: " << flowList(s.tuning.warps) << ", stages: " << flowList(s.tuning.stages) << "}\n";
  os << "default_config: {chunk: " << plan.tile.chunk << ", block_v: " << plan.tile.block_v
     << ", warps: " << plan.tile.warps << ", stages: " << plan.tile.stages << "}\n";
  os << "plan: {bytes_per_token_head: " << plan.bytes_per_token_head
     << ", flops_per_token_head: " << plan.flops_per_token_head << "}\n";
  return os.str();
}

namespace {

/// The tile IR pass that writes the tile function of a kernel role (for the error of a missing one).
const char* tilePassOf(const std::string& role) {
  if (role == "chunk_local") return "--dgps-lower-chunk-local-to-tile";
  if (role == "state_output") return "--dgps-lower-state-output-to-tile";
  if (role == "decode") return "--dgps-lower-decode-to-tile";
  if (role.rfind("segment_", 0) == 0) return "--dgps-lower-segment-roles-to-tile";
  return "--dgps-lower-precond-roles-to-tile";
}

/// The kernel text of `role` printed from its tile function @<name>_<role>, or an error naming the function.
FailureOr<std::string> printRole(const Spec& spec, ModuleOp plan, ModuleOp tileModule, const std::string& role) {
  const std::string fnName = spec.name + "_" + role;
  func::FuncOp fn = tileModule ? tileModule.lookupSymbol<func::FuncOp>(fnName) : nullptr;
  if (!fn)
    return plan.emitError() << "no tile function @" << fnName << " for the " << role << " kernel of spec '"
                            << spec.name << "': every kernel is printed from the tile IR (run " << tilePassOf(role)
                            << " first; dgpsc compile does)";
  const std::string symbol = "dgps_" + spec.name + (role == "decode" ? "_decode" : "_fwd_" + role);
  if (role == "decode") return emitTileKernel(fn, symbol);
  if (role == "chunk_local") return emitTileChunkKernel(fn, symbol);
  if (role == "state_output") return emitTileStateKernel(fn, symbol);
  if (role.rfind("segment_", 0) == 0) return emitTileSegmentKernel(fn, symbol);
  return emitTilePrecondKernel(fn, symbol);
}

/// The launch contract of the roles whose kernels carve shared memory with a printed layout (every role but the
/// chunked feedback scan's two, which use tile/feedback_scan_layout.h), for kernels.cu: each layout and thread count
/// from the role's tile.launch_features or the spec's features (LaunchContract.h), the same expressions the
/// manifest prints as formulas.
FailureOr<std::string> printRoleLaunches(const Spec& spec, ModuleOp tileModule, const std::vector<std::string>& roles,
                                         const launch::FeatureSet& manifestFeatures) {
  auto has = [&](const char* role) { return std::find(roles.begin(), roles.end(), role) != roles.end(); };
  // Each role's tile.launch_features must be the features the manifest's formulas are written with, so that the
  // layouts printed here and the manifest's sizes come from one FeatureSet.
  auto featuresOf = [&](const char* role) -> FailureOr<launch::FeatureSet> {
    func::FuncOp fn = tileModule.lookupSymbol<func::FuncOp>(spec.name + "_" + role);
    FailureOr<launch::FeatureSet> f = tile::launchFeaturesOf(fn);
    if (failed(f)) return failure();
    const launch::FeatureSet& m = manifestFeatures;
    if (f->decay != m.decay || f->gain != m.gain || f->precond != m.precond || f->side != m.side ||
        f->source != m.source || f->solve != m.solve || f->clamp != m.clamp || f->write_key != m.write_key)
      return fn.emitOpError() << tile::kLaunchFeaturesAttr << " differs from the spec's features the manifest is "
                              << "written with (DeviceFeatures.h deviceFeatures and the package's write_key "
                              << m.write_key << "): the kernels' layouts and the manifest's sizes would disagree";
    return f;
  };
  std::ostringstream os;
  const launch::FeatureSet& spec_f = manifestFeatures;
  // the preconditioner roles whose kernels index a printed layout: the ema_sq_squash summary and the clamped
  // (per-token) scan; the chunked feedback scan carves tile/feedback_scan_layout.h itself
  if (has("precond_summary") && !launch::hypergradChunked(spec_f))
    os << launch::smemLayoutCuda("PrecondSummarySmem", "precond_summary_smem",
                                 launch::forwardRoleLaunch(launch::kPrecondSummary, spec_f).smem);
  if (has("precond_scan") && spec_f.source == 1 && !launch::hypergradChunked(spec_f))
    os << launch::smemLayoutCuda("PrecondScanSmem", "precond_scan_smem",
                                 launch::forwardRoleLaunch(launch::kPrecondScan, spec_f).smem);
  if (has("chunk_local")) {
    FailureOr<launch::FeatureSet> f = featuresOf("chunk_local");
    if (failed(f)) return failure();
    os << launch::smemLayoutCuda("ChunkLocalSmem", "chunk_local_smem",
                                 launch::forwardRoleLaunch(launch::kChunkLocal, *f).smem);
  }
  if (has("state_output")) {
    FailureOr<launch::FeatureSet> f = featuresOf("state_output");
    if (failed(f)) return failure();
    const launch::RoleLaunch r = launch::forwardRoleLaunch(launch::kStateOutput, *f);
    os << launch::smemLayoutCuda("StateOutputSmem", "state_output_smem", r.smem);
    os << launch::threadsCuda("state_output_threads", r.threads);
  }
  if (has("segment_state_output")) {
    FailureOr<launch::FeatureSet> f = featuresOf("segment_state_output");
    if (failed(f)) return failure();
    const launch::RoleLaunch walk = launch::segmentRoleLaunch(launch::kSegmentStateOutput, *f);
    os << launch::smemLayoutCuda("SegmentWalkSmem", "segment_walk_smem", walk.smem);
    os << launch::threadsCuda("segment_summary_threads",
                              launch::segmentRoleLaunch(launch::kSegmentSummary, *f).threads);
    os << launch::threadsCuda("segment_state_output_threads", walk.threads);
  }
  if (has("decode")) os << launch::smemLayoutCuda("DecodeSmem", "decode_smem", launch::decodeLaunch(spec_f).smem);
  if (os.str().empty()) return std::string();
  return "// The launch contract (dsl/include/dgps/dsl/LaunchContract.h, printed by dgpsc): the shared-memory layout\n"
         "// (byte offsets) and threads of the roles below; the manifest's smem and block formulas are the same\n"
         "// expressions.\nnamespace dgps_package {\n" +
         os.str() + "}  // namespace dgps_package\n";
}

}  // namespace

FailureOr<PackageFiles> emitPackage(const Spec& spec, ModuleOp plan, ModuleOp tileModule) {
  FailureOr<PlanSummary> summary = summarizePlan(spec, plan);
  if (failed(summary)) return failure();
  std::vector<std::string> roles;
  if (hasKernel(spec, KernelKind::ChunkForward)) {
    roles = summary->roles;
    // the sequence-parallel state pass's kernels: extra symbols after the roles, which they leave unchanged
    summary->segmented = tileModule && tileModule.lookupSymbol<func::FuncOp>(spec.name + "_segment_summary");
    if (summary->segmented) roles.insert(roles.end(), {"segment_summary", "segment_fold", "segment_state_output"});
  }
  if (hasKernel(spec, KernelKind::Decode)) roles.push_back("decode");
  std::vector<std::string> kernels;
  for (const std::string& role : roles) {
    FailureOr<std::string> text = printRole(spec, plan, tileModule, role);
    if (failed(text)) return failure();
    kernels.push_back(*text);
  }
  FailureOr<int> writeKey = writeKeyOf(spec, tileModule);
  if (failed(writeKey)) return failure();
  summary->write_key = *writeKey;
  // chunk.plan counts the write key rebuilt (the form is chosen after partitioning); the manifest's bytes are those
  // of the kernels this package ships
  if (summary->write_key != launch::kWriteKeyRebuilt) {
    func::FuncOp fn = planFunction(plan);
    summary->bytes_per_token_head = std::llround(estimatePlan(fn, costPointOf(fn), summary->write_key).bytes());
  }
  // The workspace the roles pass data through: the tile module's declaration (verified with the module).
  if (hasKernel(spec, KernelKind::ChunkForward)) {
    summary->workspace = tile::workspaceOf(tileModule);
    if (summary->workspace.empty())
      return plan.emitError() << "the tile functions of spec '" << spec.name << "' declare no workspace ("
                              << tile::kWorkspaceAttr << " on their module: run --dgps-declare-tile-workspace after "
                              << "the role lowerings; dgpsc compile does)";
  }
  launch::FeatureSet manifestFeatures = deviceFeatures(spec);
  manifestFeatures.write_key = summary->write_key;
  FailureOr<std::string> launches = printRoleLaunches(spec, tileModule, roles, manifestFeatures);
  if (failed(launches)) return failure();
  PackageFiles files;
  files.kernels_cu = emitKernelsCu(
      spec, (summary->workspace.empty() ? std::string() : tile::workspaceLayoutCuda(summary->workspace)) + *launches,
      kernels);
  files.spec_yaml = canonicalYaml(spec);
  std::string error;
  FailureOr<std::string> manifest = emitManifest(spec, *summary, &error);
  if (failed(manifest)) return plan.emitError() << "cannot write the manifest's launch section: " << error;
  files.manifest_yaml = *manifest;
  return files;
}

bool writePackage(const PackageFiles& files, const std::string& dir, std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = "cannot create output directory '" + dir + "': " + ec.message();
    return false;
  }
  const std::pair<const char*, const std::string*> entries[] = {
      {"kernels.cu", &files.kernels_cu}, {"spec.yaml", &files.spec_yaml}, {"manifest.yaml", &files.manifest_yaml}};
  for (const auto& [name, text] : entries) {
    const std::string path = (fs::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *text;
    out.close();
    if (!out) {
      error = "cannot write '" + path + "'";
      return false;
    }
  }
  return true;
}

}  // namespace dgps
