// LaunchExpr (dsl/include/dgps/dsl/LaunchExpr.h) is read three ways: its formula text goes into the manifest, its
// C++ text into kernels.cu, and its host value into the emulator's launches. All three must agree, for any tree the
// launch contract could build, or the kernels would carve shared memory differently from what the runtime
// allocates. Random trees (fresh seed each run, printed on failure) over the kernel symbols and every operator:
// the runtime's own formula compiler (LaunchFormula.h) evaluates the printed formula and the printed C++ (mapped
// back to the formula spelling: C -> chunk, STAGES -> stages, WARPS -> warps, dgps::launch::imax -> max), and both
// must equal eval().
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dgps/dsl/LaunchExpr.h"
#include "dgps/runtime/LaunchFormula.h"

namespace dgps {
namespace {

using launch::LaunchExpr;

/// A random tree of depth <= `depth`; divisors are positive (a constant, chunk, or a sum with a positive constant).
LaunchExpr randomExpr(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return (int)(rng() % (unsigned)n); };
  const LaunchExpr leaves[] = {launch::K(), launch::V(), launch::KP(), launch::chunk(),
                               launch::BV(), launch::stages(), launch::warps()};
  if (depth == 0 || pick(4) == 0) return pick(3) == 0 ? LaunchExpr(pick(40)) : leaves[pick(7)];
  const LaunchExpr a = randomExpr(rng, depth - 1), b = randomExpr(rng, depth - 1);
  const LaunchExpr positive = pick(2) ? LaunchExpr(1 + pick(16)) : launch::chunk() + (1 + pick(8));
  switch (pick(6)) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return a / positive;
    case 3: return max(a, b);
    case 4: return cdiv(a, positive);
    default: return alignUp(a, positive);
  }
}

/// The C++ spelling mapped back to the formula language, identifier by identifier.
std::string cudaToFormula(const std::string& cuda) {
  std::string out;
  for (size_t i = 0; i < cuda.size();) {
    if (!std::isalpha((unsigned char)cuda[i]) && cuda[i] != '_') {
      out += cuda[i++];
      continue;
    }
    size_t j = i;
    while (j < cuda.size() && (std::isalnum((unsigned char)cuda[j]) || cuda[j] == '_' || cuda[j] == ':')) ++j;
    std::string id = cuda.substr(i, j - i);
    const std::string ns = "dgps::launch::";
    if (id.rfind(ns, 0) == 0) id = id.substr(ns.size());
    out += id == "imax" ? "max" : id == "C" ? "chunk" : id == "STAGES" ? "stages" : id == "WARPS" ? "warps" : id;
    i = j;
  }
  return out;
}

/// The runtime's value of `text`; Overflow is reported to the caller (random products can leave 64 bits).
FormulaFault runtimeValue(const std::string& text, const launch::ProblemShape& s, const launch::TileConfig& t,
                          std::int64_t* v) {
  std::vector<std::int64_t> env(kFormulaEnvSize, 0);
  env[int(FormulaSymbol::K)] = s.K;
  env[int(FormulaSymbol::V)] = s.V;
  env[int(FormulaSymbol::chunk)] = t.chunk;
  env[int(FormulaSymbol::block_v)] = t.block_v;
  env[int(FormulaSymbol::stages)] = t.stages;
  env[int(FormulaSymbol::warps)] = t.warps;
  // the manifest's lets, in its order (dsl/lib/LaunchManifest.cpp)
  env[kFormulaSymbols + 0] = launch::pad16((int)s.K);
  env[kFormulaSymbols + 1] = launch::chunkSlots(s, t.chunk);
  env[kFormulaSymbols + 2] = launch::valueTile((int)s.V, t.block_v);
  const Formula f = Formula::compile(text, {"KP", "slots", "BV"});
  return f.evaluate(env.data(), v);
}

TEST(LaunchExpr, FormulaCudaAndHostValueAgreeOnRandomTrees) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  int checked = 0;
  for (int n = 0; n < 400; ++n) {
    const LaunchExpr e = randomExpr(rng, 3);
    const std::string formula = e.formula();
    if (formula.size() > kMaxFormulaChars) continue;  // the manifest refuses longer ones; the contract's are short
    launch::ProblemShape s;
    s.K = 8 * (1 + rng() % 32);
    s.V = 8 * (1 + rng() % 32);
    launch::TileConfig t;
    t.chunk = 16 << (rng() % 3);
    t.block_v = 16 * (1 + rng() % 8);
    t.stages = 1 + rng() % 2;
    t.warps = 2 << (rng() % 3);
    std::int64_t fromFormula = -1, fromCuda = -1;
    const FormulaFault fault = runtimeValue(formula, s, t, &fromFormula);
    if (fault == FormulaFault::Overflow) continue;  // eval() would overflow too; the contract's values are small
    ASSERT_EQ(fault, FormulaFault::None) << formula;
    ASSERT_EQ(runtimeValue(cudaToFormula(e.cuda()), s, t, &fromCuda), FormulaFault::None) << e.cuda();
    const long long want = e.eval(s, t);
    EXPECT_EQ(fromFormula, want) << formula;
    EXPECT_EQ(fromCuda, want) << e.cuda();
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

// Folding like terms and constants keeps the value: x*a + x*b -> x*(a+b), constants summed, in order.
TEST(LaunchExpr, FoldingKeepsTheValue) {
  const LaunchExpr tile = launch::chunk() * launch::KP() * 2;
  const LaunchExpr sum = tile + tile + tile + 64 + launch::KP() * 4 + 16;
  EXPECT_EQ(sum.formula(), "chunk * KP * 6 + 64 + KP * 4 + 16");
  launch::ProblemShape s;
  s.K = 120;
  launch::TileConfig t;
  t.chunk = 32;
  EXPECT_EQ(sum.eval(s, t), 3 * 32 * 128 * 2 + 64 + 128 * 4 + 16);
  // a quotient after the first factor keeps its parentheses
  const LaunchExpr q = launch::KP() * (launch::chunk() / 16);
  EXPECT_EQ(q.formula(), "KP * (chunk / 16)");
  EXPECT_EQ(q.eval(s, t), 128 * 2);
}

// A problem symbol has no spelling in a kernel's compile-time constants: printing one is refused, not guessed.
TEST(LaunchExpr, ProblemSymbolsHaveNoKernelSpelling) {
  const LaunchExpr grid = LaunchExpr::sym(launch::LaunchSym::N) * cdiv(launch::V(), launch::BV());  // found by ADL
  EXPECT_EQ(grid.formula(), "N * cdiv(V, BV)");
  EXPECT_THROW((void)grid.cuda(), std::logic_error);
}

}  // namespace
}  // namespace dgps
