// Regression tests of the compiler side, in-process: the dgps verifier on a long symbol name (it ran
// std::regex and overflowed the stack), i64 attributes beyond int (they were narrowed), and the
// partitioner on chunk attributes that no verifier saw (chunk_size = 0 divided by zero).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

namespace dgps {
namespace {

std::string gdnIr() {
  std::ifstream in(std::string(DGPS_SOURCE_DIR) + "/tests/lit/Inputs/gdn.mlir");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const std::size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

struct Quiet {
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> ctx;
  std::string errors;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
  Quiet() {
    registerDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    handler = std::make_unique<mlir::ScopedDiagnosticHandler>(ctx.get(), [this](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error) errors += d.str() + "\n";
      return mlir::success();
    });
  }
  mlir::OwningOpRef<mlir::ModuleOp> parse(const std::string& text) {
    return mlir::parseSourceString<mlir::ModuleOp>(text, ctx.get());
  }
};

TEST(CompilerRegression, LongSymbolNameIsOneVerifierError) {
  Quiet q;
  ASSERT_TRUE(q.parse(gdnIr())) << q.errors;
  EXPECT_FALSE(q.parse(replaced(gdnIr(), "@gdn", "@" + std::string(30000, 'a'))));
  EXPECT_NE(q.errors.find("name: is 30000 characters long"), std::string::npos) << q.errors;
}

TEST(CompilerRegression, IntegersBeyondIntAreNotNarrowed) {
  const std::pair<std::string, std::string> cases[][1] = {
      {{"key_dims = array<i64: 128>", "key_dims = array<i64: 4294967424>"}},
      {{"gva_ratio = 1,", "gva_ratio = 4294967297,"}},
      {{"heads_qk = 0,", "heads_qk = 4294967297,"}},
  };
  const char* expected[] = {"K = 4294967424 is outside 16..256", "got 4294967297", "got 4294967297"};
  for (std::size_t i = 0; i < 3; ++i) {
    Quiet q;
    EXPECT_FALSE(q.parse(replaced(gdnIr(), cases[i][0].first, cases[i][0].second)));
    EXPECT_NE(q.errors.find(expected[i]), std::string::npos) << q.errors;
  }
}

TEST(CompilerRegression, PartitionerChecksChunkAttributesItself) {
  // A module edited in code after verification: the pass must not trust chunk.chunk_size.
  for (const std::pair<const char*, int64_t>& bad :
       {std::pair<const char*, int64_t>{chunk::kChunkSizeAttr, 0}, {chunk::kChunkSizeAttr, -1}, {chunk::kGvaAttr, 0}}) {
    Quiet q;
    mlir::OwningOpRef<mlir::ModuleOp> m = q.parse(gdnIr());
    ASSERT_TRUE(m) << q.errors;
    mlir::PassManager lower(q.ctx.get());
    buildPipeline(lower, Stage::Chunk);
    ASSERT_TRUE(mlir::succeeded(lower.run(*m))) << q.errors;
    for (auto fn : m->getOps<mlir::func::FuncOp>())
      fn->setAttr(bad.first, mlir::IntegerAttr::get(mlir::IntegerType::get(q.ctx.get(), 64), bad.second));
    mlir::PassManager pm(q.ctx.get());
    pm.enableVerifier(false);  // only the pass's own check stands between the attribute and the plan
    pm.addPass(createPartitionKernels());
    EXPECT_TRUE(mlir::failed(pm.run(*m))) << bad.first << " = " << bad.second;
    EXPECT_NE(q.errors.find(std::string("attribute '") + bad.first + "'"), std::string::npos) << q.errors;
  }
}

}  // namespace
}  // namespace dgps
