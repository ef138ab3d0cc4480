// Launch formulas: the integer expressions a package manifest (dgps_package: 2, Package.h) gives for each
// kernel's grid, block and dynamic shared memory and for the workspace buffers' sizes, written by the
// compiler from its kernel plan. The runtime compiles each formula once when the package is opened and
// evaluates it per call without allocating.
//
// Language (the manifest is untrusted text, so it is small and bounded):
//   expr   := term (('+' | '-') term)*
//   term   := unary (('*' | '/') unary)*           '/' divides 64-bit integers, rounding toward zero
//   unary  := '-' unary | atom
//   atom   := integer | name | func '(' expr (',' expr)* ')' | '(' expr ')'
//   func   := cdiv(a, b) = ceil(a / b) for b > 0 | align_up(a, b) = cdiv(a, b) * b | min(a, b) | max(a, b)
//           | select(c, a, b) = (c != 0 ? a : b)
//   name   := a problem symbol (FormulaSymbol) or a `let` name defined before the formula
// Limits: at most kMaxFormulaChars characters, kMaxFormulaDepth nested parentheses/calls/negations,
// kMaxFormulaOps instructions, kMaxFormulaStack values on the evaluation stack. Every operation is checked
// for 64-bit overflow; a division by zero or a cdiv/align_up by b <= 0 is an error, never a trap.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dgps {

/// The names every launch formula may read, in the order of the evaluation environment.
/// Problem shape (launch order of a forward: B batch or 1 with varlen, T tokens per sequence or total
/// packed tokens with varlen, N sequences; decode: B = N = batch rows, T = 1) and tile configuration.
enum class FormulaSymbol : int {
  B, T, N, H, HV, K, V,
  varlen,   ///< 1 when cu_seqlens is given
  f16,      ///< 1 when q, k, v, o are fp16 (bf16 otherwise)
  chunk, block_v, warps, stages,
  L,        ///< chunks per segment of the sequence-parallel state pass (launch.forward_segmented); 0 otherwise
  Count
};

constexpr int kFormulaSymbols = int(FormulaSymbol::Count);
constexpr std::size_t kMaxFormulaChars = 256;
constexpr int kMaxFormulaDepth = 16;
constexpr int kMaxFormulaOps = 96;
constexpr int kMaxFormulaStack = 24;
/// Most `let` names a manifest may define (each is one more slot of the environment).
constexpr int kMaxFormulaLets = 16;
/// Size of an evaluation environment: the symbols, then the lets in definition order.
constexpr int kFormulaEnvSize = kFormulaSymbols + kMaxFormulaLets;

/// The symbol's name as formulas spell it ("B", "HV", "block_v").
const char* toString(FormulaSymbol s);

/// A formula that does not compile: `column` (1-based) inside the formula text, and what was wrong
/// and expected. The manifest reader turns it into "<file>:<line>:<col>: <key>: ..." (Package.h).
class FormulaError : public std::runtime_error {
 public:
  FormulaError(int column, const std::string& what) : std::runtime_error(what), column_(column) {}
  int column() const { return column_; }

 private:
  int column_;
};

/// Why an evaluation failed (no allocation on the call path; the caller builds the message).
enum class FormulaFault : std::uint8_t { None, Overflow, DivideByZero, NonPositiveDivisor };
const char* toString(FormulaFault f);

class Formula {
 public:
  Formula() = default;
  /// Compiles `text`. `lets` are the names defined so far (slot kFormulaSymbols + i). Throws FormulaError.
  static Formula compile(const std::string& text, const std::vector<std::string>& lets);

  /// Evaluates over `env` (kFormulaEnvSize values). Returns FormulaFault::None and sets *out, or the fault.
  FormulaFault evaluate(const std::int64_t* env, std::int64_t* out) const noexcept;

  const std::string& text() const { return text_; }
  bool empty() const { return ops_.empty(); }

  enum class Code : std::uint8_t { Const, Load, Add, Sub, Mul, Div, Neg, Cdiv, AlignUp, Min, Max, Select };
  struct Op {
    Code code;
    std::int64_t arg;  ///< Const: the value; Load: the environment slot
  };

 private:
  std::vector<Op> ops_;
  std::string text_;
};

}  // namespace dgps
