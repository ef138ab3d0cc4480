// manifest.yaml and spec.yaml of a generated package, the plan summary they are built from, and
// writing the package directory.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Emit/Package.h"
#include "dgps/Emit/TileEmitter.h"
#include "dgps/device/launch_rules.h"
#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/DeviceFeatures.h"
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

/// The device library's forward roles for this spec (launch_rules.h).
std::vector<std::string> deviceRoles(const Spec& s) {
  const launch::FeatureSet f = deviceFeatures(s);
  int roles[launch::kMaxRoles];
  int n = launch::forwardRoles(f, roles);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(launch::roleName(roles[i]));
  return out;
}

/// The write-key code (launch_rules.h FeatureSet::write_key) the tile chunk roles of `tileModule` share. A stored
/// key is written by the tile chunk_local, so a walk that loads one needs it in the same package (a device-library
/// chunk_local stores none), and every role that reads the workspace layout must agree on it. Fails with an error
/// at the disagreeing function.
FailureOr<int> writeKeyOf(const Spec& spec, ModuleOp tileModule) {
  if (!tileModule) return launch::kWriteKeyRebuilt;
  func::FuncOp chunkLocal = tileModule.lookupSymbol<func::FuncOp>(spec.name + "_chunk_local");
  int code = launch::kWriteKeyRebuilt;
  if (chunkLocal) {
    FailureOr<launch::FeatureSet> f = tile::launchFeaturesOf(chunkLocal);
    if (failed(f)) return failure();
    code = f->write_key;
  }
  for (const char* role : {"_state_output", "_segment_summary", "_segment_fold", "_segment_state_output"}) {
    func::FuncOp fn = tileModule.lookupSymbol<func::FuncOp>(spec.name + role);
    if (!fn) continue;
    FailureOr<launch::FeatureSet> f = tile::launchFeaturesOf(fn);
    if (failed(f)) return failure();
    if (f->write_key == code) continue;
    if (!chunkLocal)
      return fn.emitOpError() << "takes write_key " << f->write_key << " (tile.launch_features) but the package has "
                              << "no tile chunk_local to store the preconditioned write key (the device library's "
                                 "stores none): compile with --codegen=...,tile-chunk-local or --write-key=rebuilt";
    return fn.emitOpError() << "takes write_key " << f->write_key << " where @" << chunkLocal.getSymName()
                            << " takes " << code << " (tile.launch_features): the roles of one package share it";
  }
  // the device library's state_output rebuilds the key in place over what it reads (opw) or from the raw key, and
  // its launch has the producer warpgroup; the manifest would size it for a walk that loads the stored key
  if (code == launch::kWriteKeyStored && hasKernel(spec, KernelKind::ChunkForward) &&
      !tileModule.lookupSymbol<func::FuncOp>(spec.name + "_state_output"))
    return chunkLocal.emitOpError() << "takes write_key 1 (every walk loads the stored write key) but state_output "
                                       "comes from the device library, which rebuilds it: print state_output from "
                                       "the tile IR too (dgpsc --codegen=...,tile-state-output) or store it for the "
                                       "segment walks only (write_key 2)";
  return code;
}

}  // namespace

FailureOr<PlanSummary> summarizePlan(const Spec& spec, ModuleOp plan) {
  func::FuncOp fn;
  for (func::FuncOp f : plan.getOps<func::FuncOp>())
    if (f->hasAttr(chunk::kPlanAttr)) fn = f;
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
                   << " are not the device library's roles for this spec " << flowList(expected)
                   << " (runtime/device/dgps/device/launch_rules.h forwardRoles)";
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

FailureOr<PackageFiles> emitPackage(const Spec& spec, ModuleOp plan, ModuleOp tileModule) {
  // The device library's roles take one key, value and gain row per token; a multi-step recurrence (Gated
  // DeltaProduct) runs its chunk roles from the tile IR, where q, g and o go through row maps.
  if (householderSteps(spec) > 1)
    for (const char* role : {"_chunk_local", "_state_output"})
      if (!tileModule || !tileModule.lookupSymbol<func::FuncOp>(spec.name + role))
        return plan.emitError() << "spec '" << spec.name << "' has solve.steps " << householderSteps(spec)
                                << " (Householder steps per token): its kernels come from the tile IR, but there is "
                                   "no tile function @"
                                << spec.name << role << " (dgpsc compile lowers both chunk roles for it)";
  FailureOr<PlanSummary> summary = summarizePlan(spec, plan);
  if (failed(summary)) return failure();
  std::optional<std::string> tileDecode, tileChunkLocal, tileStateOutput;
  auto chunkLocal = tileModule ? tileModule.lookupSymbol<func::FuncOp>(spec.name + "_chunk_local") : nullptr;
  auto stateOutput = tileModule ? tileModule.lookupSymbol<func::FuncOp>(spec.name + "_state_output") : nullptr;
  auto segmentSummary =
      tileModule ? tileModule.lookupSymbol<func::FuncOp>(spec.name + "_segment_summary") : nullptr;
  // a clamped OSDN d-scan has a precond_scan without a precond_summary
  auto precondScan = tileModule ? tileModule.lookupSymbol<func::FuncOp>(spec.name + "_precond_scan") : nullptr;
  if (tileModule && hasKernel(spec, KernelKind::Decode) &&
      ((!chunkLocal && !stateOutput && !segmentSummary && !precondScan) ||
       tileModule.lookupSymbol(spec.name + "_decode"))) {
    auto fn = tileModule.lookupSymbol<func::FuncOp>(spec.name + "_decode");
    if (!fn) return tileModule.emitError() << "no tile function @" << spec.name << "_decode for the decode kernel";
    FailureOr<std::string> text = emitTileKernel(fn, "dgps_" + spec.name + "_decode");
    if (failed(text)) return failure();
    tileDecode = *text;
  }
  if (chunkLocal) {
    FailureOr<std::string> text = emitTileChunkKernel(chunkLocal, "dgps_" + spec.name + "_fwd_chunk_local");
    if (failed(text)) return failure();
    tileChunkLocal = *text;
  }
  if (stateOutput) {
    FailureOr<std::string> text = emitTileStateKernel(stateOutput, "dgps_" + spec.name + "_fwd_state_output");
    if (failed(text)) return failure();
    tileStateOutput = *text;
  }
  std::optional<std::string> tileSegment;
  if (segmentSummary) {
    tileSegment = std::string();
    for (const char* role : {"segment_summary", "segment_fold", "segment_state_output"}) {
      auto fn = tileModule.lookupSymbol<func::FuncOp>(spec.name + "_" + role);
      if (!fn) return tileModule.emitError() << "no tile function @" << spec.name << "_" << role;
      FailureOr<std::string> text = emitTileSegmentKernel(fn, "dgps_" + spec.name + "_fwd_" + role);
      if (failed(text)) return failure();
      *tileSegment += *text;
    }
  }
  // the preconditioner roles (--dgps-lower-precond-roles-to-tile), by role name
  std::map<std::string, std::string> tileRoles;
  if (precondScan)
    for (const char* role : {"precond_summary", "precond_scan"}) {
      auto fn = tileModule.lookupSymbol<func::FuncOp>(spec.name + "_" + role);
      const bool planned = std::find(summary->roles.begin(), summary->roles.end(), role) != summary->roles.end();
      if (!fn && !planned) continue;
      if (!fn) return tileModule.emitError() << "no tile function @" << spec.name << "_" << role;
      FailureOr<std::string> text = emitTilePrecondKernel(fn, "dgps_" + spec.name + "_fwd_" + role);
      if (failed(text)) return failure();
      tileRoles[role] = *text;
    }
  FailureOr<int> writeKey = writeKeyOf(spec, tileModule);
  if (failed(writeKey)) return failure();
  summary->write_key = *writeKey;
  PackageFiles files;
  files.kernels_cu = emitKernelsCu(spec, *summary, tileDecode ? &*tileDecode : nullptr,
                                   tileChunkLocal ? &*tileChunkLocal : nullptr,
                                   tileStateOutput ? &*tileStateOutput : nullptr, tileSegment ? &*tileSegment : nullptr,
                                   &tileRoles);
  files.spec_yaml = canonicalYaml(spec);
  std::string error;
  summary->segmented = tileSegment.has_value();
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
