// dgpsc: the DGPS compiler driver.
//
//   dgpsc compile SPEC -o DIR [--target sm_90a] [--print-after=dgps|chunk|plan|tile|all]
//       parse + validate the spec (dsl), import it as dgps IR, run the pipeline (Passes.td), lower every kernel
//       role to tile IR and write the generated package DIR/{kernels.cu, spec.yaml, manifest.yaml}: decode
//       (--dgps-lower-decode-to-tile, from the canonical dgps IR), chunk_local, state_output and the
//       preconditioner roles (--dgps-lower-{chunk-local,state-output,precond-roles}-to-tile on the partitioned
//       plan) and the sequence-parallel state pass's kernels (--chunk-segment-state-pass,
//       --dgps-lower-segment-roles-to-tile), each printed against runtime/device/dgps/tile. --print-after prints
//       the IR of a stage (or after every pass) to stdout; the plan's cost estimate goes to stderr as a remark.
//       --codegen is gone (every kernel comes from the tile IR); naming it is an error that says so.
//       --write-key=auto|stored|segments|rebuilt: where the walks of a preconditioner take the write key P⊙k̂
//       (key side) or the query P⊙q̂ (query side) from (Passes.td write-key, docs/architecture.md "The write key:
//       stored or rebuilt").
//   dgpsc check SPEC
//       the spec checker of dsl (classification, hash, tensors, canonical form).
//   dgpsc plan SPEC [--backward [--keep NAME,...]] [--segment-chunks L] [--token-precond-scan] [--print-ir]
//       the kernel plan's estimate (bytes and FLOPs per token-head, per kernel) to stdout; with
//       --backward also the derived backward's (--chunk-derive-backward, --chunk-partition-backward;
//       --keep picks the forward intermediates the forward stores, default solve_tril). With
//       --segment-chunks the forward's sequence-parallel form (--chunk-segment-state-pass; L chunks per
//       segment, 0 = the launch rule's length at B = 1, T = 32768, HV = 16). An unclamped OSDN d-scan is
//       planned in its chunked form (--chunk-parallel-precond-scan), as `compile` does, unless
//       --token-precond-scan (the backward rescans d itself, so --backward does not change the forward's form).
//       No package.
//   dgpsc tune SPEC --shape B=8,T=4096,H=16,K=128,V=128 [--dtype ..] [--db PATH] [--package-dir DIR] ...
//       compile as `compile` does, then autotune the package on this GPU with the runtime's dgps-tune
//       (a child process; see DgpscTune.h) and record the winner in the tuning database.
//
// Exit status: 0 success, 1 a bad spec / failing pass / I/O error (one diagnostic with a location),
// 2 bad command line. Nothing escapes main.
#include <cmath>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "DgpscTune.h"
#include "dgps/Dialect/DGPS/IR/SpecConversion.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Emit/Package.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"
#include "dgps/dsl/CheckCommand.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/SpecParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace {

struct CompileOptions {
  std::string spec;
  std::string out;
  std::string target = dgps::ir::kDefaultTarget;
  std::string printAfter;  // "", dgps, chunk, plan, tile, all
  std::string writeKey = "auto";          // auto, stored, segments, rebuilt (Passes.td write-key)
};

/// One step of the pipeline: a pass and the stage it completes (if any).
struct Step {
  std::unique_ptr<mlir::Pass> pass;
  const char* stage;  // "dgps", "chunk", "plan" or nullptr
};

std::vector<Step> pipelineSteps() {
  std::vector<Step> steps;
  steps.push_back({mlir::createCanonicalizerPass(), "dgps"});
  steps.push_back({dgps::createLowerToChunk(), nullptr});
  steps.push_back({mlir::createCanonicalizerPass(), nullptr});
  steps.push_back({dgps::createFusePreconditioner(), "chunk"});
  // An unclamped OSDN d-scan in its chunked form: the launch contract's roles for it (DeviceFeatures.h
  // hypergradChunked) are the per-chunk summary and the pass over chunks.
  steps.push_back({dgps::createParallelPrecondScan(), nullptr});
  steps.push_back({dgps::createPartitionKernels(), "plan"});
  return steps;
}

/// Runs one pass on the module; nested (function) passes get their own nesting level.
mlir::LogicalResult runStep(mlir::MLIRContext& ctx, mlir::ModuleOp module, std::unique_ptr<mlir::Pass> pass) {
  mlir::PassManager pm(&ctx);
  if (pass->getOpName() && *pass->getOpName() == "func.func")
    pm.addNestedPass<mlir::func::FuncOp>(std::move(pass));
  else
    pm.addPass(std::move(pass));
  return pm.run(module);
}

/// Lowers kernel roles of the partitioned plan to tile IR with `pass` and adds their functions to `tileModule`
/// (created when absent).
mlir::LogicalResult lowerChunkRole(mlir::MLIRContext& ctx, const CompileOptions& o, mlir::ModuleOp plan,
                                   std::unique_ptr<mlir::Pass> pass, mlir::OwningOpRef<mlir::ModuleOp>& tileModule) {
  mlir::OwningOpRef<mlir::ModuleOp> lowered = plan.clone();
  const std::string name = pass->getArgument().str();
  if (mlir::failed(runStep(ctx, *lowered, std::move(pass)))) {
    std::cerr << "dgpsc: error: " << o.spec << ": pass --" << name << " failed\n";
    return mlir::failure();
  }
  if (o.printAfter == "tile" || o.printAfter == "all") {
    llvm::outs() << "// -----// IR after --" << name << " (" << o.spec << ") //----- //\n";
    lowered->print(llvm::outs());
    llvm::outs() << "\n";
    llvm::outs().flush();
  }
  if (!tileModule) tileModule = mlir::ModuleOp::create(plan.getLoc());
  for (auto fn : llvm::to_vector(lowered->getOps<mlir::func::FuncOp>())) {
    if (!fn->hasAttr(dgps::tile::kRoleAttr)) continue;
    fn->remove();
    tileModule->push_back(fn);
  }
  return mlir::success();
}

/// The sequence-parallel state pass: the fused forward `fused` (before partitioning) rewritten into its segmented form
/// (--chunk-segment-state-pass with the length chosen at launch), partitioned, and its segment roles lowered
/// to tile functions (--dgps-lower-segment-roles-to-tile), added to `tileModule`.
mlir::LogicalResult lowerSegmentRoles(mlir::MLIRContext& ctx, const CompileOptions& o, mlir::ModuleOp fused,
                                      const std::string& writeKey, mlir::OwningOpRef<mlir::ModuleOp>& tileModule) {
  mlir::OwningOpRef<mlir::ModuleOp> segmented = fused.clone();
  dgps::SegmentStatePassOptions so;
  so.segmentChunks = 0;  // the kernels read L from ForwardArgs::segment_chunks
  // precond_summary / precond_scan stay the plain roles: their chunk-start states ("pst") exist for every chunk
  // before the state pass, so each segment walk rebuilds the preconditioned operand from them (docs/math.md §8.3)
  so.segmentPrecondScan = false;
  // The segment pass's remarks (a preconditioner scan kept sequential) are the plan's business, not compile's.
  mlir::ScopedDiagnosticHandler quietRemarks(&ctx, [](mlir::Diagnostic& d) {
    return mlir::success(d.getSeverity() == mlir::DiagnosticSeverity::Remark);
  });
  if (mlir::failed(runStep(ctx, *segmented, dgps::createSegmentStatePass(so))) ||
      mlir::failed(runStep(ctx, *segmented, dgps::createPartitionKernels()))) {
    std::cerr << "dgpsc: error: " << o.spec << ": the segmented plan (--chunk-segment-state-pass) failed\n";
    return mlir::failure();
  }
  dgps::LowerSegmentRolesToTileOptions options;
  options.writeKey_ = writeKey;
  return lowerChunkRole(ctx, o, *segmented, dgps::createLowerSegmentRolesToTile(options), tileModule);
}

/// The write-key form (rebuilt, stored or segments) of `--write-key` for `spec`, or an error naming the value.
bool chooseWriteKey(const CompileOptions& o, const dgps::Spec& spec, std::string& writeKey) {
  int code = dgps::launch::kWriteKeyRebuilt;
  std::string error;
  if (!dgps::writeKeyCode(o.writeKey, dgps::deviceFeatures(spec), &code, &error)) {
    std::cerr << "dgpsc: error: " << o.spec << ": --write-key: " << error << "\n";
    return false;
  }
  writeKey = dgps::writeKeyName(code);
  return true;
}

/// Prints a remark or note as "file:line:col: remark: message" (no source line, no caret: it is not an
/// error). Other severities are left to the next handler.
mlir::LogicalResult printOneLineRemark(mlir::Diagnostic& d) {
  if (d.getSeverity() != mlir::DiagnosticSeverity::Remark && d.getSeverity() != mlir::DiagnosticSeverity::Note)
    return mlir::failure();
  auto line = [](mlir::Location loc, const char* kind, const std::string& msg) {
    if (auto f = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
      llvm::errs() << f.getFilename().getValue() << ":" << f.getLine() << ":" << f.getColumn() << ": ";
    llvm::errs() << kind << ": " << msg << "\n";
  };
  line(d.getLocation(), d.getSeverity() == mlir::DiagnosticSeverity::Remark ? "remark" : "note", d.str());
  for (const mlir::Diagnostic& n : d.getNotes()) line(n.getLocation(), "note", n.str());
  return mlir::success();
}

int compile(const CompileOptions& o) {
  dgps::ParseResult parsed = dgps::parseSpecFile(o.spec);
  for (const dgps::Diagnostic& d : parsed.diagnostics) std::cerr << dgps::formatDiagnostic(d) << "\n";
  if (!parsed.ok()) return 1;
  if (std::optional<dgps::Diagnostic> refusal = dgps::kernelsRefusal(*parsed.spec)) {
    std::cerr << dgps::formatDiagnostic(*refusal) << "\n";
    return 1;
  }

  mlir::DialectRegistry registry;
  dgps::registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx, llvm::errs());
  // Registered last, so it runs first: remarks and notes are information, printed on one line; errors
  // and warnings fall through to the source manager, which quotes the spec line with a caret.
  mlir::DiagnosticEngine::HandlerID oneLine = ctx.getDiagEngine().registerHandler(printOneLineRemark);
  struct Unregister {
    mlir::MLIRContext& ctx;
    mlir::DiagnosticEngine::HandlerID id;
    ~Unregister() { ctx.getDiagEngine().eraseHandler(id); }
  } unregister{ctx, oneLine};

  mlir::OwningOpRef<mlir::ModuleOp> module = dgps::ir::importSpec(ctx, *parsed.spec, o.target);
  if (mlir::failed(mlir::verify(*module))) return 1;

  dgps::Spec canonical = *parsed.spec;
  mlir::OwningOpRef<mlir::ModuleOp> tileModule;
  mlir::OwningOpRef<mlir::ModuleOp> fused;  // the forward before --chunk-partition-kernels (tile-segment)
  for (Step& step : pipelineSteps()) {
    if (step.stage && std::string(step.stage) == "plan") fused = module->clone();
    std::string name = step.pass->getArgument().str();
    if (mlir::failed(runStep(ctx, *module, std::move(step.pass)))) {
      std::cerr << "dgpsc: error: " << o.spec << ": pass --" << name << " failed\n";
      return 1;
    }
    if (step.stage && std::string(step.stage) == "dgps") {
      for (auto op : module->getOps<dgps::ir::RecurrenceOp>()) canonical = dgps::ir::exportSpec(op);
      {
        // The decode role is lowered from the canonical dgps IR, beside the chunk pipeline.
        tileModule = module->clone();
        if (mlir::failed(runStep(ctx, *tileModule, dgps::createLowerDecodeToTile()))) {
          std::cerr << "dgpsc: error: " << o.spec << ": pass --dgps-lower-decode-to-tile failed\n";
          return 1;
        }
        if (o.printAfter == "tile" || o.printAfter == "all") {
          llvm::outs() << "// -----// IR after --dgps-lower-decode-to-tile (" << o.spec << ") //----- //\n";
          tileModule->print(llvm::outs());
          llvm::outs() << "\n";
          llvm::outs().flush();
        }
      }
    }
    bool print = o.printAfter == "all" || (step.stage && o.printAfter == step.stage);
    if (print) {
      llvm::outs() << "// -----// IR after --" << name << " (" << o.spec << ") //----- //\n";
      module->print(llvm::outs());
      llvm::outs() << "\n";
      llvm::outs().flush();
    }
  }

  // Every kernel role from the tile IR. A spec with several Householder steps per token (solve.steps > 1) runs
  // the step ops as row maps in chunk_local, state_output and the segments' corrected walk; it has no
  // preconditioner roles.
  const bool oneStep = dgps::householderSteps(canonical) == 1;
  std::string writeKey;
  if (!chooseWriteKey(o, canonical, writeKey)) return 1;
  dgps::LowerChunkLocalToTileOptions chunkLocalOptions;
  chunkLocalOptions.writeKey_ = writeKey;
  dgps::LowerStateOutputToTileOptions stateOutputOptions;
  stateOutputOptions.writeKey_ = writeKey;
  if (mlir::failed(lowerChunkRole(ctx, o, *module, dgps::createLowerChunkLocalToTile(chunkLocalOptions), tileModule)))
    return 1;
  if (oneStep && mlir::failed(lowerChunkRole(ctx, o, *module, dgps::createLowerPrecondRolesToTile(), tileModule)))
    return 1;
  if (mlir::failed(lowerChunkRole(ctx, o, *module, dgps::createLowerStateOutputToTile(stateOutputOptions), tileModule)))
    return 1;
  // The sequence-parallel state pass's kernels are extra symbols beside the plain roles (which they leave
  // unchanged), so every package with a chunk forward gets them (a preconditioned one too: its walks take the
  // preconditioned write key in the form --write-key chose; several steps per token: the walks run over the steps).
  if (mlir::failed(lowerSegmentRoles(ctx, o, *fused, writeKey, tileModule)))
    return 1;
  // The workspace the roles pass data through, declared from what they read and write (tile.workspace): the
  // emitter prints the kernels' offsets and the manifest's buffer sizes from it.
  if (tileModule) {
    if (mlir::failed(runStep(ctx, *tileModule, dgps::createDeclareTileWorkspace()))) {
      std::cerr << "dgpsc: error: " << o.spec << ": pass --dgps-declare-tile-workspace failed\n";
      return 1;
    }
    if ((o.printAfter == "tile" || o.printAfter == "all") && (*tileModule)->hasAttr(dgps::tile::kWorkspaceAttr)) {
      llvm::outs() << "// -----// " << dgps::tile::kWorkspaceAttr << " after --dgps-declare-tile-workspace (" << o.spec
                   << ") //----- //\n";
      (*tileModule)->getAttr(dgps::tile::kWorkspaceAttr).print(llvm::outs());
      llvm::outs() << "\n";
      llvm::outs().flush();
    }
  }

  // The package describes the canonicalised spec (identical to the input for every parsed spec
  // whose preconditioner is not the identity), so kernels, spec.yaml and manifest always agree.
  mlir::FailureOr<dgps::PackageFiles> files =
      dgps::emitPackage(canonical, *module, tileModule ? *tileModule : mlir::ModuleOp());
  if (mlir::failed(files)) return 1;
  std::string error;
  if (!dgps::writePackage(*files, o.out, error)) {
    std::cerr << "dgpsc: error: " << error << "\n";
    return 1;
  }
  return 0;
}

struct PlanOptions {
  std::string spec;
  bool backward = false;
  std::vector<std::string> keep;
  bool printIR = false;
  int64_t segmentChunks = -1;  ///< >= 0: plan the segmented state pass (0: the launch rule's length)
  bool tokenPrecondScan = false;  ///< keep OSDN's d-scan token by token (no --chunk-parallel-precond-scan)
};

void printPlan(const char* what, mlir::func::FuncOp fn, const dgps::PlanCost& cost, std::ostream& os,
               int writeKey = dgps::launch::kWriteKeyRebuilt) {
  const dgps::CostPoint& at = cost.at;
  os << what << " " << fn.getSymName().str() << ": " << std::llround(cost.bytes()) << " bytes, "
     << std::llround(cost.flops()) << " FLOPs per token-head (K=" << at.K << " V=" << at.V << " C=" << at.C
     << " HV/H=" << at.gvaRatio;
  bool segmented = false;
  for (const dgps::KernelCost& k : cost.kernels) segmented |= k.role == "segment_summary";
  if (segmented) os << " L=" << at.segmentChunks << " chunks per segment";
  if (writeKey != dgps::launch::kWriteKeyRebuilt) os << ", write key " << dgps::writeKeyName(writeKey);
  os << ")\n";
  for (const dgps::KernelCost& k : cost.kernels)
    os << "  " << k.role << ": " << std::llround(k.bytes) << " B, " << std::llround(k.flops) << " FLOPs\n";
}

int plan(const PlanOptions& o) {
  dgps::ParseResult parsed = dgps::parseSpecFile(o.spec);
  for (const dgps::Diagnostic& d : parsed.diagnostics) std::cerr << dgps::formatDiagnostic(d) << "\n";
  if (!parsed.ok()) return 1;
  mlir::DialectRegistry registry;
  dgps::registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx, llvm::errs());
  // The estimate is printed below; the passes' remarks would repeat it.
  mlir::ScopedDiagnosticHandler quietRemarks(&ctx, [](mlir::Diagnostic& d) {
    return mlir::success(d.getSeverity() == mlir::DiagnosticSeverity::Remark);
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = dgps::ir::importSpec(ctx, *parsed.spec);
  if (mlir::failed(mlir::verify(*module))) return 1;
  std::vector<std::unique_ptr<mlir::Pass>> passes;
  passes.push_back(mlir::createCanonicalizerPass());
  passes.push_back(dgps::createLowerToChunk());
  passes.push_back(mlir::createCanonicalizerPass());
  if (o.backward) passes.push_back(dgps::createDeriveBackward(dgps::DeriveBackwardOptions{o.keep}));
  passes.push_back(dgps::createFusePreconditioner());
  if (o.segmentChunks >= 0) {
    dgps::SegmentStatePassOptions so;
    so.segmentChunks = o.segmentChunks;
    passes.push_back(dgps::createSegmentStatePass(so));
  }
  if (!o.tokenPrecondScan) passes.push_back(dgps::createParallelPrecondScan());
  passes.push_back(dgps::createPartitionKernels());
  if (o.backward) passes.push_back(dgps::createPartitionBackward());
  for (auto& pass : passes) {
    std::string name = pass->getArgument().str();
    if (mlir::failed(runStep(ctx, *module, std::move(pass)))) {
      std::cerr << "dgpsc: error: " << o.spec << ": pass --" << name << " failed\n";
      return 1;
    }
  }
  if (o.printIR) {
    module->print(llvm::outs());
    llvm::outs() << "\n";
    llvm::outs().flush();
  }
  // the forward is costed with the write key dgpsc compile picks by default (--write-key auto), as its manifest is
  int writeKey = dgps::launch::kWriteKeyRebuilt;
  std::string ignored;
  if (!dgps::writeKeyCode("auto", dgps::deviceFeatures(*parsed.spec), &writeKey, &ignored))
    writeKey = dgps::launch::kWriteKeyRebuilt;
  for (mlir::func::FuncOp fn : module->getOps<mlir::func::FuncOp>()) {
    dgps::CostPoint at = dgps::costPointOf(fn);
    if (!fn->hasAttr(dgps::chunk::kBackwardOfAttr)) {
      printPlan("forward", fn, dgps::estimatePlan(fn, at, writeKey), std::cout, writeKey);
      continue;
    }
    dgps::BackwardCost cost = dgps::estimateBackwardPlan(fn, at);
    printPlan("backward", fn, cost.plan, std::cout);
    std::cout << "  kept by the forward:";
    if (auto keep = fn->getAttrOfType<mlir::ArrayAttr>(dgps::chunk::kBwdKeepAttr))
      for (mlir::Attribute a : keep) std::cout << " " << mlir::cast<mlir::StringAttr>(a).getValue().str();
    std::cout << " (" << std::llround(cost.savedBytes) << " B per token-head written by the forward)\n";
  }
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"dgpsc: compile DGPS layer specs into CUDA kernel packages"};
  app.require_subcommand(1);

  CompileOptions co;
  CLI::App* compileCmd = app.add_subcommand("compile", "compile SPEC into the package directory DIR");
  compileCmd->add_option("spec", co.spec, "spec file (YAML)")->required();
  compileCmd->add_option("-o,--output", co.out, "output package directory")->required();
  compileCmd->add_option("--target", co.target, "GPU target recorded as the module's dgps.target");
  compileCmd->add_option("--print-after", co.printAfter, "print the IR after a stage: dgps, chunk, plan, tile or all")
      ->check(CLI::IsMember({"dgps", "chunk", "plan", "tile", "all"}));
  // --codegen selected the hand-written device library or single roles from tile IR; both are gone (every kernel is
  // printed from the tile IR), so naming it is one error that says so rather than an unknown-option message.
  std::string removedCodegen;
  compileCmd->add_option("--codegen", removedCodegen, "removed: every kernel is printed from the tile IR")
      ->check([](const std::string& value) -> std::string {
        return "'" + value +
               "' was removed with the option itself: every kernel of a package is printed from the tile IR (the "
               "device library's role templates and the per-role tile selectors are gone); drop --codegen";
      });

  compileCmd
      ->add_option("--write-key", co.writeKey,
                   "the tile walks' preconditioned operand, a key-side preconditioner's write key P*k or a query-side "
                   "one's query P*q: stored (chunk_local stores it, every walk loads it), segments (write key only: "
                   "stored; the segment walks load it, state_output rebuilds it; scalar decay only), rebuilt (every "
                   "walk that reads it rebuilds it from pst in a producer warpgroup) or auto (stored for every "
                   "key-side preconditioner and a query-side ema_sq_squash one with scalar or no decay, rebuilt "
                   "otherwise; Passes.h writeKeyCode); default auto")
      ->check(CLI::IsMember({"auto", "stored", "segments", "rebuilt"}));

  std::string checkSpec;
  CLI::App* checkCmd = app.add_subcommand("check", "parse and validate SPEC, print its classification");
  checkCmd->add_option("spec", checkSpec, "spec file (YAML)")->required();

  PlanOptions po;
  CLI::App* planCmd = app.add_subcommand("plan", "print the kernel plan's cost estimate of SPEC (and its backward's)");
  planCmd->add_option("spec", po.spec, "spec file (YAML)")->required();
  planCmd->add_flag("--backward", po.backward, "derive and partition the backward too");
  planCmd->add_option("--keep", po.keep, "forward intermediates the forward stores for the backward")
      ->delimiter(',')
      ->needs(planCmd->get_option("--backward"));
  planCmd->add_flag("--print-ir", po.printIR, "print the partitioned module");
  planCmd->add_option("--segment-chunks", po.segmentChunks,
                      "plan the sequence-parallel state pass with L chunks per segment (0: the launch rule)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->excludes(planCmd->get_option("--backward"));
  planCmd->add_flag("--token-precond-scan", po.tokenPrecondScan,
                    "plan an unclamped OSDN preconditioner scan token by token instead of in its chunked form "
                    "(the packages use the chunked form)");

  dgps::dgpsc::TuneArgs tuneArgs;
  CLI::App* tuneCmd = dgps::dgpsc::addTuneSubcommand(app, tuneArgs);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*compileCmd) return compile(co);
  if (*planCmd) return plan(po);
  if (*tuneCmd) {
    return dgps::dgpsc::runTune(tuneArgs, [](const std::string& spec, const std::string& out) {
      CompileOptions c;
      c.spec = spec;
      c.out = out;
      return compile(c);
    });
  }
  return dgps::runCheckCommand(checkSpec, std::cout, std::cerr);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "dgpsc: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "dgpsc: internal error\n";
  }
  return 1;
}
