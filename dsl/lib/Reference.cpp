// The float64 reference recurrence (Reference.h documents the semantics; docs/math.md §1, §3, §5.2).
#include "dgps/dsl/Reference.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace dgps {
namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

bool usesDiagonalPrecond(const Spec& s) { return s.precond.kind == PrecondKind::Diagonal; }
bool isSquash(const Spec& s) {
  return usesDiagonalPrecond(s) && s.precond.source == PrecondSource::EmaSqSquash;
}
bool isHypergrad(const Spec& s) {
  return usesDiagonalPrecond(s) && s.precond.source == PrecondSource::HypergradOgd;
}
bool takesPrecondG(const Spec& s) {
  return (isSquash(s) && s.precond.squash.has_gate) || (isHypergrad(s) && s.precond.hypergrad.has_retention);
}
bool takesPrecondBeta(const Spec& s) { return isSquash(s) && s.precond.squash.has_gain; }

std::string specLabel(const Spec& s) { return "spec '" + s.name + "'"; }

std::string acceptedDTypes(const Spec& spec, SlotType type) {
  switch (type) {
    case SlotType::Index: return "i64";
    case SlotType::Float: return "f32 or f64";
    case SlotType::Activation: {
      std::set<std::string> names = {"f32", "f64"};
      for (DType d : spec.input_dtypes) names.insert(toString(toScalarType(d)));
      std::string out;
      for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
      return "one of " + out;
    }
  }
  return "?";
}

bool acceptsDType(const Spec& spec, SlotType type, ScalarType t) {
  switch (type) {
    case SlotType::Index: return t == ScalarType::I64;
    case SlotType::Float: return t == ScalarType::F32 || t == ScalarType::F64;
    case SlotType::Activation: {
      if (t == ScalarType::F32 || t == ScalarType::F64) return true;
      for (DType d : spec.input_dtypes) {
        if (toScalarType(d) == t) return true;
      }
      return false;
    }
  }
  return false;
}

[[noreturn]] void failInput(const std::string& name, const std::string& msg) {
  throw DataError("reference input '" + name + "': " + msg);
}

// ---- value contracts ----------------------------------------------------------------------------

std::string flatIndexString(const Tensor& t, std::int64_t flat) {
  std::vector<std::int64_t> idx(t.rank());
  for (std::size_t d = t.rank(); d-- > 0;) {
    const std::int64_t extent = t.dim(d);
    idx[d] = extent ? flat % extent : 0;
    flat = extent ? flat / extent : 0;
  }
  return shapeToString(idx);
}

/// The first element of `t` that breaks `rule`, as a message ("" when all keep it).
template <typename Pred>
std::string firstViolation(const Tensor& t, const std::string& rule, Pred ok) {
  const std::vector<double> values = t.toDoubles();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!ok(values[i])) {
      return "expected " + rule + ", got " + fmt(values[i]) + " at index " +
             flatIndexString(t, static_cast<std::int64_t>(i));
    }
  }
  return "";
}

/// The value contract of input `name` (Reference.h); "" when `t` keeps it.
std::string valueError(const Spec& spec, const std::string& name, const Tensor& t) {
  auto finite = [](double x) { return std::isfinite(x); };
  if (name == "g" || name == "precond_g") {
    return firstViolation(t, "finite log-decay values <= 0 (gates are natural-log decays; a positive one makes the decay grow; docs/math.md §7.1)",
                          [](double x) { return std::isfinite(x) && x <= 0.0; });
  }
  if (name == "beta") {
    const double lo = spec.gain.lo, hi = spec.gain.hi;
    return firstViolation(t, "finite gain values in [" + fmt(lo) + ", " + fmt(hi) + "] (spec gain range)",
                          [lo, hi](double x) { return std::isfinite(x) && x >= lo && x <= hi; });
  }
  if (name == "precond_beta") {
    return firstViolation(t, "finite accumulator gains >= 0", [](double x) { return std::isfinite(x) && x >= 0.0; });
  }
  if (name == "initial_precond_state" && isSquash(spec)) {
    return firstViolation(t, "a finite accumulator A_0 >= 0 (a decayed sum of squares)",
                          [](double x) { return std::isfinite(x) && x >= 0.0; });
  }
  if (name != "cu_seqlens") return firstViolation(t, "finite values", finite);
  return "";
}

std::string shapeText(const ReferenceProblem& s) {
  std::string out = "B=" + std::to_string(s.batch) + " T=" + std::to_string(s.seq_len) + " H=" +
                    std::to_string(s.heads_qk) + " HV=" + std::to_string(s.heads_v) + " K=" +
                    std::to_string(s.key_dim) + " V=" + std::to_string(s.value_dim);
  if (!s.cu_seqlens.empty()) out += " N=" + std::to_string(s.numSeqs());
  return out;
}

}  // namespace

// ---- spec and shape checks ----------------------------------------------------------------------

void checkReferenceSpec(const Spec& spec) {
  const std::string who = specLabel(spec);
  if (spec.gva_ratio < 1) throw DataError(who + ": gva_ratio must be >= 1, got " + std::to_string(spec.gva_ratio));
  if (spec.heads_qk < 0) throw DataError(who + ": heads_qk must be >= 0, got " + std::to_string(spec.heads_qk));
  if (!(spec.l2norm_eps >= 0.0) || !std::isfinite(spec.l2norm_eps)) {
    throw DataError(who + ": l2norm_eps must be finite and >= 0, got " + fmt(spec.l2norm_eps));
  }
  if (spec.scale && !std::isfinite(*spec.scale)) throw DataError(who + ": scale must be finite");
  if (!(spec.gain.lo <= spec.gain.hi)) {
    throw DataError(who + ": gain range (" + fmt(spec.gain.lo) + ", " + fmt(spec.gain.hi) + ") is empty");
  }
  if (isSquash(spec)) {
    const SquashParams& p = spec.precond.squash;
    if (!(p.x > 0.0) || !std::isfinite(p.x)) throw DataError(who + ": squash x must be finite and > 0, got " + fmt(p.x));
    if (!(p.eps > 0.0) || !std::isfinite(p.eps)) {
      throw DataError(who + ": squash eps must be finite and > 0 (it guards ln(A + eps) at A = 0), got " + fmt(p.eps));
    }
    if (!std::isfinite(p.center_init)) throw DataError(who + ": squash center_init must be finite");
  }
  if (isHypergrad(spec)) {
    const HypergradParams& p = spec.precond.hypergrad;
    if (!std::isfinite(p.eta)) throw DataError(who + ": hypergrad eta must be finite");
    if (!std::isfinite(p.init)) throw DataError(who + ": hypergrad init must be finite");
    if (p.clamp_min && p.clamp_max && *p.clamp_min > *p.clamp_max) {
      throw DataError(who + ": hypergrad clamp_min " + fmt(*p.clamp_min) + " > clamp_max " + fmt(*p.clamp_max));
    }
    if (spec.gva_ratio != 1) {
      throw DataError(who + ": the hypergrad_ogd preconditioner needs gva_ratio 1 (its state d is per key head "
                            "and its step uses that head's gain beta), got gva_ratio " +
                      std::to_string(spec.gva_ratio));
    }
  }
  const int steps = householderSteps(spec);
  if (steps < 1 || steps > kMaxHouseholderSteps) {
    throw DataError(who + ": solve.steps must be in 1.." + std::to_string(kMaxHouseholderSteps) + ", got " +
                    std::to_string(steps));
  }
  if (steps > 1 && (spec.solve.kind != SolveKind::Delta || usesDiagonalPrecond(spec))) {
    throw DataError(who + ": solve.steps " + std::to_string(steps) +
                    " needs solve.kind delta and no preconditioner (docs/math.md §3.7)");
  }
}

void checkProblemShape(const Spec& spec, const ReferenceProblem& s) {
  const std::string who = specLabel(spec);
  auto need = [&](bool ok, const std::string& msg) {
    if (!ok) throw DataError("problem shape " + shapeText(s) + ": " + msg);
  };
  need(s.batch >= 1, "B must be >= 1, got " + std::to_string(s.batch));
  need(s.seq_len >= 0, "T must be >= 0, got " + std::to_string(s.seq_len));
  need(s.heads_qk >= 1, "H (heads_qk) must be >= 1, got " + std::to_string(s.heads_qk));
  need(s.key_dim >= 1 && s.value_dim >= 1,
       "K and V must be >= 1, got K=" + std::to_string(s.key_dim) + " V=" + std::to_string(s.value_dim));
  need(spec.heads_qk == 0 || s.heads_qk == spec.heads_qk,
       who + " fixes heads_qk = " + std::to_string(spec.heads_qk) + ", got H = " + std::to_string(s.heads_qk));
  need(s.heads_v % s.heads_qk == 0, "HV = " + std::to_string(s.heads_v) + " is not a multiple of H = " +
                                        std::to_string(s.heads_qk) + " (grouped value heads need HV % H == 0)");
  need(s.heads_v == s.heads_qk * spec.gva_ratio,
       who + " has gva_ratio " + std::to_string(spec.gva_ratio) + " so HV must be " +
           std::to_string(s.heads_qk * spec.gva_ratio) + " for H = " + std::to_string(s.heads_qk) + ", got HV = " +
           std::to_string(s.heads_v));
  auto listed = [](const std::vector<int>& dims, std::int64_t d) {
    return dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end();
  };
  auto dimsString = [](const std::vector<int>& dims) {
    std::vector<std::int64_t> v(dims.begin(), dims.end());
    return shapeToString(v);
  };
  need(listed(spec.key_dims, s.key_dim),
       who + " supports K in " + dimsString(spec.key_dims) + ", got K = " + std::to_string(s.key_dim));
  need(listed(spec.value_dims, s.value_dim),
       who + " supports V in " + dimsString(spec.value_dims) + ", got V = " + std::to_string(s.value_dim));
  if (!s.cu_seqlens.empty()) {
    need(spec.varlen, who + " has varlen: false but cu_seqlens was given");
    need(s.batch == 1, "cu_seqlens requires B == 1 (sequences packed along T), got B = " + std::to_string(s.batch));
    need(s.cu_seqlens.size() >= 2, "cu_seqlens needs at least 2 entries [0, T]");
    need(s.cu_seqlens.front() == 0, "cu_seqlens must start at 0, got " + std::to_string(s.cu_seqlens.front()));
    for (std::size_t i = 1; i < s.cu_seqlens.size(); ++i) {
      need(s.cu_seqlens[i] >= s.cu_seqlens[i - 1],
           "cu_seqlens must be non-decreasing, but cu_seqlens[" + std::to_string(i) + "] = " +
               std::to_string(s.cu_seqlens[i]) + " < cu_seqlens[" + std::to_string(i - 1) + "] = " +
               std::to_string(s.cu_seqlens[i - 1]));
    }
    // cu[N] < T is a padded token buffer: rows t >= cu[N] belong to no sequence and their output is 0.
    need(s.cu_seqlens.back() <= s.seq_len, "cu_seqlens must end at most at T = " + std::to_string(s.seq_len) +
                                               ", got " + std::to_string(s.cu_seqlens.back()));
  }
}

// ---- slots ----------------------------------------------------------------------------------------

std::vector<TensorSlot> referenceInputSlots(const Spec& spec, const ReferenceProblem& s) {
  checkReferenceSpec(spec);
  const std::int64_t B = s.batch, T = s.seq_len, H = s.heads_qk, HV = s.heads_v, K = s.key_dim, V = s.value_dim;
  const std::int64_t N = s.numSeqs();
  // Keys, values and gains carry one row per Householder step: T·n_h rows, token-major.
  const std::int64_t n = householderSteps(spec), TS = T * n;
  const std::string ts = n == 1 ? "T" : "T*" + std::to_string(n);
  const std::string stepNote = n == 1 ? "" : " (" + std::to_string(n) + " Householder steps per token, row t*" +
                                                 std::to_string(n) + "+j is step j of token t)";
  std::vector<TensorSlot> out;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, std::string layout, bool required,
                 SlotType type, std::string meaning) {
    out.push_back(TensorSlot{std::move(name), std::move(shape), std::move(layout), required, type, std::move(meaning)});
  };
  add("q", {B, T, H, K}, "[B,T,H,K]", true, SlotType::Activation, "queries");
  add("k", {B, TS, H, K}, "[B," + ts + ",H,K]", true, SlotType::Activation, "keys" + stepNote);
  add("v", {B, TS, HV, V}, "[B," + ts + ",HV,V]", true, SlotType::Activation, "values" + stepNote);
  if (spec.decay.kind == DecayKind::Scalar) {
    add("g", {B, T, HV}, "[B,T,HV]", true, SlotType::Float, "log-decay of the scalar decay");
  } else if (spec.decay.kind == DecayKind::Diagonal) {
    add("g", {B, T, HV, K}, "[B,T,HV,K]", true, SlotType::Float, "log-decay of the diagonal decay");
  }
  if (spec.gain.kind == GainKind::Scalar) {
    add("beta", {B, TS, HV}, "[B," + ts + ",HV]", true, SlotType::Float, "scalar gain" + stepNote);
  }
  if (takesPrecondG(spec)) {
    add("precond_g", {B, T, H}, "[B,T,H]", true, SlotType::Float,
        isSquash(spec) ? "log-decay of the squash accumulator (has_gate)" : "log retention of d (has_retention)");
  }
  if (takesPrecondBeta(spec)) {
    add("precond_beta", {B, T, H}, "[B,T,H]", true, SlotType::Float, "gain of the squash accumulator (has_gain)");
  }
  if (isSquash(spec)) add("precond_center", {H}, "[H]", true, SlotType::Float, "log-space centre c_h of the squash");
  if (spec.initial_state) {
    add("initial_state", {N, HV, K, V}, "[N,HV,K,V]", false, SlotType::Float, "initial memory state");
  }
  if (usesDiagonalPrecond(spec) && spec.initial_precond_state) {
    add("initial_precond_state", {N, H, K}, "[N,H,K]", false, SlotType::Float, "initial preconditioner state");
  }
  if (spec.varlen) add("cu_seqlens", {N + 1}, "[N+1]", false, SlotType::Index, "packed sequence boundaries");
  return out;
}

std::vector<TensorSlot> referenceOutputSlots(const Spec& spec, const ReferenceProblem& s) {
  checkReferenceSpec(spec);
  const std::int64_t N = s.numSeqs();
  std::vector<TensorSlot> out;
  out.push_back(TensorSlot{"o", {s.batch, s.seq_len, s.heads_v, s.value_dim}, "[B,T,HV,V]", true, SlotType::Float,
                           "output"});
  if (spec.final_state) {
    out.push_back(TensorSlot{"final_state", {N, s.heads_v, s.key_dim, s.value_dim}, "[N,HV,K,V]", true,
                             SlotType::Float, "final memory state"});
  }
  if (usesDiagonalPrecond(spec) && spec.final_precond_state) {
    out.push_back(TensorSlot{"final_precond_state", {N, s.heads_qk, s.key_dim}, "[N,H,K]", true, SlotType::Float,
                             "final preconditioner state"});
  }
  return out;
}

// ---- input validation ---------------------------------------------------------------------------

ReferenceProblem inferProblemShape(const Spec& spec, const ReferenceInputs& inputs) {
  auto rank4 = [&](const char* name, const char* layout) -> const Tensor& {
    auto it = inputs.find(name);
    if (it == inputs.end()) failInput(name, std::string("missing required input ") + layout);
    if (it->second.rank() != 4) {
      failInput(name, std::string("expected rank 4 ") + layout + ", got shape " + it->second.shapeString());
    }
    return it->second;
  };
  const Tensor& q = rank4("q", "[B,T,H,K]");
  const Tensor& v = rank4("v", "[B,T,HV,V]");
  ReferenceProblem s;
  s.batch = q.dim(0);
  s.seq_len = q.dim(1);
  s.heads_qk = q.dim(2);
  s.key_dim = q.dim(3);
  s.heads_v = v.dim(2);
  s.value_dim = v.dim(3);
  const std::int64_t steps = householderSteps(spec);
  if (v.dim(0) != s.batch || v.dim(1) != s.seq_len * steps) {
    const std::string rows = steps == 1 ? "T=" + std::to_string(s.seq_len)
                                        : "T*" + std::to_string(steps) + "=" + std::to_string(s.seq_len * steps) +
                                              " rows (" + std::to_string(steps) + " Householder steps per token)";
    failInput("v", std::string(steps == 1 ? "expected [B,T,HV,V]" : "expected [B,T*n_h,HV,V]") +
                       " with B=" + std::to_string(s.batch) + ", " + rows + " (T from q " + q.shapeString() +
                       "), got " + v.shapeString());
  }
  auto cu = inputs.find("cu_seqlens");
  if (spec.varlen && cu != inputs.end()) {
    const Tensor& c = cu->second;
    if (c.dtype() != ScalarType::I64) failInput("cu_seqlens", std::string("expected dtype i64, got ") + toString(c.dtype()));
    if (c.rank() != 1 || c.dim(0) < 2) {
      failInput("cu_seqlens", "expected shape [N+1] with N >= 1, got " + c.shapeString());
    }
    s.cu_seqlens.resize(static_cast<std::size_t>(c.numel()));
    for (std::int64_t i = 0; i < c.numel(); ++i) s.cu_seqlens[static_cast<std::size_t>(i)] = c.getInt(i);
  }
  return s;
}

void checkReferenceSize(const Spec& spec, const ReferenceProblem& s) {
  // Empty sequences are allowed (a packed batch may hold them), but each still gets a [HV,K,V] final state:
  // the element bound below is what stops a few kilobytes of cu_seqlens from sizing gigabytes of output.
  const std::int64_t N = s.numSeqs();
  // In double: the product of four file-controlled extents may not fit in 64 bits.
  double elements = static_cast<double>(s.batch) * static_cast<double>(s.seq_len) * static_cast<double>(s.heads_v) *
                    static_cast<double>(s.value_dim);
  if (spec.final_state) {
    elements += static_cast<double>(N) * static_cast<double>(s.heads_v) * static_cast<double>(s.key_dim) *
                static_cast<double>(s.value_dim);
  }
  if (usesDiagonalPrecond(spec) && spec.final_precond_state) {
    elements += static_cast<double>(N) * static_cast<double>(s.heads_qk) * static_cast<double>(s.key_dim);
  }
  if (elements > static_cast<double>(kMaxReferenceOutputElements)) {
    throw DataError("problem shape " + shapeText(s) + ": the outputs (o" +
                    std::string(spec.final_state ? ", final_state" : "") +
                    (usesDiagonalPrecond(spec) && spec.final_precond_state ? ", final_precond_state" : "") +
                    ") would hold " + fmt(elements) + " float64 values; the reference's limit is " +
                    std::to_string(kMaxReferenceOutputElements) + " (a smaller problem, or fewer sequences)");
  }
}

ReferenceProblem validateReferenceInputs(const Spec& spec, const ReferenceInputs& inputs) {
  checkReferenceSpec(spec);
  // Without a consistent shape nothing else can be checked: these throw at once.
  const ReferenceProblem shape = inferProblemShape(spec, inputs);
  checkProblemShape(spec, shape);
  checkReferenceSize(spec, shape);
  const std::vector<TensorSlot> slots = referenceInputSlots(spec, shape);

  // Every tensor is checked, and every mistake reported in one DataError.
  std::vector<std::string> errors;
  auto report = [&](const std::string& name, const std::string& msg) {
    errors.push_back("reference input '" + name + "': " + msg);
  };
  std::set<std::string> known;
  for (const TensorSlot& slot : slots) known.insert(slot.name);
  std::string accepted;
  for (const TensorSlot& slot : slots) accepted += (accepted.empty() ? "" : ", ") + slot.name;
  for (const auto& kv : inputs) {
    if (known.count(kv.first)) continue;
    report(kv.first, "unexpected input: " + specLabel(spec) + " (decay " + toString(spec.decay.kind) + ", gain " +
                         toString(spec.gain.kind) + ", precond " + toString(spec.precond.kind) +
                         (usesDiagonalPrecond(spec) ? std::string("/") + toString(spec.precond.source) : "") +
                         ") accepts only: " + accepted);
  }

  const ScalarType actDType = inputs.at("q").dtype();
  for (const TensorSlot& slot : slots) {
    auto it = inputs.find(slot.name);
    if (it == inputs.end()) {
      if (slot.required) {
        report(slot.name, "missing required input " + slot.layout + " = " + shapeToString(slot.shape) + " (" +
                              slot.meaning + ")");
      }
      continue;
    }
    const Tensor& t = it->second;
    if (!acceptsDType(spec, slot.type, t.dtype())) {
      report(slot.name, "expected dtype " + acceptedDTypes(spec, slot.type) + ", got " + toString(t.dtype()));
      continue;
    }
    if (slot.type == SlotType::Activation && t.dtype() != actDType) {
      report(slot.name, std::string("q, k and v must share one dtype: q is ") + toString(actDType) + ", " +
                            slot.name + " is " + toString(t.dtype()));
      continue;
    }
    if (t.shape() != slot.shape) {
      report(slot.name, "expected shape " + slot.layout + " = " + shapeToString(slot.shape) + ", got " +
                            t.shapeString() + " (" + slot.meaning + ")");
      continue;
    }
    const std::string bad = valueError(spec, slot.name, t);
    if (!bad.empty()) report(slot.name, bad);
  }
  if (errors.size() == 1) throw DataError(errors.front());
  if (!errors.empty()) {
    std::string all = std::to_string(errors.size()) + " input errors:";
    for (const std::string& e : errors) all += "\n  " + e;
    throw DataError(all);
  }
  return shape;
}

// ---- the recurrence -----------------------------------------------------------------------------

namespace {

// Inputs converted to double once, with the index arithmetic of the FLA layouts.
// Per-token tensors (q, g, o, precond inputs) have T rows; the per-step ones (k, v, beta) have T·n_h rows
// and are indexed by the step row r = t·n_h + j.
struct Problem {
  ReferenceProblem s;
  std::int64_t steps = 1;  // n_h
  std::vector<double> q, k, v, g, beta, pg, pb, pc, s0, p0;
  bool hasS0 = false, hasP0 = false;

  std::int64_t qk(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return ((b * s.seq_len + t) * s.heads_qk + h) * s.key_dim;
  }
  std::int64_t vIdx(std::int64_t b, std::int64_t t, std::int64_t hv) const {
    return ((b * s.seq_len + t) * s.heads_v + hv) * s.value_dim;
  }
  std::int64_t perV(std::int64_t b, std::int64_t t, std::int64_t hv) const { return (b * s.seq_len + t) * s.heads_v + hv; }
  std::int64_t perH(std::int64_t b, std::int64_t t, std::int64_t h) const { return (b * s.seq_len + t) * s.heads_qk + h; }
  // Step rows r in [0, T·n_h): k [B,T·n_h,H,K], v [B,T·n_h,HV,V], beta [B,T·n_h,HV].
  std::int64_t kStep(std::int64_t b, std::int64_t r, std::int64_t h) const {
    return ((b * s.seq_len * steps + r) * s.heads_qk + h) * s.key_dim;
  }
  std::int64_t vStep(std::int64_t b, std::int64_t r, std::int64_t hv) const {
    return ((b * s.seq_len * steps + r) * s.heads_v + hv) * s.value_dim;
  }
  std::int64_t betaStep(std::int64_t b, std::int64_t r, std::int64_t hv) const {
    return (b * s.seq_len * steps + r) * s.heads_v + hv;
  }
};

std::vector<double> doublesOf(const ReferenceInputs& in, const char* name) {
  auto it = in.find(name);
  return it == in.end() ? std::vector<double>() : it->second.toDoubles();
}

// x · (Σx² + eps)^{-1/2} (FLA's in-kernel l2norm, docs/math.md §1), or x itself.
void normalise(const double* x, std::int64_t n, bool l2norm, double eps, double mul, std::vector<double>& out) {
  double ss = 0.0;
  for (std::int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = l2norm ? mul / std::sqrt(ss + eps) : mul;
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = x[i] * r;
}

// The diagonal preconditioner of one key head along one sequence: its state (A or d) and the vector P_t.
class Preconditioner {
 public:
  Preconditioner(const Spec& spec, const Problem& p, std::int64_t n, std::int64_t h)
      : spec_(spec), p_(p), h_(h), state_(static_cast<std::size_t>(p.s.key_dim)), out_(state_.size(), 1.0) {
    const double init = isHypergrad(spec) ? spec.precond.hypergrad.init : 0.0;
    for (std::size_t i = 0; i < state_.size(); ++i) {
      state_[i] = p.hasP0 ? p.p0[static_cast<std::size_t>((n * p.s.heads_qk + h) * p.s.key_dim) + i] : init;
    }
  }

  /// Advances the state by token (b, t) with normalised key k̂ and returns P_t.
  const std::vector<double>& step(std::int64_t b, std::int64_t t, const std::vector<double>& khat) {
    if (isSquash(spec_)) {
      squashStep(b, t, khat);
    } else {
      const bool pre = spec_.precond.hypergrad.timing == WriteTiming::Pre;
      if (pre) out_ = state_;
      hypergradStep(b, t, khat);
      if (!pre) out_ = state_;
    }
    return out_;
  }

  const std::vector<double>& state() const { return state_; }

 private:
  // docs/math.md §3.3: A_t = γ A_{t-1} + β^a k̂², M = x^{−s(ln(A_t+eps) − c_h)}.
  void squashStep(std::int64_t b, std::int64_t t, const std::vector<double>& khat) {
    const SquashParams& sp = spec_.precond.squash;
    const std::size_t i0 = static_cast<std::size_t>(p_.perH(b, t, h_));
    const double gamma = sp.has_gate ? std::exp(p_.pg[i0]) : 1.0;
    const double gain = sp.has_gain ? p_.pb[i0] : 1.0;
    const double c = p_.pc[static_cast<std::size_t>(h_)];
    const double lnx = std::log(sp.x);
    for (std::size_t i = 0; i < state_.size(); ++i) {
      state_[i] = gamma * state_[i] + gain * khat[i] * khat[i];
      const double r = std::log(state_[i] + sp.eps) - c;
      const double s = r / (1.0 + std::fabs(r));
      out_[i] = std::exp(-lnx * s);
    }
  }

  // docs/math.md §5.2: d ← ρ d + (η β / ‖k̂‖²)(1 − β⟨d, u⟩) u, u = k̂⊙k̂; then the optional clamp.
  void hypergradStep(std::int64_t b, std::int64_t t, const std::vector<double>& khat) {
    const HypergradParams& hp = spec_.precond.hypergrad;
    const double rho = hp.has_retention ? std::exp(p_.pg[static_cast<std::size_t>(p_.perH(b, t, h_))]) : 1.0;
    // gva_ratio == 1 (checkReferenceSpec), so value head h carries this key head's gain.
    const double beta = spec_.gain.kind == GainKind::Scalar ? p_.beta[static_cast<std::size_t>(p_.perV(b, t, h_))] : 1.0;
    double kk = 0.0, du = 0.0;
    for (std::size_t i = 0; i < state_.size(); ++i) {
      const double u = khat[i] * khat[i];
      kk += u;
      du += state_[i] * u;
    }
    const double coef = kk > 0.0 ? hp.eta * beta / kk * (1.0 - beta * du) : 0.0;
    for (std::size_t i = 0; i < state_.size(); ++i) {
      double d = rho * state_[i] + coef * khat[i] * khat[i];
      if (hp.clamp_min) d = std::max(d, *hp.clamp_min);
      if (hp.clamp_max) d = std::min(d, *hp.clamp_max);
      state_[i] = d;
    }
  }

  const Spec& spec_;
  const Problem& p_;
  std::int64_t h_;
  std::vector<double> state_;
  std::vector<double> out_;
};

// One value head's memory S [K, V] (key-major). A token is two passes over S: decay fused with the
// prediction Sᵀk^r, then the write fused with the read. The arithmetic and its order are those of the
// unfused form (decay all, predict, write all, read), so results do not depend on the fusion.
struct Memory {
  std::int64_t K, V;
  std::vector<double> S;

  /// decay: per-row factors D (K values; null for no decay); delta: e = β (v − (D S)ᵀ k^r), S = D S + k^w eᵀ;
  /// linear: S = D S + β k^w vᵀ. Then o = Sᵀ q_read. `e` is scratch of V doubles.
  void step(const double* decay, SolveKind solve, double beta, const double* v, const double* kr,
            const double* kw, const double* qRead, double* __restrict e, double* __restrict o) {
    double* __restrict s = S.data();
    for (std::int64_t j = 0; j < V; ++j) e[j] = v[j];
    for (std::int64_t i = 0; i < K; ++i) {
      double* __restrict row = s + i * V;
      if (decay) {
        const double a = decay[i];
        for (std::int64_t j = 0; j < V; ++j) row[j] *= a;
      }
      if (solve == SolveKind::Delta) {
        const double ki = kr[i];
        for (std::int64_t j = 0; j < V; ++j) e[j] -= row[j] * ki;
      }
    }
    for (std::int64_t j = 0; j < V; ++j) e[j] *= beta;
    for (std::int64_t j = 0; j < V; ++j) o[j] = 0.0;
    for (std::int64_t i = 0; i < K; ++i) {
      double* __restrict row = s + i * V;
      const double ki = kw[i], qi = qRead[i];
      for (std::int64_t j = 0; j < V; ++j) {
        row[j] += ki * e[j];
        o[j] += row[j] * qi;
      }
    }
  }
};

// The per-row decay factors of value head hv at token t (false: no decay).
bool decayFactors(const Spec& spec, const Problem& p, std::int64_t b, std::int64_t t, std::int64_t hv,
                  std::vector<double>& out) {
  if (spec.decay.kind == DecayKind::None) return false;
  if (spec.decay.kind == DecayKind::Scalar) {
    std::fill(out.begin(), out.end(), std::exp(p.g[static_cast<std::size_t>(p.perV(b, t, hv))]));
  } else {
    const std::size_t g0 = static_cast<std::size_t>(p.perV(b, t, hv) * p.s.key_dim);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::exp(p.g[g0 + i]);
  }
  return true;
}

// Output buffers in the layouts of ReferenceOutputs (empty when not produced).
struct OutputBuffers {
  std::vector<double> o, finalState, finalPrecond;
};

// Runs tokens [t0, t1) of batch row b as sequence n, for key head h and its value heads.
void runSequenceHead(const Spec& spec, const Problem& p, std::int64_t n, std::int64_t b, std::int64_t t0,
                     std::int64_t t1, std::int64_t h, OutputBuffers& out) {
  const ReferenceProblem& s = p.s;
  const std::int64_t K = s.key_dim, V = s.value_dim, ratio = s.heads_v / s.heads_qk;
  const double scale = spec.scale ? *spec.scale : 1.0 / std::sqrt(static_cast<double>(K));
  const bool precond = usesDiagonalPrecond(spec);
  const bool atk = precond && spec.precond.side == PrecondSide::Key;

  std::vector<Memory> mem(static_cast<std::size_t>(ratio), Memory{K, V, std::vector<double>(static_cast<std::size_t>(K * V), 0.0)});
  for (std::int64_t r = 0; r < ratio; ++r) {
    if (!p.hasS0) continue;
    const std::int64_t hv = h * ratio + r;
    const auto first = p.s0.begin() + static_cast<std::ptrdiff_t>((n * s.heads_v + hv) * K * V);
    std::copy(first, first + static_cast<std::ptrdiff_t>(K * V), mem[static_cast<std::size_t>(r)].S.begin());
  }
  Preconditioner pre(spec, p, n, h);

  std::vector<double> qhat(static_cast<std::size_t>(K)), khat(qhat.size()), kw(qhat.size()), qr(qhat.size());
  std::vector<double> e(static_cast<std::size_t>(V)), dec(static_cast<std::size_t>(K)), unread(e.size());
  const std::int64_t n_h = p.steps;
  for (std::int64_t t = t0; t < t1; ++t) {
    normalise(&p.q[static_cast<std::size_t>(p.qk(b, t, h))], K, spec.qk_l2norm, spec.l2norm_eps, scale, qhat);
    // Householder step j of token t (one step unless solve.steps > 1, which excludes a preconditioner):
    // the decay before the first step, the read after the last.
    for (std::int64_t j = 0; j < n_h; ++j) {
      const std::int64_t row = t * n_h + j;
      normalise(&p.k[static_cast<std::size_t>(p.kStep(b, row, h))], K, spec.qk_l2norm, spec.l2norm_eps, 1.0, khat);
      kw = khat;
      qr = qhat;
      if (precond) {
        const std::vector<double>& P = pre.step(b, t, khat);
        std::vector<double>& target = atk ? kw : qr;
        for (std::size_t i = 0; i < target.size(); ++i) target[i] *= P[i];
      }
      for (std::int64_t r = 0; r < ratio; ++r) {
        const std::int64_t hv = h * ratio + r;
        Memory& m = mem[static_cast<std::size_t>(r)];
        const bool decays = j == 0 && decayFactors(spec, p, b, t, hv, dec);
        const double beta =
            spec.gain.kind == GainKind::Scalar ? p.beta[static_cast<std::size_t>(p.betaStep(b, row, hv))] : 1.0;
        const std::size_t vi = static_cast<std::size_t>(p.vStep(b, row, hv));
        double* o = j + 1 == n_h ? &out.o[static_cast<std::size_t>(p.vIdx(b, t, hv))] : unread.data();
        m.step(decays ? dec.data() : nullptr, spec.solve.kind, beta, &p.v[vi], khat.data(), kw.data(), qr.data(),
               e.data(), o);
      }
    }
  }

  if (!out.finalState.empty()) {
    double* fs = out.finalState.data();
    for (std::int64_t r = 0; r < ratio; ++r) {
      const std::int64_t hv = h * ratio + r;
      std::copy(mem[static_cast<std::size_t>(r)].S.begin(), mem[static_cast<std::size_t>(r)].S.end(),
                fs + (n * s.heads_v + hv) * K * V);
    }
  }
  if (!out.finalPrecond.empty()) {
    double* fp = out.finalPrecond.data();
    std::copy(pre.state().begin(), pre.state().end(), fp + (n * s.heads_qk + h) * K);
  }
}

}  // namespace

TensorMap ReferenceOutputs::toMap() const {
  TensorMap m;
  m.emplace("o", o);
  if (has_final_state) m.emplace("final_state", final_state);
  if (has_final_precond_state) m.emplace("final_precond_state", final_precond_state);
  return m;
}

ReferenceOutputs runReference(const Spec& spec, const ReferenceInputs& inputs) {
  Problem p;
  p.s = validateReferenceInputs(spec, inputs);
  p.steps = householderSteps(spec);
  p.q = doublesOf(inputs, "q");
  p.k = doublesOf(inputs, "k");
  p.v = doublesOf(inputs, "v");
  p.g = doublesOf(inputs, "g");
  p.beta = doublesOf(inputs, "beta");
  p.pg = doublesOf(inputs, "precond_g");
  p.pb = doublesOf(inputs, "precond_beta");
  p.pc = doublesOf(inputs, "precond_center");
  p.s0 = doublesOf(inputs, "initial_state");
  p.p0 = doublesOf(inputs, "initial_precond_state");
  p.hasS0 = inputs.count("initial_state") > 0;
  p.hasP0 = inputs.count("initial_precond_state") > 0;

  const ReferenceProblem& s = p.s;
  const std::int64_t N = s.numSeqs();
  const std::vector<std::int64_t> oShape = {s.batch, s.seq_len, s.heads_v, s.value_dim};
  const std::vector<std::int64_t> fsShape = {N, s.heads_v, s.key_dim, s.value_dim};
  const std::vector<std::int64_t> fpShape = {N, s.heads_qk, s.key_dim};
  const bool wantFs = spec.final_state;
  const bool wantFp = usesDiagonalPrecond(spec) && spec.final_precond_state;
  OutputBuffers buf;
  buf.o.assign(static_cast<std::size_t>(s.batch * s.seq_len * s.heads_v * s.value_dim), 0.0);
  if (wantFs) buf.finalState.assign(static_cast<std::size_t>(N * s.heads_v * s.key_dim * s.value_dim), 0.0);
  if (wantFp) buf.finalPrecond.assign(static_cast<std::size_t>(N * s.heads_qk * s.key_dim), 0.0);

  for (std::int64_t n = 0; n < N; ++n) {
    const bool varlen = !s.cu_seqlens.empty();
    const std::int64_t b = varlen ? 0 : n;
    const std::int64_t t0 = varlen ? s.cu_seqlens[static_cast<std::size_t>(n)] : 0;
    const std::int64_t t1 = varlen ? s.cu_seqlens[static_cast<std::size_t>(n) + 1] : s.seq_len;
    for (std::int64_t h = 0; h < s.heads_qk; ++h) runSequenceHead(spec, p, n, b, t0, t1, h, buf);
  }
  ReferenceOutputs out;
  out.o = Tensor::fromDoubles(ScalarType::F64, oShape, buf.o);
  out.has_final_state = wantFs;
  if (wantFs) out.final_state = Tensor::fromDoubles(ScalarType::F64, fsShape, buf.finalState);
  out.has_final_precond_state = wantFp;
  if (wantFp) out.final_precond_state = Tensor::fromDoubles(ScalarType::F64, fpShape, buf.finalPrecond);
  return out;
}

}  // namespace dgps
