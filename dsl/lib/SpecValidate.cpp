// Value and combination rules of the spec language (docs/spec.md "Validation").
//
// Phase 1 checks each field on its own (ranges, list contents). Phase 2 checks combinations, and
// runs only when phase 1 and the YAML reader found nothing, so one mistake gives one message.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "SpecInternal.h"
#include "dgps/device/launch_rules.h"
#include "dgps/dsl/Canonical.h"

namespace dgps {
namespace detail {

// chunk, warps and stages: exactly the values the device library compiles for (launch_rules.h).
template <int N>
static std::vector<int> choices(const int (&c)[N]) {
  return std::vector<int>(c, c + N);
}
const std::vector<int>& allowedChunks() {
  static const std::vector<int> v = choices(launch::kChunkChoices);
  return v;
}
const std::vector<int>& allowedBlockV() {
  static const std::vector<int> v = {16, 32, 64, 128};
  return v;
}
const std::vector<int>& allowedWarps() {
  static const std::vector<int> v = choices(launch::kWarpChoices);
  return v;
}
const std::vector<int>& allowedStages() {
  static const std::vector<int> v = choices(launch::kStageChoices);
  return v;
}

int dtypeRank(DType d) {
  switch (d) {
    case DType::BF16: return 0;
    case DType::F16: return 1;
    case DType::F32: return 2;
  }
  return 3;
}

std::string printable(const std::string& text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max) return out + "...";
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

int editDistance(const std::string& a, const std::string& b) {
  // Optimal string alignment distance: Levenshtein plus transposition of adjacent characters.
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int bestDist = 1 << 30;
  for (const std::string& c : candidates) {
    // The distance is at least the length difference; skipping hopeless candidates keeps a long
    // unknown word (a 1 MiB key) from costing a word-length-by-candidate table.
    const size_t longer = std::max(word.size(), c.size()), shorter = std::min(word.size(), c.size());
    if (longer - shorter > std::max<size_t>(1, longer / 3)) continue;
    const int dist = editDistance(word, c);
    if (dist < bestDist) bestDist = dist, best = c;
  }
  // A plausible typo: at most a third of the longer word, and at least one edit allowed.
  const int limit = std::max<int>(1, static_cast<int>(std::max(word.size(), best.size())) / 3);
  return bestDist <= limit ? best : std::string();
}

namespace {

std::string num(double x) { return formatNumber(x); }

std::string listOf(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int x : v) s.push_back(std::to_string(x));
  return "{" + join(s, ", ") + "}";
}

class Validator {
 public:
  Validator(const Spec& s, const LocMap& locs, const std::set<std::string>& unread, std::string file,
            std::vector<Diagnostic>& out)
      : s_(s), locs_(locs), unread_(unread), file_(std::move(file)), out_(out) {}

  void run() {
    const bool clean = !hasErrors(out_);
    checkFields();
    if (clean && !hasErrors(out_)) checkCombinations();
  }

 private:
  /// Position of a key path: where it was written, else its nearest written ancestor, else the
  /// axis' own loc, else the spec's loc.
  SourceLoc where(std::string path, bool atKey) const {
    for (;;) {
      auto it = locs_.find(path);
      if (it != locs_.end()) return atKey ? it->second.key : it->second.value;
      const size_t cut = path.find_last_of(".[");
      if (cut == std::string::npos) break;
      path = path.substr(0, cut);
      atKey = true;
    }
    const SourceLoc* axis = nullptr;
    if (path == "decay") axis = &s_.decay.loc;
    if (path == "gain") axis = &s_.gain.loc;
    if (path == "precond") axis = &s_.precond.loc;
    if (path == "solve") axis = &s_.solve.loc;
    if (axis && axis->line > 0) return *axis;
    if (s_.loc.line > 0) return s_.loc;
    SourceLoc l;
    l.file = file_;
    return l;
  }

  bool written(const std::string& path) const { return locs_.count(path) != 0; }

  /// True if the reader reported `path`, one of its ancestors or one of its descendants.
  bool unread(const std::string& path) const {
    if (unread_.count("")) return true;
    for (const std::string& u : unread_) {
      const std::string& shorter = u.size() < path.size() ? u : path;
      const std::string& longer = u.size() < path.size() ? path : u;
      if (longer.compare(0, shorter.size(), shorter) == 0 &&
          (longer.size() == shorter.size() || longer[shorter.size()] == '.' ||
           longer[shorter.size()] == '['))
        return true;
    }
    return false;
  }

  void report(Severity sev, const std::string& path, const std::string& msg,
              const std::string& expected, bool atKey = false) {
    if (unread(path)) return;
    const SourceLoc l = where(path, atKey);
    Diagnostic d;
    d.severity = sev;
    d.file = l.file.empty() ? file_ : l.file;
    d.line = l.line;
    d.column = l.column;
    d.path = path;
    d.message = msg;
    d.expected = expected;
    out_.push_back(d);
  }
  void error(const std::string& path, const std::string& msg, const std::string& expected) {
    report(Severity::Error, path, msg, expected);
  }

  // ---- phase 1: each field on its own ----

  void checkFields() {
    checkName();
    if (hasGainInput(s_)) checkGainRange();
    if (usesSquash(s_)) checkSquash();
    if (usesHypergrad(s_)) checkHypergrad();
    if (s_.qk_l2norm && !(std::isfinite(s_.l2norm_eps) && s_.l2norm_eps > 0))
      error("normalize.eps", "must be > 0, got " + num(s_.l2norm_eps),
            "a positive number (default 1e-6: x * rsqrt(sum(x^2) + eps), docs/math.md §1)");
    if (s_.scale && !(std::isfinite(*s_.scale) && *s_.scale > 0))
      error("scale", "must be > 0, got " + num(*s_.scale), "auto (K^-1/2) or a positive number");
    if (s_.heads_qk < 0 || s_.heads_qk > kMaxHeadsQk)
      error("heads.qk", "must be any (0) or 1.." + std::to_string(kMaxHeadsQk) + ", got " +
                            std::to_string(s_.heads_qk),
            "any, or a positive integer H");
    if (s_.gva_ratio < 1 || s_.gva_ratio > kMaxGvaRatio)
      error("heads.gva_ratio",
            "must be in 1.." + std::to_string(kMaxGvaRatio) + ", got " + std::to_string(s_.gva_ratio),
            "an integer HV/H >= 1 (1 = no GVA)");
    if (s_.solve.steps < 1 || s_.solve.steps > kMaxHouseholderSteps)
      error("solve.steps",
            "must be in 1.." + std::to_string(kMaxHouseholderSteps) + ", got " + std::to_string(s_.solve.steps),
            "the number of Householder steps per token n_h (1 = the delta rule, 2 or 3 = Gated DeltaProduct)");
    checkDims("dims.key", s_.key_dims, "K");
    checkDims("dims.value", s_.value_dims, "V");
    checkDtypes();
    checkKernels();
    checkTuning("tuning.chunk", s_.tuning.chunk, allowedChunks(),
                "chunk sizes the WY triangular solve supports (docs/math.md §7.6)");
    checkTuning("tuning.block_v", s_.tuning.block_v, allowedBlockV(), "value-dim tile widths");
    checkTuning("tuning.warps", s_.tuning.warps, allowedWarps(), "warps per CTA");
    checkTuning("tuning.stages", s_.tuning.stages, allowedStages(), "pipeline stages");
  }

  /// [a-z][a-z0-9_]*, checked by hand: std::regex recurses per character and overflows the stack on
  /// long names. The length is checked first, so a long name costs one comparison.
  static bool isIdentifier(const std::string& s) {
    if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
    for (char c : s)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
  }

  void checkName() {
    if (s_.name.empty())
      error("name", "must not be empty", "an identifier [a-z][a-z0-9_]*");
    else if (s_.name.size() > kMaxNameLength)
      error("name",
            "is " + std::to_string(s_.name.size()) + " characters long ('" + printable(s_.name, 20) + "')",
            "an identifier [a-z][a-z0-9_]* of at most " + std::to_string(kMaxNameLength) + " characters");
    else if (!isIdentifier(s_.name))
      error("name", "'" + printable(s_.name) + "' is not an identifier (it names kernels and files)",
            "an identifier [a-z][a-z0-9_]* (lower case)");
  }

  void checkGainRange() {
    const std::string exp = "[lo, hi] with 0 <= lo < hi, hi may be inf; e.g. [0, 1], [0, 2], [0, inf]";
    if (!std::isfinite(s_.gain.lo) || s_.gain.lo < 0)
      error("gain.range[0]", "lower bound must be >= 0 and finite, got " + num(s_.gain.lo), exp);
    else if (!(s_.gain.hi > s_.gain.lo))
      error("gain.range[1]",
            "upper bound must be > the lower bound " + num(s_.gain.lo) + ", got " + num(s_.gain.hi),
            exp);
  }

  void checkSquash() {
    const SquashParams& p = s_.precond.squash;
    if (!(std::isfinite(p.x) && p.x > 1))
      error("precond.squash.x", "must be > 1, got " + num(p.x) + " (M lies in (1/x, x))",
            "a number > 1 (default 1.5)");
    if (!(std::isfinite(p.eps) && p.eps > 0))
      error("precond.squash.eps", "must be > 0, got " + num(p.eps) + " (it guards ln(A + eps) at A = 0)",
            "a positive number (default 1e-6)");
    if (!std::isfinite(p.center_init))
      error("precond.squash.center_init", "must be finite, got " + num(p.center_init),
            "a finite number (default -0.2)");
  }

  void checkHypergrad() {
    const HypergradParams& p = s_.precond.hypergrad;
    if (!(std::isfinite(p.eta) && p.eta >= 0))
      error("precond.hypergrad.eta", "must be >= 0, got " + num(p.eta), "an OGD step size >= 0 (default 1)");
    if (!(std::isfinite(p.init) && p.init > 0))
      error("precond.hypergrad.init", "must be > 0, got " + num(p.init),
            "a positive initial d_0 (default 1: the unpreconditioned delta rule)");
    const std::string exp = "none, or [lo, hi] with 0 <= lo <= hi (-inf / inf for no bound)";
    if (p.clamp_min && !(std::isfinite(*p.clamp_min) && *p.clamp_min >= 0)) {
      error("precond.hypergrad.clamp[0]",
            "lower bound must be >= 0, got " + num(*p.clamp_min) +
                " (a negative d reverses the write on its channel)",
            exp);
      return;
    }
    if (p.clamp_max && !(std::isfinite(*p.clamp_max) && *p.clamp_max > 0)) {
      error("precond.hypergrad.clamp[1]", "upper bound must be > 0, got " + num(*p.clamp_max), exp);
      return;
    }
    if (p.clamp_min && p.clamp_max && *p.clamp_min > *p.clamp_max) {
      error("precond.hypergrad.clamp",
            "lower bound " + num(*p.clamp_min) + " is above upper bound " + num(*p.clamp_max), exp);
      return;
    }
    if (std::isfinite(p.init) && p.init > 0 &&
        ((p.clamp_min && p.init < *p.clamp_min) || (p.clamp_max && p.init > *p.clamp_max)))
      error("precond.hypergrad.init",
            "initial d " + num(p.init) + " lies outside the clamp range [" +
                (p.clamp_min ? num(*p.clamp_min) : "-inf") + ", " +
                (p.clamp_max ? num(*p.clamp_max) : "inf") + "]",
            "init inside precond.hypergrad.clamp");
  }

  template <class T, class Name>
  bool checkUnique(const std::string& path, const std::vector<T>& v, Name name) {
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (v[i] == v[j]) {
          error(path + "[" + std::to_string(i) + "]",
                "duplicate value " + name(v[i]) + " (already at " + path + "[" + std::to_string(j) + "])",
                "each value once");
          return false;
        }
    return true;
  }

  bool checkNonEmpty(const std::string& path, size_t n, const std::string& expected) {
    if (n) return true;
    error(path, "must not be empty", expected);
    return false;
  }

  void checkDims(const std::string& path, const std::vector<int>& dims, const char* sym) {
    const std::string exp = std::string("head dims ") + sym + " in " + std::to_string(kMinHeadDim) +
                            ".." + std::to_string(kMaxHeadDim);
    if (!checkNonEmpty(path, dims.size(), "a list of " + exp)) return;
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] < kMinHeadDim || dims[i] > kMaxHeadDim) {
        error(path + "[" + std::to_string(i) + "]",
              std::string(sym) + " = " + std::to_string(dims[i]) + " is outside " +
                  std::to_string(kMinHeadDim) + ".." + std::to_string(kMaxHeadDim) +
                  " (the state tile is K x V)",
              exp);
        return;
      }
    checkUnique(path, dims, [](int x) { return std::to_string(x); });
  }

  void checkDtypes() {
    const std::string exp = "a list of bf16, f16";
    if (checkNonEmpty("dtypes.inputs", s_.input_dtypes.size(), exp)) {
      bool ok = true;
      for (size_t i = 0; i < s_.input_dtypes.size() && ok; ++i)
        if (s_.input_dtypes[i] == DType::F32) {
          error("dtypes.inputs[" + std::to_string(i) + "]",
                "f32 inputs are not supported: the kernels take q, k, v and o in bf16 or f16", exp);
          ok = false;
        }
      if (ok) checkUnique("dtypes.inputs", s_.input_dtypes, [](DType d) { return std::string(toString(d)); });
    }
    if (s_.state_dtype != DType::F32)
      error("dtypes.state",
            std::string("the recurrent state must be f32, got ") + toString(s_.state_dtype) +
                " (narrow states overflow or lose the update; docs/math.md §7.5)",
            "f32");
  }

  void checkKernels() {
    if (checkNonEmpty("kernels", s_.kernels.size(), "a list of chunk_forward, decode"))
      checkUnique("kernels", s_.kernels, [](KernelKind k) { return std::string(toString(k)); });
  }

  void checkTuning(const std::string& path, const std::vector<int>& v, const std::vector<int>& allowed,
                   const char* what) {
    const std::string exp = std::string("a list from ") + listOf(allowed) + " (" + what + ")";
    if (!checkNonEmpty(path, v.size(), exp)) return;
    for (size_t i = 0; i < v.size(); ++i)
      if (std::find(allowed.begin(), allowed.end(), v[i]) == allowed.end()) {
        error(path + "[" + std::to_string(i) + "]",
              std::to_string(v[i]) + " is not one of " + listOf(allowed), exp);
        return;
      }
    checkUnique(path, v, [](int x) { return std::to_string(x); });
  }

  // ---- phase 2: combinations ----

  /// Largest gain the caller may pass (1 when the gain is the constant 1).
  double maxGain() const { return hasGainInput(s_) ? s_.gain.hi : 1.0; }

  void checkCombinations() {
    const Severity unstable = s_.allow_unstable ? Severity::Warning : Severity::Error;
    const std::string allowNote = s_.allow_unstable ? " (accepted: allow_unstable is true)" : "";
    if (usesHypergrad(s_) && s_.solve.kind != SolveKind::Delta) {
      error("precond.source",
            "hypergrad_ogd needs solve.kind: delta: its hypergradient surrogate is the loss change of "
            "a delta-rule step (docs/math.md §5.2); solve.kind is linear",
            "solve.kind: delta, or precond.source: ema_sq_squash");
      return;
    }
    if (usesHypergrad(s_) && s_.precond.side == PrecondSide::Query) {
      error("precond.side",
            "side query is not supported with source hypergrad_ogd: OSDN scales the write-side key "
            "(right preconditioning, docs/math.md §3.5), it has no query-side form",
            "precond.side: key, or precond.source: ema_sq_squash");
      return;
    }
    if (usesHypergrad(s_) && s_.gva_ratio != 1) {
      error(written("heads.gva_ratio") ? "heads.gva_ratio" : "precond.source",
            "hypergrad_ogd needs heads.gva_ratio 1: its d update uses the write gain beta "
            "[B,T,HV], but d is kept per key head [N,H,K] (docs/math.md §5.2); got gva_ratio " +
                std::to_string(s_.gva_ratio),
            "heads.gva_ratio: 1, or precond.source: ema_sq_squash (its gain precond_beta is per key "
            "head)");
      return;
    }
    if (s_.solve.steps != 1 && s_.solve.kind != SolveKind::Delta) {
      error("solve.steps",
            "Householder steps are repeated delta-rule steps (docs/math.md §3.7); solve.kind is linear",
            "solve.steps: 1, or solve.kind: delta");
      return;
    }
    if (s_.solve.steps > 1 && hasPrecond(s_)) {
      error("solve.steps",
            "solve.steps " + std::to_string(s_.solve.steps) +
                " with a diagonal preconditioner: the preconditioner state advances once per token, and "
                "which of the token's n_h keys would feed it is not defined (docs/math.md §3.7)",
            "solve.steps: 1, or precond.kind: none");
      return;
    }
    if (s_.solve.kind == SolveKind::Delta) checkWriteEigenvalue(unstable, allowNote);
    if (usesHypergrad(s_)) checkDScan(unstable, allowNote);
  }

  /// Delta rule with unit keys: the transition (I − β k^w k^rᵀ) D has the write eigenvalue
  /// 1 − β Σ_i M_i k̂_i² >= 1 − β_max M_max (docs/math.md §3.4). Stability needs β_max M_max <= 2.
  void checkWriteEigenvalue(Severity unstable, const std::string& allowNote) {
    const double b = maxGain();
    if (!s_.qk_l2norm) {
      if (b > 1)
        report(unstable, written("gain.range") ? "gain.range[1]" : "gain",
               "a gain above 1 needs unit-norm keys: with normalize.qk_l2norm false the write "
               "eigenvalue 1 - beta*|k|^2 has no lower bound (docs/math.md §7.2)" + allowNote,
               "normalize.qk_l2norm: true, or gain.range [0, 1]");
      else
        report(Severity::Warning, "normalize.qk_l2norm",
               "keys are not L2-normalised in the kernel: the delta rule is stable only if the caller "
               "passes keys with beta*|k|^2 <= 2 (docs/math.md §7.2)",
               "normalize.qk_l2norm: true, or keys normalised before the call", true);
      if (b > 1) return;
    }
    double m = 1.0;
    std::string mName = "M = 1 (no key-side preconditioner)";
    std::string mPath;
    if (usesSquash(s_) && s_.precond.side == PrecondSide::Key) {
      m = s_.precond.squash.x;
      mName = "M < x = " + num(m);
      mPath = "precond.squash.x";
    } else if (usesHypergrad(s_)) {
      if (!s_.precond.hypergrad.clamp_max) return;  // driven toward λ = 0 (§5.2), no a-priori bound
      m = *s_.precond.hypergrad.clamp_max;
      mName = "d <= clamp max " + num(m);
      mPath = "precond.hypergrad.clamp[1]";
    }
    const double lambda = 1.0 - b * m;
    if (!(lambda < -1.0)) return;
    std::string path;
    if (b > 1 && written("gain.range"))
      path = "gain.range[1]";
    else if (!mPath.empty() && written(mPath))
      path = mPath;
    else if (!mPath.empty())
      path = mPath.substr(0, mPath.find_last_of(".["));
    else
      path = written("gain.range") ? "gain.range[1]" : "gain";
    report(unstable, path,
           "unstable write: the eigenvalue 1 - beta*sum_i(M_i*k_i^2) of the delta-rule transition "
           "reaches 1 - " + num(b) + "*" + num(m) + " = " + num(lambda) + " < -1 with beta < " + num(b) +
               " and " + mName + ", so the state can grow without bound (docs/math.md §3.4, "
               "§7.2)" + allowNote,
           "gain upper bound * preconditioner bound <= 2 (e.g. gain.range [0, 1] with x <= 2), or "
           "allow_unstable: true");
  }

  /// OSDN's d-scan d ← (r I − c u uᵀ) d + b is stable iff η β² ‖u‖²/‖k‖² <= 1 + r (docs/math.md §5.2);
  /// with unit keys ‖u‖² <= 1, and r ∈ (0, 1] with retention, r = 1 without.
  void checkDScan(Severity unstable, const std::string& allowNote) {
    const HypergradParams& p = s_.precond.hypergrad;
    const double b = maxGain();
    const double limit = p.has_retention ? 1.0 : 2.0;
    if (!(p.eta * b * b > limit)) return;
    report(unstable, written("precond.hypergrad.eta") ? "precond.hypergrad.eta" : "precond.hypergrad",
           "the OSDN preconditioner scan is stable only if eta*beta^2 <= " + num(limit) +
               (p.has_retention ? " (1 + r with retention r -> 0)" : " (1 + r with r = 1)") +
               "; eta = " + num(p.eta) + " with beta < " + num(b) + " gives " + num(p.eta * b * b) +
               " (docs/math.md §5.2)" + allowNote,
           "eta <= " + num(limit / (b * b)) + ", or allow_unstable: true");
  }

  const Spec& s_;
  const LocMap& locs_;
  const std::set<std::string>& unread_;
  std::string file_;
  std::vector<Diagnostic>& out_;
};

}  // namespace

void validate(const Spec& spec, const LocMap& locs, const std::set<std::string>& unread,
              const std::string& file, std::vector<Diagnostic>& out) {
  Validator(spec, locs, unread, file, out).run();
}

}  // namespace detail
}  // namespace dgps
