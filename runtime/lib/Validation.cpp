#include "dgps/runtime/Validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <sstream>

#include "dgps/runtime/Error.h"

namespace dgps {

bool specTakesPrecondGate(const Spec& s) {
  return (usesSquash(s) && s.precond.squash.has_gate) || (usesHypergrad(s) && s.precond.hypergrad.has_retention);
}
bool specTakesPrecondGain(const Spec& s) { return usesSquash(s) && s.precond.squash.has_gain; }
bool specTakesPrecondCenter(const Spec& s) { return usesSquash(s); }

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > (std::int64_t(1) << 62) / d) return -1;  // overflow: reported by validation
    n *= d;
  }
  return n;
}

bool TensorView::isContiguous() const {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  std::int64_t expect = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

namespace {

std::string shapeStr(const std::vector<std::int64_t>& s) { return shapeToString(s); }

std::string pointerStr(const void* p) {
  std::ostringstream os;
  os << p;
  return os.str();
}

enum class Kind { Activation, Float32, Index64 };

// Pointer alignment the kernels need: vector loads of 16 bytes; cu_seqlens is read as i64; launch_rules.h lays
// the workspace out in 256-byte blocks.
constexpr std::uintptr_t kTensorAlign = 16;
constexpr std::uintptr_t kIndexAlign = 8;
constexpr std::uintptr_t kWorkspaceAlign = 256;

bool aligned(const TensorView& t, std::uintptr_t align) {
  return reinterpret_cast<std::uintptr_t>(t.data) % align == 0;
}

// An expected shape of at most 5 dims, held inline: a call that passes validation allocates nothing
// (the checks run on every forward/decode; messages are built only on failure).
struct Dims {
  std::int64_t d[5] = {0, 0, 0, 0, 0};
  std::size_t n = 0;
  Dims(std::initializer_list<std::int64_t> dims) {
    for (std::int64_t x : dims) push(x);
  }
  void push(std::int64_t x) {
    if (n < 5) d[n++] = x;
  }
  bool equals(const std::vector<std::int64_t>& shape) const {
    return shape.size() == n && std::equal(shape.begin(), shape.end(), d);
  }
  std::vector<std::int64_t> vec() const { return std::vector<std::int64_t>(d, d + n); }
};

// What the call expects of one named tensor.
struct Slot {
  const char* name;
  const TensorView* view;
  bool taken;      ///< the spec reads/writes this tensor
  bool required;   ///< must be given when taken
  Dims shape;
  const char* layout;   ///< "[B,T,HV,K]"
  const char* meaning;  ///< "decay diagonal: one natural-log decay per key channel"
  const char* why_not;  ///< when not taken: why ("decay is none")
  Kind kind;
};

class Checker {
 public:
  Checker(const char* call, const Spec& spec) : call_(call), spec_(spec) {}

  [[noreturn]] void fail(const std::string& tensor, const std::string& msg) const {
    // "tensor 'g' is required ..." reads as a sentence; everything else is "tensor 'g': <problem>".
    const bool sentence = msg.rfind("is ", 0) == 0 || msg.rfind("aliases ", 0) == 0;
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string(call_) + ": tensor '" + tensor + "'" + (sentence ? " " : ": ") + msg);
  }

  // Checks the generic properties of a given tensor (pointer, contiguity, alignment, device, size).
  void basics(const char* name, const TensorView& t, std::size_t align) {
    if (t.numel() < 0) fail(name, "invalid shape " + shapeStr(t.shape) + " (negative or overflowing dims)");
    if (!t.data && t.numel() > 0) fail(name, "data pointer is null but the shape is " + shapeStr(t.shape));
    if (!t.isContiguous()) {
      std::vector<std::int64_t> rm(t.shape.size(), 1);
      for (std::size_t i = t.shape.size(); i-- > 1;) rm[i - 1] = rm[i] * t.shape[i];
      fail(name, "must be contiguous (row-major strides " + shapeStr(rm) + " for shape " + shapeStr(t.shape) +
                     "), got strides " + shapeStr(t.strides) + "; the kernels take no strides, make a contiguous copy");
    }
    if (!aligned(t, align)) {
      fail(name, "data pointer " + pointerStr(t.data) + " is not " + std::to_string(align) +
                     "-byte aligned (the kernels use vector loads)");
    }
    if (t.device < 0) fail(name, "device ordinal " + std::to_string(t.device) + " is negative");
    if (device_ < 0) {
      device_ = t.device;
      device_from_ = name;
    } else if (t.device != device_) {
      fail(name, "is on device " + std::to_string(t.device) + " but '" + device_from_ + "' is on device " +
                     std::to_string(device_) + "; all tensors of one call must be on the same device");
    }
  }

  void slot(const Slot& s, ScalarType activation) {
    const TensorView& t = *s.view;
    if (!s.taken) {
      if (t.given()) {
        fail(s.name, "is not taken by spec '" + spec_.name + "' (" + s.why_not + "), but a tensor of shape " +
                         shapeStr(t.shape) + " was given; leave it empty");
      }
      return;
    }
    if (!t.given()) {
      if (s.required) {
        fail(s.name, std::string("is required (") + s.meaning + "): expected shape " + s.layout + " = " +
                         shapeStr(s.shape.vec()) +
                         ", dtype " + dtypeName(s.kind, activation) + "; got none");
      }
      return;
    }
    if (!s.shape.equals(t.shape)) {
      fail(s.name, std::string("expected shape ") + s.layout + " = " + shapeStr(s.shape.vec()) + " (" + s.meaning + "), got " +
                       shapeStr(t.shape));
    }
    ScalarType want = s.kind == Kind::Activation ? activation : s.kind == Kind::Index64 ? ScalarType::I64 : ScalarType::F32;
    if (t.dtype != want) {
      fail(s.name, std::string("expected dtype ") + toString(want) +
                       (s.kind == Kind::Activation ? " (the dtype of q)" : "") + ", got " + toString(t.dtype));
    }
    basics(s.name, t, s.kind == Kind::Index64 ? kIndexAlign : kTensorAlign);
  }

  static std::string dtypeName(Kind k, ScalarType activation) {
    return k == Kind::Activation ? toString(activation) : k == Kind::Index64 ? "i64" : "f32";
  }

  int device() const { return device_; }

 private:
  const char* call_;
  const Spec& spec_;
  int device_ = -1;
  const char* device_from_ = "";
};

std::string listStr(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// q's dtype must be one the package was built for.
ScalarType checkActivationDtype(Checker& c, const Spec& spec, const TensorView& q) {
  for (DType d : spec.input_dtypes) {
    if (toScalarType(d) == q.dtype) return q.dtype;
  }
  std::string allowed;
  for (DType d : spec.input_dtypes) allowed += (allowed.empty() ? "" : " or ") + std::string(toString(d));
  c.fail("q", std::string("dtype ") + toString(q.dtype) + " is not an input dtype of spec '" + spec.name +
                  "' (expected " + allowed + ")");
}

// Head and dimension rules shared by forward and decode.
void checkHeadsAndDims(Checker& c, const Spec& spec, std::int64_t H, std::int64_t K, std::int64_t HV, std::int64_t V,
                       const char* qdims, const char* vdims) {
  if (H < 1) c.fail("q", std::string("H (dim ") + qdims + ") must be >= 1, got " + std::to_string(H));
  if (spec.heads_qk > 0 && H != spec.heads_qk) {
    c.fail("q", "H = " + std::to_string(H) + " but spec '" + spec.name + "' fixes heads_qk = " +
                    std::to_string(spec.heads_qk));
  }
  if (std::find(spec.key_dims.begin(), spec.key_dims.end(), K) == spec.key_dims.end()) {
    c.fail("q", "K = " + std::to_string(K) + " is not a key dim of spec '" + spec.name + "' (supported: " +
                    listStr(spec.key_dims) + ")");
  }
  if (HV < 1 || HV % H != 0) {
    c.fail("v", "HV = " + std::to_string(HV) + " value heads (dim " + vdims + ") is not a positive multiple of H = " +
                    std::to_string(H) + " key heads (GVA needs HV % H == 0)");
  }
  if (HV / H != spec.gva_ratio) {
    c.fail("v", "HV / H = " + std::to_string(HV) + " / " + std::to_string(H) + " = " + std::to_string(HV / H) +
                    " but spec '" + spec.name + "' was compiled for gva_ratio " + std::to_string(spec.gva_ratio) +
                    " (HV = " + std::to_string(spec.gva_ratio) + " * H)");
  }
  if (std::find(spec.value_dims.begin(), spec.value_dims.end(), V) == spec.value_dims.end()) {
    c.fail("v", "V = " + std::to_string(V) + " is not a value dim of spec '" + spec.name + "' (supported: " +
                    listStr(spec.value_dims) + ")");
  }
}

const char* decayMeaning(const Spec& s) {
  return s.decay.kind == DecayKind::Diagonal ? "decay diagonal: one natural-log decay per key channel"
                                             : "decay scalar: one natural-log decay per value head";
}

bool outputAliasesInput(const ForwardTensors& t) {
  return t.o.data && (t.o.data == t.q.data || t.o.data == t.k.data || t.o.data == t.v.data);
}

/// The layouts and meanings of k, v and beta: one row per token, or n_h rows per token (T*n_h rows, row
/// t·n_h + j is Householder step j of token t).
struct StepLayouts {
  explicit StepLayouts(std::int64_t n)
      : one(n == 1),
        k(one ? "[B,T,H,K]" : "[B,T*" + std::to_string(n) + ",H,K]"),
        v(one ? "[B,T,HV,V]" : "[B,T*" + std::to_string(n) + ",HV,V]"),
        beta(one ? "[B,T,HV]" : "[B,T*" + std::to_string(n) + ",HV]") {}
  const char* keys() const {
    return one ? "keys" : "keys, one row per Householder step (row t*n_h + j: step j of token t)";
  }
  const char* values() const {
    return one ? "values" : "values, one row per Householder step (row t*n_h + j: step j of token t)";
  }
  const char* gains() const {
    return one ? "gain scalar: one write strength per value head"
               : "gain scalar: one write strength per value head and Householder step (row t*n_h + j)";
  }
  bool one;
  std::string k, v, beta;
};

float queryScale(const Spec& spec, std::int64_t K) {
  return spec.scale ? float(*spec.scale) : float(1.0 / std::sqrt(double(K)));
}

}  // namespace

ForwardProblem validateForward(const Spec& spec, const ForwardTensors& t) {
  Checker c("forward", spec);
  if (!hasKernel(spec, KernelKind::ChunkForward)) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: spec '" + spec.name + "' has no chunk_forward kernel (kernels lists only decode)");
  }
  if (!t.q.given()) c.fail("q", "is required: expected shape [B,T,H,K]; got none");
  if (t.q.shape.size() != 4) c.fail("q", "expected rank 4 [B,T,H,K], got shape " + shapeStr(t.q.shape));
  if (!t.v.given()) c.fail("v", "is required: expected shape [B,T,HV,V]; got none");
  if (t.v.shape.size() != 4) c.fail("v", "expected rank 4 [B,T,HV,V], got shape " + shapeStr(t.v.shape));
  ForwardProblem p;
  p.batch = t.q.shape[0];
  p.seq_len = t.q.shape[1];
  p.heads_qk = t.q.shape[2];
  p.key_dim = t.q.shape[3];
  p.heads_v = t.v.shape[2];
  p.value_dim = t.v.shape[3];
  if (p.batch < 1) c.fail("q", "B (dim 0) must be >= 1, got " + std::to_string(p.batch));
  if (p.seq_len < 1) c.fail("q", "T (dim 1) must be >= 1, got " + std::to_string(p.seq_len));
  p.input_dtype = checkActivationDtype(c, spec, t.q);
  checkHeadsAndDims(c, spec, p.heads_qk, p.key_dim, p.heads_v, p.value_dim, "2 of q", "2 of v");

  const bool precond = hasPrecond(spec);
  p.varlen = t.cu_seqlens.given();
  if (p.varlen && spec.varlen) {
    if (t.cu_seqlens.shape.size() != 1 || t.cu_seqlens.shape[0] < 2) {
      c.fail("cu_seqlens", "expected shape [N+1] with N >= 1, got " + shapeStr(t.cu_seqlens.shape));
    }
    if (p.batch != 1) {
      c.fail("q", "B = " + std::to_string(p.batch) + " but cu_seqlens is given: packed sequences need B == 1");
    }
    p.num_seqs = t.cu_seqlens.shape[0] - 1;
  } else {
    p.num_seqs = p.batch;
  }
  const std::int64_t B = p.batch, T = p.seq_len, H = p.heads_qk, HV = p.heads_v, K = p.key_dim, V = p.value_dim,
                     N = p.num_seqs;
  // Several Householder steps per token (docs/math.md §3.7): k, v and beta carry T·n_h rows, token-major.
  p.row_steps = householderSteps(spec);
  const std::int64_t TS = p.rows();
  const StepLayouts st(p.row_steps);

  const Slot slots[] = {
      {"q", &t.q, true, true, {B, T, H, K}, "[B,T,H,K]", "queries", "", Kind::Activation},
      {"k", &t.k, true, true, {B, TS, H, K}, st.k.c_str(), st.keys(), "", Kind::Activation},
      {"v", &t.v, true, true, {B, TS, HV, V}, st.v.c_str(), st.values(), "", Kind::Activation},
      {"g", &t.g, spec.decay.kind != DecayKind::None, true,
       spec.decay.kind == DecayKind::Diagonal ? Dims{B, T, HV, K} : Dims{B, T, HV},
       spec.decay.kind == DecayKind::Diagonal ? "[B,T,HV,K]" : "[B,T,HV]", decayMeaning(spec), "decay is none",
       Kind::Float32},
      {"beta", &t.beta, spec.gain.kind == GainKind::Scalar, true, {B, TS, HV}, st.beta.c_str(), st.gains(),
       "gain is none", Kind::Float32},
      {"precond_g", &t.precond_g, specTakesPrecondGate(spec), true, {B, T, H}, "[B,T,H]",
       usesSquash(spec) ? "log-decay of the squash accumulator" : "log retention of the hypergradient state",
       precond ? "the preconditioner has no gate/retention input" : "precond is none", Kind::Float32},
      {"precond_beta", &t.precond_beta, specTakesPrecondGain(spec), true, {B, T, H}, "[B,T,H]",
       "gain of the squash accumulator", precond ? "the preconditioner has no gain input" : "precond is none",
       Kind::Float32},
      {"precond_center", &t.precond_center, specTakesPrecondCenter(spec), true, {H}, "[H]",
       "log-space centre c_h of the squash", precond ? "hypergrad_ogd has no squash centre" : "precond is none",
       Kind::Float32},
      {"cu_seqlens", &t.cu_seqlens, spec.varlen, false, {N + 1}, "[N+1]", "packed sequence boundaries",
       "varlen is false", Kind::Index64},
      {"initial_state", &t.initial_state, spec.initial_state, false, {N, HV, K, V}, "[N,HV,K,V]",
       "initial memory state", "initial_state is false", Kind::Float32},
      {"initial_precond_state", &t.initial_precond_state, precond && spec.initial_precond_state, false, {N, H, K},
       "[N,H,K]", "initial preconditioner state",
       precond ? "initial_precond_state is false" : "precond is none", Kind::Float32},
      {"o", &t.o, true, true, {B, T, HV, V}, "[B,T,HV,V]", "output", "", Kind::Activation},
      {"final_state", &t.final_state, spec.final_state, false, {N, HV, K, V}, "[N,HV,K,V]", "final memory state",
       "final_state is false", Kind::Float32},
      {"final_precond_state", &t.final_precond_state, precond && spec.final_precond_state, false, {N, H, K},
       "[N,H,K]", "final preconditioner state", precond ? "final_precond_state is false" : "precond is none",
       Kind::Float32},
  };
  for (const Slot& s : slots) c.slot(s, p.input_dtype);
  if (t.workspace.given()) {
    if (t.workspace.shape.size() != 1) c.fail("workspace", "expected a 1-D buffer, got shape " + shapeStr(t.workspace.shape));
    c.basics("workspace", t.workspace, kWorkspaceAlign);
  }
  // Outputs that alias inputs would be read after being overwritten by an earlier kernel.
  if (outputAliasesInput(t)) {
    c.fail("o", "aliases an input (q, k or v); the forward needs a separate output buffer");
  }
  p.has_initial_state = t.initial_state.given();
  p.has_final_state = t.final_state.given();
  p.has_initial_precond_state = t.initial_precond_state.given();
  p.has_final_precond_state = t.final_precond_state.given();
  p.device = c.device();
  p.scale = queryScale(spec, K);
  return p;
}

ForwardProblem validateForward(const Package& package, const ForwardTensors& t) {
  return validateForward(package.layer(), t);
}

DecodeProblem validateDecode(const Spec& spec, const DecodeTensors& t) {
  Checker c("decode", spec);
  if (!hasKernel(spec, KernelKind::Decode)) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "decode: spec '" + spec.name + "' has no decode kernel (kernels lists only chunk_forward)");
  }
  if (!t.q.given()) c.fail("q", "is required: expected shape [B,1,H,K] or [B,H,K]; got none");
  const std::size_t rank = t.q.shape.size();
  if (rank != 3 && rank != 4) c.fail("q", "expected shape [B,1,H,K] or [B,H,K], got " + shapeStr(t.q.shape));
  DecodeProblem p;
  p.time_dim = rank == 4;
  if (p.time_dim && t.q.shape[1] != 1) {
    c.fail("q", "decode takes one token: expected [B,1,H,K], got " + shapeStr(t.q.shape) +
                    " (use forward for several tokens)");
  }
  const std::size_t off = p.time_dim ? 1 : 0;
  // Several Householder steps per token (docs/math.md §3.7): k, v and beta carry the token's n_h rows, [B,n_h,...]
  // whatever q's rank (the forward's layout at T = 1); q, g and o stay per token.
  const std::int64_t S = householderSteps(spec);
  const std::string nS = std::to_string(S);
  const std::string vLayout = S > 1 ? "[B," + nS + ",HV,V]" : p.time_dim ? "[B,1,HV,V]" : "[B,HV,V]";
  const std::size_t vRank = S > 1 ? 4 : rank, voff = S > 1 ? 1 : off;
  if (!t.v.given()) c.fail("v", "is required: expected " + vLayout + "; got none");
  if (t.v.shape.size() != vRank) {
    c.fail("v", "expected " + vLayout + (S > 1 ? " (one row per Householder step)" : " (same rank as q)") +
                    ", got " + shapeStr(t.v.shape));
  }
  p.batch = t.q.shape[0];
  p.heads_qk = t.q.shape[1 + off];
  p.key_dim = t.q.shape[2 + off];
  p.heads_v = t.v.shape[1 + voff];
  p.value_dim = t.v.shape[2 + voff];
  if (p.batch < 1) c.fail("q", "B (dim 0) must be >= 1, got " + std::to_string(p.batch));
  p.input_dtype = checkActivationDtype(c, spec, t.q);
  checkHeadsAndDims(c, spec, p.heads_qk, p.key_dim, p.heads_v, p.value_dim, p.time_dim ? "2 of q" : "1 of q",
                    voff ? "2 of v" : "1 of v");
  const std::int64_t B = p.batch, H = p.heads_qk, HV = p.heads_v, K = p.key_dim, V = p.value_dim;
  // Per-token shapes [B,1,...] or [B,...] (the optional time dim of q).
  auto tok = [&](std::initializer_list<std::int64_t> rest) {
    Dims s{B};
    if (p.time_dim) s.push(1);
    for (std::int64_t x : rest) s.push(x);
    return s;
  };
  auto lay = [&](const char* with_time, const char* without_time) { return p.time_dim ? with_time : without_time; };
  // The per-step tensors: [B,n_h,...] with several steps, else per token.
  auto stepRows = [&](std::initializer_list<std::int64_t> rest) {
    if (S == 1) return tok(rest);
    Dims s{B};
    s.push(S);
    for (std::int64_t x : rest) s.push(x);
    return s;
  };
  const std::string kLayout = S > 1 ? "[B," + nS + ",H,K]" : lay("[B,1,H,K]", "[B,H,K]");
  const std::string betaLayout = S > 1 ? "[B," + nS + ",HV]" : lay("[B,1,HV]", "[B,HV]");
  const bool precond = hasPrecond(spec);
  const Slot slots[] = {
      {"q", &t.q, true, true, tok({H, K}), lay("[B,1,H,K]", "[B,H,K]"), "query of the new token", "", Kind::Activation},
      {"k", &t.k, true, true, stepRows({H, K}), kLayout.c_str(),
       S > 1 ? "keys of the new token's Householder steps" : "key of the new token", "", Kind::Activation},
      {"v", &t.v, true, true, stepRows({HV, V}), vLayout.c_str(),
       S > 1 ? "values of the new token's Householder steps" : "value of the new token", "", Kind::Activation},
      {"g", &t.g, spec.decay.kind != DecayKind::None, true,
       spec.decay.kind == DecayKind::Diagonal ? tok({HV, K}) : tok({HV}),
       spec.decay.kind == DecayKind::Diagonal ? lay("[B,1,HV,K]", "[B,HV,K]") : lay("[B,1,HV]", "[B,HV]"),
       decayMeaning(spec), "decay is none", Kind::Float32},
      {"beta", &t.beta, spec.gain.kind == GainKind::Scalar, true, stepRows({HV}), betaLayout.c_str(),
       S > 1 ? "gain scalar per Householder step" : "gain scalar", "gain is none", Kind::Float32},
      {"precond_g", &t.precond_g, specTakesPrecondGate(spec), true, tok({H}), lay("[B,1,H]", "[B,H]"),
       usesSquash(spec) ? "log-decay of the squash accumulator" : "log retention of the hypergradient state",
       precond ? "the preconditioner has no gate/retention input" : "precond is none", Kind::Float32},
      {"precond_beta", &t.precond_beta, specTakesPrecondGain(spec), true, tok({H}), lay("[B,1,H]", "[B,H]"),
       "gain of the squash accumulator", precond ? "the preconditioner has no gain input" : "precond is none",
       Kind::Float32},
      {"precond_center", &t.precond_center, specTakesPrecondCenter(spec), true, {H}, "[H]",
       "log-space centre c_h of the squash", precond ? "hypergrad_ogd has no squash centre" : "precond is none",
       Kind::Float32},
      {"state", &t.state, true, true, {B, HV, K, V}, "[B,HV,K,V]", "memory state, updated in place", "",
       Kind::Float32},
      {"precond_state", &t.precond_state, precond, true, {B, H, K}, "[B,H,K]",
       "preconditioner state, updated in place", "precond is none", Kind::Float32},
      {"o", &t.o, true, true, tok({HV, V}), lay("[B,1,HV,V]", "[B,HV,V]"), "output of the new token", "",
       Kind::Activation},
  };
  for (const Slot& s : slots) c.slot(s, p.input_dtype);
  p.device = c.device();
  p.scale = queryScale(spec, K);
  return p;
}

DecodeProblem validateDecode(const Package& package, const DecodeTensors& t) {
  return validateDecode(package.layer(), t);
}

bool forwardPointerRulesHold(const ForwardTensors& t) {
  for (const TensorView* v : {&t.q, &t.k, &t.v, &t.g, &t.beta, &t.precond_g, &t.precond_beta, &t.precond_center,
                              &t.initial_state, &t.initial_precond_state, &t.o, &t.final_state,
                              &t.final_precond_state})
    if (!aligned(*v, kTensorAlign)) return false;
  return aligned(t.cu_seqlens, kIndexAlign) && aligned(t.workspace, kWorkspaceAlign) && !outputAliasesInput(t);
}

bool decodePointerRulesHold(const DecodeTensors& t) {
  for (const TensorView* v : {&t.q, &t.k, &t.v, &t.g, &t.beta, &t.precond_g, &t.precond_beta, &t.precond_center,
                              &t.state, &t.precond_state, &t.o})
    if (!aligned(*v, kTensorAlign)) return false;
  return true;
}

}  // namespace dgps
