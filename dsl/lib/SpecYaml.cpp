// YAML -> Spec: node types, key names, enum values and the "does this key apply" rules. Value ranges
// and cross-field rules live in SpecValidate.cpp. Every yaml-cpp call that can throw is wrapped, so
// no exception leaves parseSpecString / parseSpecFile.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>

#include "SpecInternal.h"
#include "dgps/dsl/FileRead.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

using detail::KeyLoc;
using detail::LocMap;

template <class E>
using EnumTable = std::vector<std::pair<const char*, E>>;

const EnumTable<DecayKind> kDecayKinds = {
    {"none", DecayKind::None}, {"scalar", DecayKind::Scalar}, {"diagonal", DecayKind::Diagonal}};
const EnumTable<GainKind> kGainKinds = {{"none", GainKind::None}, {"scalar", GainKind::Scalar}};
const EnumTable<PrecondKind> kPrecondKinds = {{"none", PrecondKind::None},
                                              {"diagonal", PrecondKind::Diagonal}};
const EnumTable<PrecondSide> kPrecondSides = {{"key", PrecondSide::Key},
                                              {"query", PrecondSide::Query}};
const EnumTable<PrecondSource> kPrecondSources = {{"ema_sq_squash", PrecondSource::EmaSqSquash},
                                                  {"hypergrad_ogd", PrecondSource::HypergradOgd}};
const EnumTable<SolveKind> kSolveKinds = {{"linear", SolveKind::Linear}, {"delta", SolveKind::Delta}};
const EnumTable<WriteTiming> kTimings = {{"pre", WriteTiming::Pre}, {"post", WriteTiming::Post}};
// f32 parses so that the validator can say why it is refused (abi.h takes bf16/fp16 inputs only).
const EnumTable<DType> kDTypes = {{"bf16", DType::BF16}, {"f16", DType::F16}, {"f32", DType::F32}};
const EnumTable<KernelKind> kKernels = {{"chunk_forward", KernelKind::ChunkForward},
                                        {"decode", KernelKind::Decode}};

template <class E>
std::vector<std::string> names(const EnumTable<E>& t) {
  std::vector<std::string> out;
  for (const auto& p : t) out.push_back(p.first);
  return out;
}

std::string childPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}
std::string indexPath(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

/// One `key: value` pair of a mapping.
struct Entry {
  YAML::Node key;
  YAML::Node value;
};
using Entries = std::map<std::string, Entry>;

const Entry* find(const Entries& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

bool isQuoted(const YAML::Node& n) { return n.Tag() == "!"; }

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar:
      return isQuoted(n) ? "the quoted string \"" + detail::printable(n.Scalar()) + "\""
                         : "'" + detail::printable(n.Scalar()) + "'";
    default: return "an undefined node";
  }
}

bool parseInf(const std::string& t, double& out) {
  static const char* pos[] = {"inf", "+inf", ".inf", "+.inf", ".Inf", "+.Inf", ".INF", "+.INF"};
  static const char* neg[] = {"-inf", "-.inf", "-.Inf", "-.INF"};
  for (const char* p : pos)
    if (t == p) return out = std::numeric_limits<double>::infinity(), true;
  for (const char* p : neg)
    if (t == p) return out = -std::numeric_limits<double>::infinity(), true;
  return false;
}

/// Reads one YAML document into a Spec, recording where each key was written.
class Reader {
 public:
  Reader(std::string file, std::vector<Diagnostic>& diags, LocMap& locs)
      : file_(std::move(file)), diags_(diags), locs_(locs) {}

  void readDocument(const YAML::Node& root, Spec& s);

  /// Paths the reader reported ("" when the document itself was not a mapping).
  const std::set<std::string>& unread() const { return failed_; }

 private:
  SourceLoc at(const YAML::Node& n) const {
    SourceLoc l;
    l.file = file_;
    YAML::Mark m = n.Mark();
    l.line = m.line >= 0 ? m.line + 1 : 1;
    l.column = m.column >= 0 ? m.column + 1 : 1;
    return l;
  }

  void error(const SourceLoc& l, const std::string& path, const std::string& msg,
             const std::string& expected) {
    Diagnostic d;
    d.file = l.file;
    d.line = l.line;
    d.column = l.column;
    d.path = path;
    d.message = msg;
    d.expected = expected;
    diags_.push_back(d);
    failed_.insert(path);
  }

  void typeError(const YAML::Node& v, const std::string& path, const std::string& what) {
    error(at(v), path, "wrong type: got " + describe(v), what);
  }

  /// True if an error was reported at `path` or below it.
  bool failed(const std::string& path) const {
    for (const std::string& f : failed_)
      if (f == path || (f.size() > path.size() && f.compare(0, path.size(), path) == 0 &&
                        (f[path.size()] == '.' || f[path.size()] == '[')))
        return true;
    return false;
  }

  /// Checks that `node` is a mapping whose keys are in `allowed`, reporting unknown and duplicate
  /// keys; fills `out` with the accepted entries.
  bool readMap(const YAML::Node& node, const std::string& path,
               const std::vector<std::string>& allowed, Entries& out);

  bool requireKey(const Entries& m, const char* key, const YAML::Node& parent,
                  const std::string& path, const std::string& expected) {
    if (find(m, key)) return true;
    error(at(parent), childPath(path, key),
          "missing required key '" + std::string(key) + "'" +
              (path.empty() ? std::string() : " in '" + path + "'"),
          expected);
    return false;
  }

  /// A key written where it has no effect (e.g. gain.range with gain.kind none) is an error.
  void notApplicable(const Entries& m, const char* key, const std::string& path,
                     const std::string& why, const std::string& expected) {
    const Entry* e = find(m, key);
    if (!e) return;
    error(at(e->key), childPath(path, key), "does not apply: " + why, expected);
  }

  bool readString(const YAML::Node& v, const std::string& path, std::string& out) {
    if (!v.IsScalar()) return typeError(v, path, "a string"), false;
    out = v.Scalar();
    return true;
  }

  bool readBool(const YAML::Node& v, const std::string& path, bool& out) {
    if (v.IsScalar() && !isQuoted(v)) {
      if (v.Scalar() == "true") return out = true, true;
      if (v.Scalar() == "false") return out = false, true;
    }
    typeError(v, path, "true or false");
    return false;
  }

  /// A plain YAML number; `inf` / `.inf` (and negatives) only where `allowInf`. NaN never.
  bool readNumber(const YAML::Node& v, const std::string& path, bool allowInf, double& out) {
    const std::string what = allowInf ? "a number or inf" : "a finite number";
    if (!v.IsScalar() || isQuoted(v)) return typeError(v, path, what), false;
    const std::string& t = v.Scalar();
    double x = 0;
    if (parseInf(t, x)) {
      if (!allowInf) return typeError(v, path, what), false;
      return out = x, true;
    }
    if (t.empty()) return typeError(v, path, what), false;
    char* end = nullptr;
    errno = 0;
    x = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size() || !std::isfinite(x) || t.find_first_of("nNxX") != std::string::npos) {
      if (errno == ERANGE)
        error(at(v), path, "number out of range: " + detail::printable(t), what);
      else
        typeError(v, path, what);
      return false;
    }
    out = x;
    return true;
  }

  /// A plain decimal integer that fits an int.
  bool readInt(const YAML::Node& v, const std::string& path, int& out) {
    if (!v.IsScalar() || isQuoted(v)) return typeError(v, path, "an integer"), false;
    const std::string& t = v.Scalar();
    char* end = nullptr;
    errno = 0;
    long long x = t.empty() ? 0 : std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || end != t.c_str() + t.size()) return typeError(v, path, "an integer"), false;
    if (errno == ERANGE || x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
      error(at(v), path, "integer out of range: " + detail::printable(t), "an integer");
      return false;
    }
    out = static_cast<int>(x);
    return true;
  }

  template <class E>
  bool readEnum(const YAML::Node& v, const std::string& path, const EnumTable<E>& table, E& out) {
    const std::string allowed = detail::join(names(table), ", ");
    if (!v.IsScalar()) return typeError(v, path, "one of: " + allowed), false;
    for (const auto& p : table)
      if (v.Scalar() == p.first) return out = p.second, true;
    std::string msg = "unknown value '" + detail::printable(v.Scalar()) + "'";
    std::string near = detail::nearest(v.Scalar(), names(table));
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    error(at(v), path, msg, "one of: " + allowed);
    return false;
  }

  /// A list whose elements are read by `readElem(node, elementPath, value&)`.
  template <class T, class F>
  bool readList(const YAML::Node& v, const std::string& path, const std::string& what,
                std::vector<T>& out, F readElem) {
    if (!v.IsSequence()) return typeError(v, path, "a list of " + what), false;
    std::vector<T> tmp;
    bool ok = true;
    for (size_t i = 0; i < v.size(); ++i) {
      const YAML::Node e = v[i];
      const std::string ep = indexPath(path, i);
      locs_[ep] = KeyLoc{at(e), at(e)};
      T x{};
      if (readElem(e, ep, x))
        tmp.push_back(x);
      else
        ok = false;
    }
    if (ok) out = tmp;
    return ok;
  }

  bool readIntList(const YAML::Node& v, const std::string& path, std::vector<int>& out) {
    return readList(v, path, "integers", out, [this](const YAML::Node& e, const std::string& p,
                                                     int& x) { return readInt(e, p, x); });
  }

  template <class E>
  bool readEnumList(const YAML::Node& v, const std::string& path, const EnumTable<E>& table,
                    std::vector<E>& out) {
    return readList(v, path, "(" + detail::join(names(table), ", ") + ")", out,
                    [this, &table](const YAML::Node& e, const std::string& p, E& x) {
                      return readEnum(e, p, table, x);
                    });
  }

  /// `[lo, hi]`: two numbers; infinities allowed where the flags say.
  bool readPair(const YAML::Node& v, const std::string& path, bool loInf, bool hiInf, double& lo,
                double& hi) {
    const std::string what = "a list [lo, hi] of two numbers";
    if (!v.IsSequence()) return typeError(v, path, what), false;
    if (v.size() != 2) {
      error(at(v), path, "expected 2 numbers [lo, hi], got " + std::to_string(v.size()), what);
      return false;
    }
    locs_[indexPath(path, 0)] = KeyLoc{at(v[0]), at(v[0])};
    locs_[indexPath(path, 1)] = KeyLoc{at(v[1]), at(v[1])};
    bool ok = readNumber(v[0], indexPath(path, 0), loInf, lo);
    ok = readNumber(v[1], indexPath(path, 1), hiInf, hi) && ok;
    return ok;
  }

  /// An axis is `axis: {kind: value, ...}` or the shorthand `axis: value`. Returns the node holding
  /// the kind (or null when missing/invalid) and fills `m` with the mapping's entries.
  bool readAxis(const Entry& e, const std::string& path, const std::vector<std::string>& keys,
                Entries& m, YAML::Node& kind, const std::string& kindExpected);

  void readName(const Entries& root, const YAML::Node& rootNode, Spec& s);
  void readDecay(const Entry& e, Spec& s);
  void readGain(const Entry& e, Spec& s);
  void readPrecond(const Entry& e, Spec& s);
  void readSquash(const Entry& e, SquashParams& p);
  void readHypergrad(const Entry& e, HypergradParams& p);
  void readSolve(const Entry& e, Spec& s);
  void readNormalize(const Entry& e, Spec& s);
  void readScale(const Entry& e, Spec& s);
  void readHeads(const Entry& e, Spec& s);
  void readDims(const Entry& e, Spec& s);
  void readDtypes(const Entry& e, Spec& s);
  void readIo(const Entry* e, Spec& s);
  void readTuning(const Entry& e, Spec& s);

  std::string file_;
  std::vector<Diagnostic>& diags_;
  LocMap& locs_;
  std::set<std::string> failed_;
};

bool Reader::readMap(const YAML::Node& node, const std::string& path,
                     const std::vector<std::string>& allowed, Entries& out) {
  if (!node.IsMap()) {
    typeError(node, path, "a mapping with keys " + detail::join(allowed, ", "));
    return false;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node k = it->first;
    const YAML::Node v = it->second;
    if (!k.IsScalar()) {
      error(at(k), path, "keys must be plain names, got " + describe(k),
            "one of: " + detail::join(allowed, ", "));
      continue;
    }
    const std::string name = k.Scalar();
    const std::string kp = childPath(path, name);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string msg = "unknown key '" + detail::printable(name) + "'";
      std::string near = detail::nearest(name, allowed);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      error(at(k), childPath(path, detail::printable(name)), msg, (path.empty() ? "top-level keys: " : "keys of '" + path + "': ") +
                                detail::join(allowed, ", "));
      continue;
    }
    auto prev = out.find(name);
    if (prev != out.end()) {
      error(at(k), kp,
            "duplicate key '" + detail::printable(name) + "' (first written at line " +
                std::to_string(at(prev->second.key).line) + ")",
            "each key once");
      continue;
    }
    out[name] = Entry{k, v};
    locs_[kp] = KeyLoc{at(k), at(v)};
  }
  return true;
}

bool Reader::readAxis(const Entry& e, const std::string& path, const std::vector<std::string>& keys,
                      Entries& m, YAML::Node& kind, const std::string& kindExpected) {
  const std::string kp = childPath(path, "kind");
  if (e.value.IsScalar()) {  // shorthand `decay: scalar`
    locs_[kp] = KeyLoc{at(e.value), at(e.value)};
    kind = e.value;
    return true;
  }
  if (e.value.IsNull()) {
    error(at(e.key), path, "missing value", kindExpected);
    return false;
  }
  if (!readMap(e.value, path, keys, m)) return false;
  if (!requireKey(m, "kind", e.value, path, kindExpected)) return false;
  kind = find(m, "kind")->value;
  return true;
}

void Reader::readName(const Entries& root, const YAML::Node& rootNode, Spec& s) {
  if (!requireKey(root, "name", rootNode, "", "name: an identifier [a-z][a-z0-9_]*")) return;
  readString(find(root, "name")->value, "name", s.name);
  if (const Entry* d = find(root, "description")) {
    if (d->value.IsNull())
      s.description.clear();
    else
      readString(d->value, "description", s.description);
  }
}

void Reader::readDecay(const Entry& e, Spec& s) {
  s.decay.loc = at(e.value);
  Entries m;
  YAML::Node kind;
  if (readAxis(e, "decay", {"kind"}, m, kind, "decay: {kind: none|scalar|diagonal}"))
    readEnum(kind, "decay.kind", kDecayKinds, s.decay.kind);
}

void Reader::readGain(const Entry& e, Spec& s) {
  s.gain.loc = at(e.value);
  Entries m;
  YAML::Node kind;
  if (!readAxis(e, "gain", {"kind", "range"}, m, kind, "gain: {kind: none|scalar, range: [lo, hi]}"))
    return;
  if (!readEnum(kind, "gain.kind", kGainKinds, s.gain.kind)) return;
  if (s.gain.kind == GainKind::None) {
    notApplicable(m, "range", "gain", "gain.kind is none (the gain is the constant 1)",
                  "remove gain.range, or set gain.kind: scalar");
    return;
  }
  if (const Entry* r = find(m, "range")) {
    double lo = 0, hi = 0;
    if (readPair(r->value, "gain.range", false, true, lo, hi)) {
      s.gain.lo = lo;
      s.gain.hi = hi;
    }
  }
}

void Reader::readSquash(const Entry& e, SquashParams& p) {
  Entries m;
  if (!readMap(e.value, "precond.squash", {"x", "eps", "center_init", "gate", "gain"}, m)) return;
  if (const Entry* x = find(m, "x")) readNumber(x->value, "precond.squash.x", false, p.x);
  if (const Entry* x = find(m, "eps")) readNumber(x->value, "precond.squash.eps", false, p.eps);
  if (const Entry* x = find(m, "center_init"))
    readNumber(x->value, "precond.squash.center_init", false, p.center_init);
  if (const Entry* x = find(m, "gate")) readBool(x->value, "precond.squash.gate", p.has_gate);
  if (const Entry* x = find(m, "gain")) readBool(x->value, "precond.squash.gain", p.has_gain);
}

void Reader::readHypergrad(const Entry& e, HypergradParams& p) {
  Entries m;
  if (!readMap(e.value, "precond.hypergrad", {"eta", "retention", "timing", "init", "clamp"}, m))
    return;
  if (const Entry* x = find(m, "eta")) readNumber(x->value, "precond.hypergrad.eta", false, p.eta);
  if (const Entry* x = find(m, "retention"))
    readBool(x->value, "precond.hypergrad.retention", p.has_retention);
  if (const Entry* x = find(m, "timing"))
    readEnum(x->value, "precond.hypergrad.timing", kTimings, p.timing);
  if (const Entry* x = find(m, "init")) readNumber(x->value, "precond.hypergrad.init", false, p.init);
  if (const Entry* x = find(m, "clamp")) {
    const YAML::Node& v = x->value;
    if (v.IsNull() || (v.IsScalar() && v.Scalar() == "none")) {
      p.clamp_min.reset();
      p.clamp_max.reset();
      return;
    }
    if (v.IsScalar()) {
      typeError(v, "precond.hypergrad.clamp", "none or a list [lo, hi]");
      return;
    }
    double lo = 0, hi = 0;
    if (!readPair(v, "precond.hypergrad.clamp", true, true, lo, hi)) return;
    if (std::isinf(lo) && lo > 0) {
      error(at(v[0]), "precond.hypergrad.clamp[0]", "lower bound cannot be +inf",
            "a number or -inf (no lower bound)");
      return;
    }
    if (std::isinf(hi) && hi < 0) {
      error(at(v[1]), "precond.hypergrad.clamp[1]", "upper bound cannot be -inf",
            "a number or inf (no upper bound)");
      return;
    }
    p.clamp_min = std::isinf(lo) ? std::nullopt : std::optional<double>(lo);
    p.clamp_max = std::isinf(hi) ? std::nullopt : std::optional<double>(hi);
  }
}

void Reader::readPrecond(const Entry& e, Spec& s) {
  s.precond.loc = at(e.value);
  Entries m;
  YAML::Node kind;
  if (!readAxis(e, "precond", {"kind", "side", "source", "squash", "hypergrad"}, m, kind,
                "precond: {kind: none|diagonal, side, source, squash|hypergrad}"))
    return;
  if (!readEnum(kind, "precond.kind", kPrecondKinds, s.precond.kind)) return;
  if (s.precond.kind == PrecondKind::None) {
    for (const char* k : {"side", "source", "squash", "hypergrad"})
      notApplicable(m, k, "precond", "precond.kind is none",
                    "remove precond." + std::string(k) + ", or set precond.kind: diagonal");
    return;
  }
  if (const Entry* x = find(m, "side")) readEnum(x->value, "precond.side", kPrecondSides, s.precond.side);
  if (const Entry* x = find(m, "source")) {
    if (!readEnum(x->value, "precond.source", kPrecondSources, s.precond.source)) return;
  }
  if (s.precond.source == PrecondSource::EmaSqSquash) {
    notApplicable(m, "hypergrad", "precond", "precond.source is ema_sq_squash",
                  "precond.squash: {x, eps, center_init, gate, gain}, or precond.source: hypergrad_ogd");
    if (const Entry* x = find(m, "squash")) readSquash(*x, s.precond.squash);
  } else {
    notApplicable(m, "squash", "precond", "precond.source is hypergrad_ogd",
                  "precond.hypergrad: {eta, retention, timing, init, clamp}, or precond.source: "
                  "ema_sq_squash");
    if (const Entry* x = find(m, "hypergrad")) readHypergrad(*x, s.precond.hypergrad);
  }
}

void Reader::readSolve(const Entry& e, Spec& s) {
  s.solve.loc = at(e.value);
  Entries m;
  YAML::Node kind;
  if (!readAxis(e, "solve", {"kind", "steps"}, m, kind, "solve: {kind: linear|delta, steps: n_h}")) return;
  if (!readEnum(kind, "solve.kind", kSolveKinds, s.solve.kind)) return;
  if (s.solve.kind == SolveKind::Linear) {
    notApplicable(m, "steps", "solve",
                  "solve.kind is linear (Householder steps are repeated delta-rule steps; a Hebbian write has none)",
                  "remove solve.steps, or set solve.kind: delta");
    return;
  }
  if (const Entry* x = find(m, "steps")) readInt(x->value, "solve.steps", s.solve.steps);
}

void Reader::readNormalize(const Entry& e, Spec& s) {
  Entries m;
  if (!readMap(e.value, "normalize", {"qk_l2norm", "eps"}, m)) return;
  if (const Entry* x = find(m, "qk_l2norm")) {
    if (!readBool(x->value, "normalize.qk_l2norm", s.qk_l2norm)) return;
  }
  if (!s.qk_l2norm) {
    notApplicable(m, "eps", "normalize", "normalize.qk_l2norm is false",
                  "remove normalize.eps, or set normalize.qk_l2norm: true");
    return;
  }
  if (const Entry* x = find(m, "eps")) readNumber(x->value, "normalize.eps", false, s.l2norm_eps);
}

void Reader::readScale(const Entry& e, Spec& s) {
  if (e.value.IsScalar() && e.value.Scalar() == "auto") {
    s.scale.reset();
    return;
  }
  if (e.value.IsScalar() && !isQuoted(e.value)) {
    double x = 0;
    if (readNumber(e.value, "scale", false, x)) s.scale = x;
    return;
  }
  typeError(e.value, "scale", "auto (K^-1/2) or a positive number");
}

void Reader::readHeads(const Entry& e, Spec& s) {
  Entries m;
  if (!readMap(e.value, "heads", {"qk", "gva_ratio"}, m)) return;
  if (const Entry* x = find(m, "qk")) {
    if (x->value.IsScalar() && x->value.Scalar() == "any")
      s.heads_qk = 0;
    else if (x->value.IsScalar() && !isQuoted(x->value) &&
             x->value.Scalar().find_first_not_of("+-0123456789") == std::string::npos)
      readInt(x->value, "heads.qk", s.heads_qk);
    else
      typeError(x->value, "heads.qk", "any or a positive integer");
  }
  if (const Entry* x = find(m, "gva_ratio")) readInt(x->value, "heads.gva_ratio", s.gva_ratio);
}

void Reader::readDims(const Entry& e, Spec& s) {
  Entries m;
  if (!readMap(e.value, "dims", {"key", "value"}, m)) return;
  if (const Entry* x = find(m, "key")) readIntList(x->value, "dims.key", s.key_dims);
  if (const Entry* x = find(m, "value")) readIntList(x->value, "dims.value", s.value_dims);
}

void Reader::readDtypes(const Entry& e, Spec& s) {
  Entries m;
  if (!readMap(e.value, "dtypes", {"inputs", "state"}, m)) return;
  if (const Entry* x = find(m, "inputs")) readEnumList(x->value, "dtypes.inputs", kDTypes, s.input_dtypes);
  if (const Entry* x = find(m, "state")) readEnum(x->value, "dtypes.state", kDTypes, s.state_dtype);
}

void Reader::readIo(const Entry* e, Spec& s) {
  // Context defaults: preconditioner states exist only with a preconditioner, varlen only for the
  // chunked forward (the decode ABI has no cu_seqlens).
  const bool precondKnown = failed_.count("precond") == 0 && !failed("precond.kind");
  const bool kernelsKnown = !failed("kernels");
  s.initial_precond_state = s.final_precond_state = hasPrecond(s);
  s.varlen = hasKernel(s, KernelKind::ChunkForward);
  if (!e) return;
  Entries m;
  if (!readMap(e->value, "io",
               {"initial_state", "final_state", "initial_precond_state", "final_precond_state",
                "varlen"},
               m))
    return;
  auto flag = [&](const char* key, bool& out, bool applies, const std::string& why,
                  const std::string& expected, bool contextKnown) {
    const Entry* x = find(m, key);
    if (!x) return;
    const std::string path = childPath("io", key);
    bool v = false;
    if (!readBool(x->value, path, v)) return;
    if (v && !applies && contextKnown) {
      error(at(x->value), path, "cannot be true: " + why, expected);
      return;
    }
    out = v;
  };
  flag("initial_state", s.initial_state, true, "", "", true);
  flag("final_state", s.final_state, true, "", "", true);
  flag("initial_precond_state", s.initial_precond_state, hasPrecond(s),
       "precond.kind is none, so there is no preconditioner state",
       "false, or precond.kind: diagonal", precondKnown);
  flag("final_precond_state", s.final_precond_state, hasPrecond(s),
       "precond.kind is none, so there is no preconditioner state",
       "false, or precond.kind: diagonal", precondKnown);
  flag("varlen", s.varlen, hasKernel(s, KernelKind::ChunkForward),
       "varlen (cu_seqlens) applies to the chunk_forward kernel, which is not in kernels",
       "false, or add chunk_forward to kernels", kernelsKnown);
}

void Reader::readTuning(const Entry& e, Spec& s) {
  Entries m;
  if (!readMap(e.value, "tuning", {"chunk", "block_v", "warps", "stages"}, m)) return;
  if (const Entry* x = find(m, "chunk")) readIntList(x->value, "tuning.chunk", s.tuning.chunk);
  if (const Entry* x = find(m, "block_v")) readIntList(x->value, "tuning.block_v", s.tuning.block_v);
  if (const Entry* x = find(m, "warps")) readIntList(x->value, "tuning.warps", s.tuning.warps);
  if (const Entry* x = find(m, "stages")) readIntList(x->value, "tuning.stages", s.tuning.stages);
}

const std::vector<std::string> kTopKeys = {
    "name",    "description", "decay",  "gain", "precond", "solve",   "normalize",     "scale",
    "heads",   "dims",        "dtypes", "io",   "kernels", "tuning", "allow_unstable"};

void Reader::readDocument(const YAML::Node& root, Spec& s) {
  s.loc = at(root);
  Entries m;
  if (!readMap(root, "", kTopKeys, m)) return;
  readName(m, root, s);
  // Sections are read in dependency order (kinds before the keys they govern), not file order.
  const std::string axes = "the four DGPS axes decay, gain, precond and solve are required";
  if (requireKey(m, "decay", root, "", "decay: {kind: none|scalar|diagonal}  (" + axes + ")"))
    readDecay(*find(m, "decay"), s);
  if (requireKey(m, "gain", root, "", "gain: {kind: none|scalar, range: [lo, hi]}  (" + axes + ")"))
    readGain(*find(m, "gain"), s);
  if (requireKey(m, "precond", root, "", "precond: none, or precond: {kind: diagonal, ...}  (" + axes + ")"))
    readPrecond(*find(m, "precond"), s);
  if (requireKey(m, "solve", root, "", "solve: {kind: linear|delta, steps: n_h}  (" + axes + ")"))
    readSolve(*find(m, "solve"), s);
  if (const Entry* x = find(m, "normalize")) readNormalize(*x, s);
  if (const Entry* x = find(m, "scale")) readScale(*x, s);
  if (const Entry* x = find(m, "heads")) readHeads(*x, s);
  if (const Entry* x = find(m, "dims")) readDims(*x, s);
  if (const Entry* x = find(m, "dtypes")) readDtypes(*x, s);
  if (const Entry* x = find(m, "kernels")) readEnumList(x->value, "kernels", kKernels, s.kernels);
  readIo(find(m, "io"), s);
  if (const Entry* x = find(m, "tuning")) readTuning(*x, s);
  if (const Entry* x = find(m, "allow_unstable")) readBool(x->value, "allow_unstable", s.allow_unstable);
}

/// Canonical list order, so that list order never changes equality or the hash.
void sortLists(Spec& s) {
  std::sort(s.key_dims.begin(), s.key_dims.end());
  std::sort(s.value_dims.begin(), s.value_dims.end());
  std::sort(s.input_dtypes.begin(), s.input_dtypes.end(),
            [](DType a, DType b) { return detail::dtypeRank(a) < detail::dtypeRank(b); });
  std::sort(s.kernels.begin(), s.kernels.end());
  std::sort(s.tuning.chunk.begin(), s.tuning.chunk.end());
  std::sort(s.tuning.block_v.begin(), s.tuning.block_v.end());
  std::sort(s.tuning.warps.begin(), s.tuning.warps.end());
  std::sort(s.tuning.stages.begin(), s.tuning.stages.end());
}

Diagnostic docError(const std::string& file, int line, int col, const std::string& msg,
                    const std::string& expected = "") {
  Diagnostic d;
  d.file = file;
  d.line = line;
  d.column = col;
  d.message = msg;
  d.expected = expected;
  return d;
}

/// Records, per YAML document, the position and kind of its root; parses nothing else.
class DocumentScanner : public YAML::EventHandler {
 public:
  struct Doc {
    YAML::Mark mark;
    bool null = true;
  };
  std::vector<Doc> docs;
  /// The first explicit YAML tag (`!!str 1e-6`, `!foo {}`): yaml-cpp reports "?" for a plain node and
  /// "!" for a quoted scalar; anything else was written by the user.
  struct Tag {
    YAML::Mark mark;
    std::string text;
  };
  std::optional<Tag> firstTag;

  void OnDocumentStart(const YAML::Mark&) override { depth_ = 0, rootSeen_ = false; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { root(m, true); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { root(m, false); }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t, const std::string&) override {
    root(m, false);
    tagged(m, tag);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    root(m, false);
    tagged(m, tag);
    ++depth_;
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    root(m, false);
    tagged(m, tag);
    ++depth_;
  }
  void OnMapEnd() override { --depth_; }

 private:
  void tagged(const YAML::Mark& m, const std::string& tag) {
    if (firstTag || tag.empty() || tag == "?" || tag == "!") return;
    // Show the tag as written: yaml-cpp expands the secondary handle "!!" to its prefix.
    const std::string prefix = "tag:yaml.org,2002:";
    firstTag = Tag{m, tag.rfind(prefix, 0) == 0 ? "!!" + tag.substr(prefix.size()) : tag};
  }
  void root(const YAML::Mark& m, bool null) {
    if (depth_ == 0 && !rootSeen_) docs.push_back(Doc{m, null}), rootSeen_ = true;
  }
  int depth_ = 0;
  bool rootSeen_ = false;
};

Diagnostic yamlError(const std::string& file, const YAML::Mark& m, const std::string& msg) {
  return docError(file, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0,
                  "invalid YAML: " + detail::printable(msg, 200), "a YAML mapping (docs/spec.md)");
}

/// Counts the documents in `text` without building them. yaml-cpp (0.7, 0.8) loops forever in
/// LoadAll when a document starts with a token no node can start with, e.g. a stray ',' (yaml-cpp
/// issue #1040, fixed upstream after 0.8 by PR #1319): such a token yields a null document without
/// being consumed, again and again. Reading at most three documents and spotting two null roots at
/// the same position turns that into one diagnostic. Returns false after reporting.
bool checkDocuments(const std::string& text, const std::string& file, std::vector<Diagnostic>& out) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentScanner scan;
  for (int i = 0; i < 3 && parser.HandleNextDocument(scan); ++i) {
    const auto& d = scan.docs;
    if (d.size() >= 2 && d[d.size() - 1].null && d[d.size() - 2].null &&
        d[d.size() - 1].mark.pos == d[d.size() - 2].mark.pos) {
      const YAML::Mark m = d.back().mark;
      const char c = m.pos >= 0 && static_cast<size_t>(m.pos) < text.size() ? text[m.pos] : '?';
      out.push_back(yamlError(file, m, "unexpected '" + detail::printable(std::string(1, c)) +
                                           "' where a value must start"));
      return false;
    }
  }
  if (scan.docs.empty() || (scan.docs.size() == 1 && scan.docs[0].null)) {
    out.push_back(docError(file, 1, 1, "empty spec",
                           "a YAML mapping with at least name, decay, gain, precond, solve"));
    return false;
  }
  if (scan.docs.size() > 1) {
    const YAML::Mark m = scan.docs[1].mark;
    out.push_back(docError(file, m.line >= 0 ? m.line + 1 : 1, m.column >= 0 ? m.column + 1 : 1,
                           "a spec file holds one YAML document; found a second one here",
                           "a single document (no second '---')"));
    return false;
  }
  if (scan.firstTag) {
    // A tag would change how a value reads (`!!str 1e-6` is a string where a number is expected, and
    // yaml-cpp would still hand us the text "1e-6"): refuse tags rather than give them a meaning.
    const YAML::Mark m = scan.firstTag->mark;
    out.push_back(docError(file, m.line >= 0 ? m.line + 1 : 1, m.column >= 0 ? m.column + 1 : 1,
                           "YAML tag '" + detail::printable(scan.firstTag->text) +
                               "' is not allowed in a spec",
                           "a plain value without a tag (e.g. 1e-6, not !!str 1e-6)"));
    return false;
  }
  return true;
}

ParseResult parseImpl(const std::string& text, const std::string& filename) {
  ParseResult r;
  YAML::Node root;
  try {
    if (!checkDocuments(text, filename, r.diagnostics)) return r;
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    r.diagnostics.push_back(yamlError(filename, e.mark, "nesting too deep for the YAML parser"));
    return r;
  } catch (const YAML::Exception& e) {
    r.diagnostics.push_back(yamlError(filename, e.mark, e.msg));
    return r;
  }
  Spec s;
  detail::LocMap locs;
  Reader reader(filename, r.diagnostics, locs);
  reader.readDocument(root, s);
  detail::validate(s, locs, reader.unread(), filename, r.diagnostics);
  std::stable_sort(r.diagnostics.begin(), r.diagnostics.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::make_pair(a.line, a.column) < std::make_pair(b.line, b.column);
                   });
  if (!hasErrors(r.diagnostics)) {
    sortLists(s);
    r.spec = std::move(s);
  }
  return r;
}

}  // namespace

ParseResult parseSpecString(const std::string& text, const std::string& filename) {
  try {
    return parseImpl(text, filename);
  } catch (const std::exception& e) {
    ParseResult r;
    r.diagnostics.push_back(docError(filename, 0, 0, std::string("internal error while parsing: ") + e.what()));
    return r;
  } catch (...) {
    ParseResult r;
    r.diagnostics.push_back(docError(filename, 0, 0, "internal error while parsing"));
    return r;
  }
}

ParseResult parseSpecFile(const std::string& path) {
  // Bounded: a FIFO, a device or a huge file is refused before anything is read (FileRead.h).
  FileReadResult file = readRegularFile(path, file_limits::kSpec, "a spec file");
  if (!file.ok) {
    ParseResult r;
    // "cannot open: ENOENT" -> "cannot open spec file: ENOENT"; "is a FIFO, ..." -> "the spec file is a FIFO, ..."
    const size_t colon = file.error.find(':');
    const std::string msg = file.error.rfind("cannot ", 0) == 0 && colon != std::string::npos
                                ? file.error.substr(0, colon) + " spec file" + file.error.substr(colon)
                                : "the spec file " + file.error;
    r.diagnostics.push_back(docError(path, 0, 0, msg,
                                     "a readable YAML file of at most " + std::to_string(file_limits::kSpec) +
                                         " bytes"));
    return r;
  }
  return parseSpecString(file.data, path);
}

bool loadSpecForCommand(const std::string& path, Spec& spec, std::ostream& err) {
  ParseResult r = parseSpecFile(path);
  for (const Diagnostic& d : r.diagnostics) err << formatDiagnostic(d) << "\n";
  if (!r.ok()) return false;
  spec = *r.spec;
  return true;
}

std::vector<Diagnostic> validateSpec(const Spec& spec) {
  std::vector<Diagnostic> out;
  try {
    detail::validate(spec, detail::LocMap{}, {}, spec.loc.file, out);
  } catch (const std::exception& e) {
    out.push_back(docError(spec.loc.file, 0, 0, std::string("internal error while validating: ") + e.what()));
  }
  return out;
}

}  // namespace dgps
