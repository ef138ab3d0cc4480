// Seeded mutation run over dgps-opt's input, in-process: parse + verify, then the pipeline
// of dgpsc (buildPipeline: canonicalize, --dgps-lower-to-chunk, canonicalize, --chunk-fuse-preconditioner,
// --chunk-partition-kernels) with the verifier after every pass, as dgps-opt runs them. Seeds: the
// dgps IR of tests/lit/Inputs and its lowered form (so the chunk.* attributes and ops are mutated too),
// and every case of the other tests/lit/**/*.mlir files.
// Every mutant must end in success or diagnostics; a crash or hang fails the ctest (DGPS_TRACE_SEEDS=1
// prints each seed before it runs, to name the one that hangs or crashes). Mutants first pass
// dgps-opt's input screening (InputCheck.h), as they would in the tool.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "InputCheck.h"
#include "Mutator.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace dgps {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A context with the DGPS dialects whose diagnostics are counted, not printed.
struct Quiet {
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> ctx;
  int errors = 0;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
  Quiet() {
    registerDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
    handler = std::make_unique<mlir::ScopedDiagnosticHandler>(ctx.get(), [this](mlir::Diagnostic& d) {
      errors += d.getSeverity() == mlir::DiagnosticSeverity::Error;
      return mlir::success();
    });
  }
};

/// Outcome of one input: 0 parse error, 1 pipeline failure, 2 success. dgps IR runs the whole pipeline;
/// chunk IR (`lowered`) the part after --dgps-lower-to-chunk.
int runOne(const std::string& text, bool lowered) {
  // dgps-opt's front door first: it refuses what MLIR would handle without bound.
  std::string refused;
  if (!opt::checkMlirInput(text, "mutant.mlir", 64ull << 20, refused)) {
    EXPECT_FALSE(refused.empty());
    return 0;
  }
  Quiet q;
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, q.ctx.get());
  if (!m) {
    EXPECT_GT(q.errors, 0) << "parse failed without a diagnostic";
    return 0;
  }
  mlir::PassManager pm(q.ctx.get());
  if (lowered) {
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addNestedPass<mlir::func::FuncOp>(createFusePreconditioner());
    pm.addPass(createPartitionKernels());
  } else {
    buildPipeline(pm, Stage::Plan);
  }
  if (mlir::failed(pm.run(*m))) {
    EXPECT_GT(q.errors, 0) << "the pipeline failed without a diagnostic";
    return 1;
  }
  return 2;
}

/// The dgps IR seed lowered to chunk IR (up to, not including, the partitioning).
std::string lowered(const std::string& dgpsIr) {
  Quiet q;
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(dgpsIr, q.ctx.get());
  if (!m) return "";
  mlir::PassManager pm(q.ctx.get());
  buildPipeline(pm, Stage::Chunk);
  if (mlir::failed(pm.run(*m))) return "";
  std::string out;
  llvm::raw_string_ostream os(out);
  m->print(os);
  return os.str();
}

constexpr int kMutantsPerSeed = 600;
constexpr int kMutantsPerLitCase = 80;

/// Every case of the lit tests (files split at "// -----"), beyond tests/lit/Inputs: more ops, tiles and
/// invalid IR to start from. Their validity is not required.
std::vector<std::string> litCases() {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(DGPS_SOURCE_DIR) + "/tests/lit"))
    if (e.path().extension() == ".mlir" && e.path().parent_path().filename() != "Inputs") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> cases;
  for (const std::string& p : paths) {
    std::string text = readAll(p);
    for (std::size_t at = 0;;) {
      const std::size_t next = text.find("\n// -----\n", at);
      cases.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + 10;
    }
  }
  return cases;
}

TEST(MlirMutations, EveryMutantEndsInSuccessOrDiagnostics) {
  struct Seed {
    std::string name, text;
    bool lowered;
  };
  std::vector<Seed> seeds;
  for (const char* name : {"gdn.mlir", "pgdn.mlir"}) {
    const std::string path = std::string(DGPS_SOURCE_DIR) + "/tests/lit/Inputs/" + name;
    const std::string text = readAll(path);
    ASSERT_FALSE(text.empty()) << path;
    ASSERT_EQ(runOne(text, false), 2) << path << " is not a valid seed";
    const std::string chunk = lowered(text);
    ASSERT_FALSE(chunk.empty()) << path << " does not lower";
    ASSERT_EQ(runOne(chunk, true), 2) << path << " lowered is not a valid seed";
    seeds.push_back({path, text, false});
    seeds.push_back({path + " (lowered)", chunk, true});
  }
  int outcomes[3] = {0, 0, 0};
  for (std::size_t s = 0; s < seeds.size(); ++s)
    for (int i = 0; i < kMutantsPerSeed; ++i) {
      const std::uint64_t seed = 5000011ull * s + static_cast<std::uint64_t>(i);
      SCOPED_TRACE(seeds[s].name + " seed " + std::to_string(seed));
      if (std::getenv("DGPS_TRACE_SEEDS")) std::fprintf(stderr, "%s seed %llu\n", seeds[s].name.c_str(), static_cast<unsigned long long>(seed));
      ++outcomes[runOne(test::Mutator(seed).mutate(seeds[s].text), seeds[s].lowered)];
    }
  std::printf("parse errors %d, pipeline failures %d, successes %d\n", outcomes[0], outcomes[1], outcomes[2]);
  const std::vector<std::string> cases = litCases();
  EXPECT_GE(cases.size(), 20u) << "tests/lit cases not found";
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const bool dgpsIr = cases[c].find("dgps.recurrence") != std::string::npos;
    for (int i = 0; i < kMutantsPerLitCase; ++i) {
      const std::uint64_t seed = 9000001ull * (c + 1) + static_cast<std::uint64_t>(i);
      SCOPED_TRACE("lit case " + std::to_string(c) + " seed " + std::to_string(seed));
      if (std::getenv("DGPS_TRACE_SEEDS")) std::fprintf(stderr, "lit case %zu seed %llu\n", c, static_cast<unsigned long long>(seed));
      ++outcomes[runOne(test::Mutator(seed).mutate(cases[c]), !dgpsIr)];
    }
  }
  std::printf("with the lit cases: parse errors %d, pipeline failures %d, successes %d\n", outcomes[0], outcomes[1],
              outcomes[2]);
  EXPECT_GT(outcomes[0], 0) << "no mutant failed to parse";
  EXPECT_GT(outcomes[2], 0) << "no mutant got through the pipeline";
}

}  // namespace
}  // namespace dgps
