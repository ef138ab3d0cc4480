// Helpers of the compiler tests: an MLIR context with the DGPS dialects, the pipeline run pass by pass
// with a snapshot after each pass, the shipped specs, fresh seeds and tensor comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "dgps/Dialect/DGPS/IR/SpecConversion.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/dsl/SpecParser.h"
#include "dgps/dsl/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace dgps::test {

inline std::uint64_t freshSeed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

/// A context with dgps, chunk and func loaded; diagnostics are collected instead of printed.
struct Context {
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> ctx;
  std::vector<std::string> diagnostics;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;

  Context() {
    registerDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    handler = std::make_unique<mlir::ScopedDiagnosticHandler>(ctx.get(), [this](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error || d.getSeverity() == mlir::DiagnosticSeverity::Warning)
        diagnostics.push_back(d.str());
      return mlir::success();
    });
  }
};

/// The module after each pass of the pipeline, starting with the imported one.
struct Snapshot {
  std::string stage;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  bool lowered;  ///< chunk IR (else dgps IR, which the tests lower before executing)
};

inline mlir::LogicalResult runPass(mlir::MLIRContext& ctx, mlir::ModuleOp m, std::unique_ptr<mlir::Pass> pass) {
  mlir::PassManager pm(&ctx);
  if (pass->getOpName() && *pass->getOpName() == "func.func")
    pm.addNestedPass<mlir::func::FuncOp>(std::move(pass));
  else
    pm.addPass(std::move(pass));
  return pm.run(m);
}

/// Imports `spec` and runs the pipeline of dgpsc, keeping a clone after every pass.
inline std::vector<Snapshot> snapshots(Context& c, const Spec& spec) {
  std::vector<Snapshot> out;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name;
  out.push_back({"import", m->clone(), false});
  struct Step {
    const char* name;
    std::unique_ptr<mlir::Pass> pass;
    bool lowered;
  };
  std::vector<Step> steps;
  steps.push_back({"canonicalize(dgps)", mlir::createCanonicalizerPass(), false});
  steps.push_back({"dgps-lower-to-chunk", createLowerToChunk(), true});
  steps.push_back({"canonicalize(chunk)", mlir::createCanonicalizerPass(), true});
  steps.push_back({"chunk-fuse-preconditioner", createFusePreconditioner(), true});
  steps.push_back({"chunk-parallel-precond-scan", createParallelPrecondScan(), true});
  steps.push_back({"chunk-partition-kernels", createPartitionKernels(), true});
  for (Step& s : steps) {
    EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, std::move(s.pass)))) << spec.name << " " << s.name;
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name << " after " << s.name;
    out.push_back({s.name, m->clone(), s.lowered});
  }
  return out;
}

/// A chunk-IR module for any snapshot: dgps IR is lowered (without canonicalisation) first.
inline mlir::OwningOpRef<mlir::ModuleOp> executable(Context& c, const Snapshot& s) {
  mlir::OwningOpRef<mlir::ModuleOp> m = s.module.get().clone();
  if (!s.lowered) EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  return m;
}

inline std::vector<std::string> shippedSpecPaths() {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(DGPS_SPECS_DIR))
    if (e.path().extension() == ".yaml") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

inline Spec loadSpec(const std::string& path) {
  ParseResult r = parseSpecFile(path);
  if (!r.ok()) {
    ADD_FAILURE() << "shipped spec does not parse: " << path;
    return Spec{};
  }
  return *r.spec;
}

/// max |a − b| / max |b| (b the reference); 0 when both are all zero. Shapes must match.
inline double relativeError(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  std::vector<double> x = a.toDoubles(), y = b.toDoubles();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

}  // namespace dgps::test
