// Compiler (recursive descent, depth-bounded) and evaluator (a fixed-size stack machine) of launch formulas.
#include "dgps/runtime/LaunchFormula.h"

#include <array>
#include <cstring>
#include <limits>

#include "TextParse.h"

namespace dgps {

const char* toString(FormulaSymbol s) {
  static const char* const names[] = {"B",   "T",      "N",   "H",     "HV",      "K",     "V",
                                      "varlen", "f16", "chunk", "block_v", "warps", "stages", "L"};
  static_assert(sizeof(names) / sizeof(names[0]) == kFormulaSymbols, "one name per symbol");
  const int i = int(s);
  return i >= 0 && i < kFormulaSymbols ? names[i] : "?";
}

const char* toString(FormulaFault f) {
  switch (f) {
    case FormulaFault::None: return "no fault";
    case FormulaFault::Overflow: return "overflows 64-bit integers";
    case FormulaFault::DivideByZero: return "divides by zero";
    case FormulaFault::NonPositiveDivisor: return "calls cdiv or align_up with a divisor <= 0";
  }
  return "fails";
}

namespace {

using Code = Formula::Code;
using Op = Formula::Op;

struct Function {
  const char* name;
  int arity;
  Code code;
};
constexpr Function kFunctions[] = {{"cdiv", 2, Code::Cdiv}, {"align_up", 2, Code::AlignUp}, {"min", 2, Code::Min},
                                   {"max", 2, Code::Max},   {"select", 3, Code::Select}};

std::string functionList() {
  std::string s;
  for (const Function& f : kFunctions) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

// One pass over the text; every production consumes at least one character or fails, and nesting is
// counted, so compile time and stack depth are bounded by the text's length limit.
class Parser {
 public:
  Parser(const std::string& text, const std::vector<std::string>& lets) : s_(text), lets_(lets) {}

  std::vector<Op> run() {
    expr();
    skipSpace();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "' (expected an operator or the end)");
    return std::move(ops_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw FormulaError(int(i_) + 1, what); }

  void skipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    skipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void emit(Code c, std::int64_t arg = 0) {
    if (int(ops_.size()) >= kMaxFormulaOps)
      fail("the formula has more than " + std::to_string(kMaxFormulaOps) + " operations (expected at most " +
           std::to_string(kMaxFormulaOps) + ")");
    ops_.push_back(Op{c, arg});
  }
  void enter() {
    if (++depth_ > kMaxFormulaDepth)
      fail("the formula nests deeper than " + std::to_string(kMaxFormulaDepth) +
           " levels of parentheses, calls and negations (expected at most " + std::to_string(kMaxFormulaDepth) + ")");
  }

  void expr() {
    enter();
    term();
    for (;;) {
      if (eat('+')) {
        term();
        emit(Code::Add);
      } else if (eat('-')) {
        term();
        emit(Code::Sub);
      } else {
        break;
      }
    }
    --depth_;
  }

  void term() {
    unary();
    for (;;) {
      if (eat('*')) {
        unary();
        emit(Code::Mul);
      } else if (eat('/')) {
        unary();
        emit(Code::Div);
      } else {
        break;
      }
    }
  }

  void unary() {
    if (eat('-')) {
      enter();
      unary();
      emit(Code::Neg);
      --depth_;
      return;
    }
    atom();
  }

  void atom() {
    skipSpace();
    if (i_ >= s_.size()) fail("expected a number, a name or '(' but the formula ends");
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      expr();
      if (!eat(')')) fail("expected ')'");
      return;
    }
    if (text::isDigit(c)) return number();
    if (text::isAlpha(c) || c == '_') return name();
    fail("unexpected '" + std::string(1, c) + "' (expected a number, a name or '(')");
  }

  void number() {
    const std::size_t start = i_;
    while (i_ < s_.size() && text::isDigit(s_[i_])) ++i_;
    long long v = 0;
    if (!text::parseInt(std::string_view(s_).substr(start, i_ - start), 0, std::numeric_limits<long long>::max(), &v)) {
      i_ = start;
      fail("the integer does not fit in 64 bits");
    }
    emit(Code::Const, v);
  }

  void name() {
    const std::size_t start = i_;
    while (i_ < s_.size() && (text::isAlpha(s_[i_]) || text::isDigit(s_[i_]) || s_[i_] == '_')) ++i_;
    const std::string id = s_.substr(start, i_ - start);
    if (eat('(')) return call(id, start);
    for (int k = 0; k < kFormulaSymbols; ++k)
      if (id == toString(FormulaSymbol(k))) return emit(Code::Load, k);
    for (std::size_t k = 0; k < lets_.size(); ++k)
      if (id == lets_[k]) return emit(Code::Load, kFormulaSymbols + std::int64_t(k));
    i_ = start;
    std::string known;
    for (int k = 0; k < kFormulaSymbols; ++k) known += (known.empty() ? "" : ", ") + std::string(toString(FormulaSymbol(k)));
    for (const std::string& l : lets_) known += ", " + l;
    fail("unknown name '" + text::shown(id, 64) + "' (expected one of " + known + ")");
  }

  void call(const std::string& id, std::size_t start) {
    const Function* f = nullptr;
    for (const Function& g : kFunctions)
      if (id == g.name) f = &g;
    if (!f) {
      i_ = start;
      fail("unknown function '" + text::shown(id, 64) + "' (expected one of " + functionList() + ")");
    }
    enter();
    for (int a = 0; a < f->arity; ++a) {
      if (a > 0 && !eat(',')) fail(std::string(f->name) + " takes " + std::to_string(f->arity) + " arguments: expected ','");
      expr();
    }
    if (!eat(')')) fail(std::string(f->name) + " takes " + std::to_string(f->arity) + " arguments: expected ')'");
    --depth_;
    emit(f->code);
  }

  const std::string& s_;
  const std::vector<std::string>& lets_;
  std::size_t i_ = 0;
  int depth_ = 0;
  std::vector<Op> ops_;
};

// Stack height the program reaches; the evaluator's fixed stack must hold it.
int maxStack(const std::vector<Op>& ops) {
  int h = 0, peak = 0;
  for (const Op& op : ops) {
    switch (op.code) {
      case Code::Const:
      case Code::Load: ++h; break;
      case Code::Neg: break;
      case Code::Select: h -= 2; break;
      default: h -= 1; break;
    }
    peak = h > peak ? h : peak;
  }
  return peak;
}

// ceil(a / b) for b > 0, exact for every a (negative a included) and never overflowing: C++ division truncates
// toward zero, which is already the ceiling for a negative quotient.
bool cdiv(std::int64_t a, std::int64_t b, std::int64_t* out) {
  std::int64_t q = a / b;
  if (a % b != 0 && a > 0) ++q;
  *out = q;
  return true;
}

}  // namespace

Formula Formula::compile(const std::string& text, const std::vector<std::string>& lets) {
  if (text.size() > kMaxFormulaChars)
    throw FormulaError(int(kMaxFormulaChars) + 1, "the formula is too long: expected at most " +
                                                      std::to_string(kMaxFormulaChars) + " characters, got " +
                                                      std::to_string(text.size()));
  if (lets.size() > std::size_t(kMaxFormulaLets))
    throw FormulaError(1, "more than " + std::to_string(kMaxFormulaLets) + " let names");
  // Formula text comes from an untrusted manifest and is echoed in error messages: printable ASCII only.
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f)
      throw FormulaError(int(i) + 1, "the formula holds a control character or a non-ASCII byte (expected one "
                                     "line of printable ASCII)");
  }
  Formula f;
  f.ops_ = Parser(text, lets).run();
  if (maxStack(f.ops_) > kMaxFormulaStack)
    throw FormulaError(1, "the formula needs more than " + std::to_string(kMaxFormulaStack) +
                              " values on the evaluation stack (write it with fewer nested terms)");
  f.text_ = text;
  return f;
}

FormulaFault Formula::evaluate(const std::int64_t* env, std::int64_t* out) const noexcept {
  std::int64_t st[kMaxFormulaStack];
  int h = 0;
  for (const Op& op : ops_) {
    switch (op.code) {
      case Code::Const: st[h++] = op.arg; continue;
      case Code::Load: st[h++] = env[op.arg]; continue;
      case Code::Neg:
        if (st[h - 1] == std::numeric_limits<std::int64_t>::min()) return FormulaFault::Overflow;
        st[h - 1] = -st[h - 1];
        continue;
      case Code::Select:
        h -= 2;
        st[h - 1] = st[h - 1] != 0 ? st[h] : st[h + 1];
        continue;
      default: break;
    }
    const std::int64_t b = st[--h];
    std::int64_t& a = st[h - 1];
    switch (op.code) {
      case Code::Add:
        if (__builtin_add_overflow(a, b, &a)) return FormulaFault::Overflow;
        break;
      case Code::Sub:
        if (__builtin_sub_overflow(a, b, &a)) return FormulaFault::Overflow;
        break;
      case Code::Mul:
        if (__builtin_mul_overflow(a, b, &a)) return FormulaFault::Overflow;
        break;
      case Code::Div:
        if (b == 0) return FormulaFault::DivideByZero;
        if (b == -1 && a == std::numeric_limits<std::int64_t>::min()) return FormulaFault::Overflow;
        a /= b;
        break;
      case Code::Cdiv:
        if (b <= 0) return FormulaFault::NonPositiveDivisor;
        if (!cdiv(a, b, &a)) return FormulaFault::Overflow;
        break;
      case Code::AlignUp:
        if (b <= 0) return FormulaFault::NonPositiveDivisor;
        if (!cdiv(a, b, &a) || __builtin_mul_overflow(a, b, &a)) return FormulaFault::Overflow;
        break;
      case Code::Min: a = a < b ? a : b; break;
      case Code::Max: a = a > b ? a : b; break;
      default: break;
    }
  }
  *out = st[0];
  return FormulaFault::None;
}

}  // namespace dgps
