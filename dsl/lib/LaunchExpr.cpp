// LaunchExpr (LaunchExpr.h): a small expression tree, folded as it is built so the printed formulas stay short
// (the manifest bounds a formula's length, LaunchFormula.h kMaxFormulaChars).
#include "dgps/dsl/LaunchExpr.h"

#include <stdexcept>

namespace dgps::launch {

struct LaunchExpr::Node {
  enum Kind { Const, Sym, Add, Mul, Div, Call } kind = Const;
  long long value = 0;           ///< Const
  LaunchSym sym = LaunchSym::K;  ///< Sym
  const char* fn = nullptr;      ///< Call: "max", "cdiv", "align_up"
  std::vector<LaunchExpr> args;  ///< Add, Mul (flattened), Div (2), Call
};

namespace {

struct SymText {
  const char* formula;
  const char* cuda;  ///< nullptr: a problem symbol, no kernel spelling
};

SymText symText(LaunchSym s) {
  switch (s) {
    case LaunchSym::K: return {"K", "K"};
    case LaunchSym::V: return {"V", "V"};
    case LaunchSym::KP: return {"KP", "KP"};
    case LaunchSym::chunk: return {"chunk", "C"};
    case LaunchSym::BV: return {"BV", "BV"};
    case LaunchSym::stages: return {"stages", "STAGES"};
    case LaunchSym::warps: return {"warps", "WARPS"};
    case LaunchSym::B: return {"B", nullptr};
    case LaunchSym::T: return {"T", nullptr};
    case LaunchSym::N: return {"N", nullptr};
    case LaunchSym::H: return {"H", nullptr};
    case LaunchSym::HV: return {"HV", nullptr};
    case LaunchSym::varlen: return {"varlen", nullptr};
    case LaunchSym::slots: return {"slots", nullptr};
    // launch_rules.h segmentSlots over the manifest's L; inline, not a let: lets are evaluated on the plain
    // path too, where L = 0.
    case LaunchSym::segment_slots: return {"select(varlen, T / (chunk * L) + N, N * cdiv(cdiv(T, chunk), L))", nullptr};
  }
  return {"?", nullptr};
}

}  // namespace

LaunchExpr::LaunchExpr(long long constant) {
  auto n = std::make_shared<Node>();
  n->value = constant;
  node_ = std::move(n);
}

LaunchExpr LaunchExpr::sym(LaunchSym s) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Sym;
  n->sym = s;
  return LaunchExpr(std::shared_ptr<const Node>(std::move(n)));
}

bool LaunchExpr::isConstant(long long v) const { return node_->kind == Node::Const && node_->value == v; }

LaunchExpr::Term LaunchExpr::splitTerm(const LaunchExpr& e) {
  const Node& n = *e.node_;
  if (n.kind == Node::Const) return {LaunchExpr(1), n.value};
  if (n.kind != Node::Mul || n.args.back().node_->kind != Node::Const) return {e, 1};
  // a folded product keeps its constant last
  std::vector<LaunchExpr> rest(n.args.begin(), n.args.end() - 1);
  if (rest.size() == 1) return {rest[0], n.args.back().node_->value};
  auto m = std::make_shared<Node>();
  m->kind = Node::Mul;
  m->args = std::move(rest);
  return {LaunchExpr(std::shared_ptr<const Node>(std::move(m))), n.args.back().node_->value};
}

LaunchExpr operator+(const LaunchExpr& a, const LaunchExpr& b) {
  if (a.isConstant(0)) return b;
  if (b.isConstant(0)) return a;
  if (a.node_->kind == LaunchExpr::Node::Const && b.node_->kind == LaunchExpr::Node::Const)
    return LaunchExpr(a.node_->value + b.node_->value);
  auto n = std::make_shared<LaunchExpr::Node>();
  n->kind = LaunchExpr::Node::Add;
  for (const LaunchExpr* e : {&a, &b}) {
    const std::vector<LaunchExpr> one{*e};
    for (const LaunchExpr& t : e->node_->kind == LaunchExpr::Node::Add ? e->node_->args : one) {
      // Adjacent like terms fold: constants into one ("KP * 16 + 1152"), and x * a + x * b into x * (a + b)
      // ("chunk * KP * 2 + chunk * KP * 2" -> "chunk * KP * 4"); exact in integers.
      if (!n->args.empty()) {
        LaunchExpr& last = n->args.back();
        const LaunchExpr::Term a = LaunchExpr::splitTerm(last), b = LaunchExpr::splitTerm(t);
        if (a.rest.node_->kind == LaunchExpr::Node::Const && b.rest.node_->kind == LaunchExpr::Node::Const) {
          last = LaunchExpr(last.node_->value + t.node_->value);
          continue;
        }
        if (a.rest.formula() == b.rest.formula()) {
          last = a.rest * LaunchExpr(a.coef + b.coef);
          continue;
        }
      }
      n->args.push_back(t);
    }
  }
  return LaunchExpr(std::shared_ptr<const LaunchExpr::Node>(std::move(n)));
}

LaunchExpr operator*(const LaunchExpr& a, const LaunchExpr& b) {
  if (a.isConstant(0) || b.isConstant(0)) return LaunchExpr(0);
  if (a.isConstant(1)) return b;
  if (b.isConstant(1)) return a;
  // flatten and fold the constant factors into one, printed last ("chunk * KP * 2")
  std::vector<LaunchExpr> factors;
  long long c = 1;
  for (const LaunchExpr* e : {&a, &b}) {
    const bool mul = e->node_->kind == LaunchExpr::Node::Mul;
    const std::vector<LaunchExpr> one{*e};
    for (const LaunchExpr& f : mul ? e->node_->args : one) {
      if (f.node_->kind == LaunchExpr::Node::Const)
        c *= f.node_->value;
      else
        factors.push_back(f);
    }
  }
  if (factors.empty()) return LaunchExpr(c);
  if (c != 1) factors.push_back(LaunchExpr(c));
  if (factors.size() == 1) return factors[0];
  auto n = std::make_shared<LaunchExpr::Node>();
  n->kind = LaunchExpr::Node::Mul;
  n->args = std::move(factors);
  return LaunchExpr(std::shared_ptr<const LaunchExpr::Node>(std::move(n)));
}

LaunchExpr operator/(const LaunchExpr& a, const LaunchExpr& b) {
  if (b.isConstant(1)) return a;
  auto n = std::make_shared<LaunchExpr::Node>();
  n->kind = LaunchExpr::Node::Div;
  n->args = {a, b};
  return LaunchExpr(std::shared_ptr<const LaunchExpr::Node>(std::move(n)));
}

LaunchExpr max(const LaunchExpr& a, const LaunchExpr& b) {
  if (a.isConstant(0)) return b;
  if (b.isConstant(0)) return a;
  return LaunchExpr::call("max", a, b);
}
LaunchExpr cdiv(const LaunchExpr& a, const LaunchExpr& b) { return b.isConstant(1) ? a : LaunchExpr::call("cdiv", a, b); }
LaunchExpr alignUp(const LaunchExpr& a, const LaunchExpr& b) {
  return b.isConstant(1) ? a : LaunchExpr::call("align_up", a, b);
}

LaunchExpr LaunchExpr::call(const char* fn, const LaunchExpr& a, const LaunchExpr& b) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Call;
  n->fn = fn;
  n->args = {a, b};
  return LaunchExpr(std::shared_ptr<const Node>(std::move(n)));
}

std::string LaunchExpr::formula() const { return render(false); }
std::string LaunchExpr::cuda() const { return render(true); }

std::string LaunchExpr::render(bool cuda) const {
  const Node& n = *node_;
  // a sum binds loosest, then products and quotients; constants, symbols and calls never need parentheses
  auto precedence = [](const LaunchExpr& a) {
    const Node::Kind k = a.node_->kind;
    return k == Node::Add ? 1 : (k == Node::Mul || k == Node::Div) ? 2 : 3;
  };
  auto operand = [&](const LaunchExpr& a, int minPrecedence) {
    const std::string s = a.render(cuda);
    return precedence(a) < minPrecedence ? "(" + s + ")" : s;
  };
  switch (n.kind) {
    case Node::Const:
      return std::to_string(n.value);
    case Node::Sym: {
      const SymText t = symText(n.sym);
      if (!cuda) return t.formula;
      if (!t.cuda)
        throw std::logic_error(std::string("launch symbol '") + t.formula +
                               "' is a problem symbol; a kernel's compile-time constants do not hold it");
      return t.cuda;
    }
    case Node::Add: {
      std::string s;
      for (const LaunchExpr& a : n.args) s += (s.empty() ? "" : " + ") + operand(a, 1);
      return s;
    }
    case Node::Mul: {
      // left to right: a quotient after the first factor keeps its parentheses (c * (a / b) is not c * a / b)
      std::string s;
      for (const LaunchExpr& a : n.args)
        s += s.empty() ? operand(a, 2) : " * " + operand(a, a.node_->kind == Node::Div ? 3 : 2);
      return s;
    }
    case Node::Div:
      return operand(n.args[0], 2) + " / " + operand(n.args[1], 3);
    case Node::Call: {
      std::string fn = n.fn;
      if (cuda) fn = std::string("dgps::launch::") + (fn == "max" ? "imax" : fn);
      return fn + "(" + n.args[0].render(cuda) + ", " + n.args[1].render(cuda) + ")";
    }
  }
  return "?";
}

long long LaunchExpr::eval(const ProblemShape& s, const TileConfig& t, long long L) const {
  const Node& n = *node_;
  switch (n.kind) {
    case Node::Const:
      return n.value;
    case Node::Sym:
      switch (n.sym) {
        case LaunchSym::K: return s.K;
        case LaunchSym::V: return s.V;
        case LaunchSym::KP: return pad16((int)s.K);
        case LaunchSym::chunk: return t.chunk;
        case LaunchSym::BV: return valueTile((int)s.V, t.block_v);
        case LaunchSym::stages: return t.stages;
        case LaunchSym::warps: return t.warps;
        case LaunchSym::B: return s.B;
        case LaunchSym::T: return s.T;
        case LaunchSym::N: return s.N;
        case LaunchSym::H: return s.H;
        case LaunchSym::HV: return s.HV;
        case LaunchSym::varlen: return s.varlen;
        case LaunchSym::slots: return chunkSlots(s, t.chunk);
        case LaunchSym::segment_slots: return L >= 1 ? segmentSlots(s, t.chunk, L) : 0;
      }
      return 0;
    case Node::Add: {
      long long v = 0;
      for (const LaunchExpr& a : n.args) v += a.eval(s, t, L);
      return v;
    }
    case Node::Mul: {
      long long v = 1;
      for (const LaunchExpr& a : n.args) v *= a.eval(s, t, L);
      return v;
    }
    case Node::Div:
      return n.args[0].eval(s, t, L) / n.args[1].eval(s, t, L);
    case Node::Call: {
      const long long a = n.args[0].eval(s, t, L), b = n.args[1].eval(s, t, L);
      const std::string fn = n.fn;
      return fn == "max" ? (a > b ? a : b) : fn == "cdiv" ? launch::cdiv(a, b) : launch::align_up(a, b);
    }
  }
  return 0;
}

}  // namespace dgps::launch
