#include "dgps/dsl/Signature.h"

namespace dgps {
namespace {

TensorSig sig(const char* name, std::vector<std::string> shape, const char* dtype, TensorRole role,
              bool optional, const std::string& note) {
  TensorSig t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.role = role;
  t.optional = optional;
  t.note = note;
  return t;
}

}  // namespace

std::vector<TensorSig> forwardSignature(const Spec& s) {
  using R = TensorRole;
  std::vector<TensorSig> out;
  // k, v and beta carry one row per Householder step (solve.steps = n_h > 1: T*n_h rows, token-major).
  const std::string ts = householderSteps(s) == 1 ? "T" : "T*" + std::to_string(householderSteps(s));
  const char* stepNote = householderSteps(s) == 1 ? "" : "; row t*n_h + j is Householder step j of token t";
  out.push_back(sig("q", {"B", "T", "H", "K"}, "input", R::Input, false,
                    s.qk_l2norm ? "L2-normalised in the kernel" : "used as given"));
  out.push_back(sig("k", {"B", ts, "H", "K"}, "input", R::Input, false,
                    std::string(s.qk_l2norm ? "L2-normalised in the kernel" : "used as given") + stepNote));
  out.push_back(sig("v", {"B", ts, "HV", "V"}, "input", R::Input, false,
                    householderSteps(s) == 1 ? "" : "row t*n_h + j is Householder step j of token t"));
  if (s.decay.kind == DecayKind::Scalar)
    out.push_back(sig("g", {"B", "T", "HV"}, "f32", R::Input, false, "log decay, natural log, <= 0"));
  if (s.decay.kind == DecayKind::Diagonal)
    out.push_back(sig("g", {"B", "T", "HV", "K"}, "f32", R::Input, false, "log decay per key channel, natural log, <= 0"));
  if (hasGainInput(s))
    out.push_back(sig("beta", {"B", ts, "HV"}, "f32", R::Input, false, std::string("gain, inside gain.range") + stepNote));
  if (usesSquash(s)) {
    if (s.precond.squash.has_gate)
      out.push_back(sig("precond_g", {"B", "T", "H"}, "f32", R::Input, false,
                        "accumulator log decay, natural log, <= 0"));
    if (s.precond.squash.has_gain)
      out.push_back(sig("precond_beta", {"B", "T", "H"}, "f32", R::Input, false, "accumulator gain, >= 0"));
    out.push_back(sig("precond_center", {"H"}, "f32", R::Input, false, "squash centre c_h (log space)"));
  }
  if (usesHypergrad(s) && s.precond.hypergrad.has_retention)
    out.push_back(sig("precond_g", {"B", "T", "H"}, "f32", R::Input, false,
                      "log retention ln r_t, natural log, <= 0"));
  if (s.initial_state)
    out.push_back(sig("initial_state", {"N", "HV", "K", "V"}, "f32", R::Input, true, "S_0; zeros when null"));
  if (hasPrecond(s) && s.initial_precond_state)
    out.push_back(sig("initial_precond_state", {"N", "H", "K"}, "f32", R::Input, true,
                      usesSquash(s) ? "A_0; zeros when null" : "d_0; precond.hypergrad.init when null"));
  if (hasKernel(s, KernelKind::ChunkForward) && s.varlen)
    out.push_back(sig("cu_seqlens", {"N+1"}, "i64", R::Input, true, "packed sequences; then B = 1"));
  out.push_back(sig("o", {"B", "T", "HV", "V"}, "input", R::Output, false, ""));
  if (s.final_state)
    out.push_back(sig("final_state", {"N", "HV", "K", "V"}, "f32", R::Output, true, "S_T"));
  if (hasPrecond(s) && s.final_precond_state)
    out.push_back(sig("final_precond_state", {"N", "H", "K"}, "f32", R::Output, true,
                      usesSquash(s) ? "A_T" : "d after the last token"));
  return out;
}

std::string shapeText(const TensorSig& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) out += ", ";
    out += t.shape[i];
  }
  return out + "]";
}

}  // namespace dgps
