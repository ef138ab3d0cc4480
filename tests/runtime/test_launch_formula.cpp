// The launch-formula language (runtime/include/dgps/runtime/LaunchFormula.h): results against an
// independent evaluation in 128-bit arithmetic on random environments, precedence, every fault, and the
// bounds that keep untrusted text cheap (length, nesting, stack, integer size).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dgps/runtime/LaunchFormula.h"

namespace dgps {
namespace {

std::int64_t evalOk(const std::string& text, const std::int64_t* env, const std::vector<std::string>& lets = {}) {
  const Formula f = Formula::compile(text, lets);
  std::int64_t out = 0;
  EXPECT_EQ(f.evaluate(env, &out), FormulaFault::None) << text;
  return out;
}

FormulaFault faultOf(const std::string& text, const std::int64_t* env) {
  std::int64_t out = 0;
  return Formula::compile(text, {}).evaluate(env, &out);
}

std::string compileError(const std::string& text, int* column = nullptr) {
  try {
    Formula::compile(text, {"KP"});
  } catch (const FormulaError& e) {
    if (column) *column = e.column();
    return e.what();
  }
  return "no error";
}

struct Env {
  std::int64_t v[kFormulaEnvSize] = {};
  std::int64_t& operator[](FormulaSymbol s) { return v[int(s)]; }
};

// Random shapes and configurations; each formula checked against the same arithmetic written in C++.
TEST(LaunchFormula, MatchesDirectArithmeticOnRandomEnvironments) {
  std::mt19937_64 rng(90210);
  for (int i = 0; i < 2000; ++i) {
    Env e;
    const std::int64_t B = 1 + rng() % 64, T = 1 + rng() % 100000, H = 1 + rng() % 32, K = 1 + rng() % 256;
    const std::int64_t V = 1 + rng() % 256, C = (rng() % 2) ? 32 : 64, bv = 16 * (1 + rng() % 8);
    const std::int64_t varlen = rng() % 2, N = 1 + rng() % 9;
    e[FormulaSymbol::B] = B;
    e[FormulaSymbol::T] = T;
    e[FormulaSymbol::N] = N;
    e[FormulaSymbol::H] = H;
    e[FormulaSymbol::HV] = 2 * H;
    e[FormulaSymbol::K] = K;
    e[FormulaSymbol::V] = V;
    e[FormulaSymbol::varlen] = varlen;
    e[FormulaSymbol::chunk] = C;
    e[FormulaSymbol::block_v] = bv;
    const std::int64_t KP = (K + 15) / 16 * 16;
    e.v[kFormulaSymbols] = KP;  // let KP
    const std::int64_t slots = varlen ? (T + C - 1) / C + N : B * ((T + C - 1) / C);
    EXPECT_EQ(evalOk("align_up(K, 16)", e.v), KP);
    EXPECT_EQ(evalOk("select(varlen, cdiv(T, chunk) + N, B * cdiv(T, chunk))", e.v), slots);
    EXPECT_EQ(evalOk("min(block_v, align_up(V, 16))", e.v), std::min(bv, (V + 15) / 16 * 16));
    EXPECT_EQ(evalOk("max(32, align_up(KP, 32))", e.v, {"KP"}), std::max<std::int64_t>(32, (KP + 31) / 32 * 32));
    EXPECT_EQ(evalOk("chunk * (KP + 8) * 2 + chunk * 16", e.v, {"KP"}), C * (KP + 8) * 2 + C * 16);
    EXPECT_EQ(evalOk("T - B * 3 / 2 - -H", e.v), T - B * 3 / 2 + H);
    EXPECT_EQ(evalOk("(T - K) / 7", e.v), (T - K) / 7);  // rounds toward zero, negative too
  }
}

TEST(LaunchFormula, PrecedenceAndAssociativity) {
  const std::int64_t env[kFormulaEnvSize] = {};
  EXPECT_EQ(evalOk("2 + 3 * 4", env), 14);
  EXPECT_EQ(evalOk("(2 + 3) * 4", env), 20);
  EXPECT_EQ(evalOk("20 - 5 - 3", env), 12);
  EXPECT_EQ(evalOk("100 / 10 / 5", env), 2);
  EXPECT_EQ(evalOk("- - 7", env), 7);
  EXPECT_EQ(evalOk("select(0, 1, 2) + select(5, 1, 2)", env), 3);
  EXPECT_EQ(evalOk("cdiv(0, 64)", env), 0);
  EXPECT_EQ(evalOk("align_up(65, 64)", env), 128);
  // ceil for negative numerators too (truncating (a + b - 1) / b would give 0 and hide a negative size)
  EXPECT_EQ(evalOk("cdiv(0 - 2, 2)", env), -1);
  EXPECT_EQ(evalOk("cdiv(0 - 3, 2)", env), -1);
  EXPECT_EQ(evalOk("align_up(0 - 4, 4)", env), -4);
  EXPECT_EQ(evalOk("cdiv(9223372036854775807, 2)", env), 4611686018427387904);
}

TEST(LaunchFormula, OverflowAndDivisionAreFaultsNotTraps) {
  Env e;
  e[FormulaSymbol::B] = std::int64_t(1) << 40;
  e[FormulaSymbol::T] = 0;
  EXPECT_EQ(faultOf("B * B", e.v), FormulaFault::Overflow);
  EXPECT_EQ(faultOf("9223372036854775807 + 1", e.v), FormulaFault::Overflow);
  EXPECT_EQ(faultOf("0 - 9223372036854775807 - 2", e.v), FormulaFault::Overflow);
  EXPECT_EQ(faultOf("-(0 - 9223372036854775807 - 1)", e.v), FormulaFault::Overflow);
  EXPECT_EQ(faultOf("(0 - 9223372036854775807 - 1) / (0 - 1)", e.v), FormulaFault::Overflow);
  EXPECT_EQ(faultOf("align_up(9223372036854775806, 4096)", e.v), FormulaFault::Overflow);
  EXPECT_EQ(faultOf("B / T", e.v), FormulaFault::DivideByZero);
  EXPECT_EQ(faultOf("cdiv(B, T)", e.v), FormulaFault::NonPositiveDivisor);
  EXPECT_EQ(faultOf("align_up(B, 0 - 4)", e.v), FormulaFault::NonPositiveDivisor);
}

TEST(LaunchFormula, CompileErrorsNameTheColumnAndWhatWasExpected) {
  int col = 0;
  EXPECT_NE(compileError("chunk * * 4", &col).find("expected a number, a name or '('"), std::string::npos);
  EXPECT_EQ(col, 9);
  EXPECT_NE(compileError("wraps", &col).find("unknown name 'wraps' (expected one of B, T, N"), std::string::npos);
  EXPECT_EQ(col, 1);
  EXPECT_NE(compileError("KP + slots").find("unknown name 'slots'"), std::string::npos);
  EXPECT_NE(compileError("exp(K)").find("unknown function 'exp'"), std::string::npos);
  EXPECT_NE(compileError("min(K)").find("min takes 2 arguments"), std::string::npos);
  EXPECT_NE(compileError("(K + 1").find("expected ')'"), std::string::npos);
  EXPECT_NE(compileError("K 1", &col).find("expected an operator or the end"), std::string::npos);
  EXPECT_EQ(col, 3);
  EXPECT_NE(compileError("").find("the formula ends"), std::string::npos);
  EXPECT_NE(compileError("K % 2").find("unexpected '%'"), std::string::npos);
  EXPECT_NE(compileError("99999999999999999999").find("does not fit in 64 bits"), std::string::npos);
  EXPECT_NE(compileError("K\n+1").find("control character"), std::string::npos);
  EXPECT_NE(compileError("K+\x1b[2J1").find("control character"), std::string::npos);  // a terminal escape
  EXPECT_NE(compileError("K+\xc3\xa91").find("non-ASCII"), std::string::npos);
}

// Untrusted text stays cheap: length, nesting, operation count and stack height are bounded, each with
// its own message, and compile time is linear in the (bounded) length.
TEST(LaunchFormula, HostileTextIsBounded) {
  EXPECT_NE(compileError(std::string(kMaxFormulaChars + 1, '1')).find("expected at most 256 characters, got"), std::string::npos);
  EXPECT_NE(compileError(std::string(40, '(') + "1" + std::string(40, ')')).find("nests deeper than 16"),
            std::string::npos);
  EXPECT_NE(compileError(std::string(40, '-') + "1").find("nests deeper than 16"), std::string::npos);
  std::string calls;
  for (int i = 0; i < 20; ++i) calls += "min(1, ";
  calls += "1" + std::string(20, ')');
  EXPECT_NE(compileError(calls).find("nests deeper than 16"), std::string::npos);
  std::string many = "1";
  for (int i = 0; i < 60; ++i) many += "+1";
  EXPECT_NE(compileError(many).find("more than 96 operations"), std::string::npos);
  // Right-nested sums keep every left operand on the stack: 1+(1+(1+...)) at depth 15 stays legal,
  // and a stack-hungry but shallow formula is refused before it could overrun the evaluator.
  std::string deep;
  for (int i = 0; i < 15; ++i) deep += "1+(";
  deep += "1" + std::string(15, ')');
  const std::int64_t env[kFormulaEnvSize] = {};
  EXPECT_EQ(evalOk(deep, env), 16);
  // Shallow (depth 7) but stack-hungry: each level keeps four values live under its select, 28 > 24.
  std::string hungry = "1";
  for (int i = 0; i < 7; ++i) hungry = "1+1*select(1,1," + hungry + ")";
  EXPECT_NE(compileError(hungry).find("values on the evaluation stack"), std::string::npos);
  EXPECT_NE(compileError("select(select(1,2,select(1,2,select(1,2,select(1,2,select(1,2,select(1,2,select(1,2,"
                         "select(1,2,select(1,2,select(1,2,select(1,2,select(1,2,3))))))))))),1,1)")
                .find("nests deeper"),
            std::string::npos);
}

}  // namespace
}  // namespace dgps
