#include "dgps/dsl/Canonical.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace dgps {

std::string formatNumber(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return "0";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  // Tidy the exponent: "1e-06" -> "1e-6", "1e+20" -> "1e20".
  std::string s = buf;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  std::string sign;
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
    if (exp[0] == '-') sign = "-";
    exp = exp.substr(1);
  }
  exp.erase(0, std::min(exp.find_first_not_of('0'), exp.size() - 1));
  return mant + "e" + sign + exp;
}

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

/// True for identifiers YAML reads back as the same plain string (not a bool or null keyword).
bool plainSafe(const std::string& s) {
  static const char* keywords[] = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"};
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  for (const char* k : keywords)
    if (s == k) return false;
  return true;
}

const char* boolText(bool b) { return b ? "true" : "false"; }

template <class T, class F>
std::string flow(const std::vector<T>& v, F text) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += text(v[i]);
  }
  return out + "]";
}

std::string ints(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return flow(v, [](int x) { return std::to_string(x); });
}

int dtypeRank(DType d) { return d == DType::BF16 ? 0 : d == DType::F16 ? 1 : 2; }

/// The canonical text; `forHash` leaves out the lines that do not change the computation.
std::string render(const Spec& s, bool forHash) {
  std::ostringstream o;
  o << "name: " << (plainSafe(s.name) ? s.name : quoted(s.name)) << "\n";
  if (!forHash) o << "description: " << quoted(s.description) << "\n";
  o << "decay:\n  kind: " << toString(s.decay.kind) << "\n";
  o << "gain:\n  kind: " << toString(s.gain.kind) << "\n";
  if (hasGainInput(s))
    o << "  range: [" << formatNumber(s.gain.lo) << ", " << formatNumber(s.gain.hi) << "]\n";
  o << "precond:\n  kind: " << toString(s.precond.kind) << "\n";
  if (hasPrecond(s)) {
    o << "  side: " << toString(s.precond.side) << "\n";
    o << "  source: " << toString(s.precond.source) << "\n";
    if (usesSquash(s)) {
      const SquashParams& p = s.precond.squash;
      o << "  squash:\n"
        << "    x: " << formatNumber(p.x) << "\n"
        << "    eps: " << formatNumber(p.eps) << "\n"
        << "    center_init: " << formatNumber(p.center_init) << "\n"
        << "    gate: " << boolText(p.has_gate) << "\n"
        << "    gain: " << boolText(p.has_gain) << "\n";
    } else {
      const HypergradParams& p = s.precond.hypergrad;
      o << "  hypergrad:\n"
        << "    eta: " << formatNumber(p.eta) << "\n"
        << "    retention: " << boolText(p.has_retention) << "\n"
        << "    timing: " << toString(p.timing) << "\n"
        << "    init: " << formatNumber(p.init) << "\n";
      if (!p.clamp_min && !p.clamp_max)
        o << "    clamp: none\n";
      else
        o << "    clamp: [" << (p.clamp_min ? formatNumber(*p.clamp_min) : "-inf") << ", "
          << (p.clamp_max ? formatNumber(*p.clamp_max) : "inf") << "]\n";
    }
  }
  o << "solve:\n  kind: " << toString(s.solve.kind) << "\n";
  // steps: 1 (every single-step spec) is left out, so those specs keep their canonical text and hash.
  if (s.solve.steps != 1) o << "  steps: " << s.solve.steps << "\n";
  o << "normalize:\n  qk_l2norm: " << boolText(s.qk_l2norm) << "\n";
  if (s.qk_l2norm) o << "  eps: " << formatNumber(s.l2norm_eps) << "\n";
  o << "scale: " << (s.scale ? formatNumber(*s.scale) : "auto") << "\n";
  o << "heads:\n  qk: " << (s.heads_qk == 0 ? std::string("any") : std::to_string(s.heads_qk)) << "\n"
    << "  gva_ratio: " << s.gva_ratio << "\n";
  o << "dims:\n  key: " << ints(s.key_dims) << "\n  value: " << ints(s.value_dims) << "\n";
  std::vector<DType> in = s.input_dtypes;
  std::sort(in.begin(), in.end(), [](DType a, DType b) { return dtypeRank(a) < dtypeRank(b); });
  o << "dtypes:\n  inputs: " << flow(in, [](DType d) { return std::string(toString(d)); }) << "\n"
    << "  state: " << toString(s.state_dtype) << "\n";
  o << "io:\n  initial_state: " << boolText(s.initial_state) << "\n"
    << "  final_state: " << boolText(s.final_state) << "\n";
  if (hasPrecond(s))
    o << "  initial_precond_state: " << boolText(s.initial_precond_state) << "\n"
      << "  final_precond_state: " << boolText(s.final_precond_state) << "\n";
  if (hasKernel(s, KernelKind::ChunkForward)) o << "  varlen: " << boolText(s.varlen) << "\n";
  std::vector<KernelKind> ks = s.kernels;
  std::sort(ks.begin(), ks.end());
  o << "kernels: " << flow(ks, [](KernelKind k) { return std::string(toString(k)); }) << "\n";
  o << "tuning:\n  chunk: " << ints(s.tuning.chunk) << "\n  block_v: " << ints(s.tuning.block_v)
    << "\n  warps: " << ints(s.tuning.warps) << "\n  stages: " << ints(s.tuning.stages) << "\n";
  if (!forHash) o << "allow_unstable: " << boolText(s.allow_unstable) << "\n";
  return o.str();
}

}  // namespace

std::string canonicalYaml(const Spec& s) { return render(s, false); }

uint64_t specHash64(const Spec& s) { return fnv1a64(render(s, true)); }

std::string specHash(const Spec& s) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(specHash64(s)));
  return buf;
}

bool operator==(const Spec& a, const Spec& b) { return canonicalYaml(a) == canonicalYaml(b); }

}  // namespace dgps
