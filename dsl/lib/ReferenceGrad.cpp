// runReferenceBackward: validation of the cotangents, then per sequence and key head the forward record
// of the key-head quantities, the reverse sweep of each value head's memory, and the reverse of the
// key-head quantities (ReferenceGradDetail.h; formulas in docs/backward.md).
#include "dgps/dsl/ReferenceGrad.h"

#include <cmath>
#include <sstream>

#include "ReferenceGradDetail.h"

namespace dgps {
namespace {

[[noreturn]] void failCotangent(const std::string& name, const std::string& msg) {
  throw DataError("reference cotangent '" + name + "': " + msg);
}

/// The cotangent slots of `spec` at `shape`: "d" + each output's name, do required.
std::vector<TensorSlot> cotangentSlots(const Spec& spec, const ReferenceProblem& shape) {
  std::vector<TensorSlot> slots = referenceOutputSlots(spec, shape);
  for (TensorSlot& s : slots) {
    s.required = s.name == "o";
    s.meaning = "cotangent of " + s.name;
    s.name = "d" + s.name;
  }
  return slots;
}

/// Why `name` is not a cotangent of `spec` (a final state the spec does not produce, or unknown).
std::string whyNotAccepted(const Spec& spec, const std::string& name) {
  if (name == "dfinal_state") return "spec '" + spec.name + "' has no final_state output (io.final_state: false)";
  if (name == "dfinal_precond_state") {
    return spec.precond.kind == PrecondKind::Diagonal
               ? "spec '" + spec.name + "' has no final_precond_state output (io.final_precond_state: false)"
               : "spec '" + spec.name + "' has no preconditioner, hence no final_precond_state output";
  }
  return "not a cotangent of any output of spec '" + spec.name + "'";
}

/// Checks the cotangents by name, dtype (f32/f64), shape and finiteness. One DataError naming the tensor.
void validateCotangents(const Spec& spec, const ReferenceProblem& shape, const TensorMap& cotangents) {
  const std::vector<TensorSlot> slots = cotangentSlots(spec, shape);
  std::string accepted;
  for (const TensorSlot& s : slots) accepted += (accepted.empty() ? "" : ", ") + s.name;
  for (const auto& kv : cotangents) {
    bool known = false;
    for (const TensorSlot& s : slots) known = known || s.name == kv.first;
    if (!known) failCotangent(kv.first, "unexpected: " + whyNotAccepted(spec, kv.first) + "; accepted: " + accepted);
  }
  for (const TensorSlot& s : slots) {
    auto it = cotangents.find(s.name);
    if (it == cotangents.end()) {
      if (s.required) failCotangent(s.name, "missing required cotangent " + s.layout + " = " + shapeToString(s.shape));
      continue;
    }
    const Tensor& t = it->second;
    if (t.dtype() != ScalarType::F32 && t.dtype() != ScalarType::F64) {
      failCotangent(s.name, std::string("expected dtype f32 or f64, got ") + toString(t.dtype()));
    }
    if (t.shape() != s.shape) {
      failCotangent(s.name, "expected shape " + s.layout + " = " + shapeToString(s.shape) + " (" + s.meaning +
                                "), got " + t.shapeString());
    }
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      if (!std::isfinite(t.get(i))) {
        std::ostringstream os;
        os << "expected finite values, got " << t.get(i) << " at flat index " << i;
        failCotangent(s.name, os.str());
      }
    }
  }
}

std::vector<double> doublesOf(const TensorMap& in, const char* name) {
  auto it = in.find(name);
  return it == in.end() ? std::vector<double>() : it->second.toDoubles();
}

refgrad::Problem loadProblem(const ReferenceProblem& shape, const ReferenceInputs& in, const TensorMap& ct) {
  refgrad::Problem p;
  p.s = shape;
  p.q = doublesOf(in, "q");
  p.k = doublesOf(in, "k");
  p.v = doublesOf(in, "v");
  p.g = doublesOf(in, "g");
  p.beta = doublesOf(in, "beta");
  p.pg = doublesOf(in, "precond_g");
  p.pb = doublesOf(in, "precond_beta");
  p.pc = doublesOf(in, "precond_center");
  p.s0 = doublesOf(in, "initial_state");
  p.p0 = doublesOf(in, "initial_precond_state");
  p.hasS0 = in.count("initial_state") > 0;
  p.hasP0 = in.count("initial_precond_state") > 0;
  p.dO = doublesOf(ct, "do");
  p.dSfinal = doublesOf(ct, "dfinal_state");
  p.dPfinal = doublesOf(ct, "dfinal_precond_state");
  return p;
}

/// The sequences of the problem: batch rows, or the spans of cu_seqlens (tokens past cu_seqlens[N], if
/// any, belong to none and keep zero gradients).
std::vector<refgrad::SequenceSpan> sequences(const ReferenceProblem& s) {
  std::vector<refgrad::SequenceSpan> out;
  for (std::int64_t n = 0; n < s.numSeqs(); ++n) {
    refgrad::SequenceSpan q;
    q.n = n;
    if (s.cu_seqlens.empty()) {
      q.b = n;
      q.t1 = s.seq_len;
    } else {
      q.t0 = s.cu_seqlens[static_cast<std::size_t>(n)];
      q.t1 = s.cu_seqlens[static_cast<std::size_t>(n) + 1];
    }
    out.push_back(q);
  }
  return out;
}

}  // namespace

TensorMap runReferenceBackward(const Spec& spec, const ReferenceInputs& inputs, const TensorMap& cotangents) {
  const ReferenceProblem shape = validateReferenceInputs(spec, inputs);
  validateCotangents(spec, shape, cotangents);
  if (householderSteps(spec) > 1) return refgrad::stepSequenceBackward(spec, inputs, cotangents);
  const refgrad::Problem p = loadProblem(shape, inputs, cotangents);

  // One zero-filled gradient per floating-point input that was given.
  refgrad::Gradients gr;
  const std::vector<std::pair<std::string, std::vector<double>*>> named = {
      {"q", &gr.dq},
      {"k", &gr.dk},
      {"v", &gr.dv},
      {"g", &gr.dg},
      {"beta", &gr.dbeta},
      {"precond_g", &gr.dpg},
      {"precond_beta", &gr.dpb},
      {"precond_center", &gr.dpc},
      {"initial_state", &gr.ds0},
      {"initial_precond_state", &gr.dp0},
  };
  for (auto& [name, buf] : named) {
    auto it = inputs.find(name);
    if (it != inputs.end()) buf->assign(static_cast<std::size_t>(it->second.numel()), 0.0);
  }

  for (const refgrad::SequenceSpan& seq : sequences(shape)) {
    for (std::int64_t h = 0; h < shape.heads_qk; ++h) {
      const refgrad::KeyHeadTape tape = refgrad::recordKeyHead(spec, p, seq, h);
      refgrad::KeyHeadAdjoint adj(tape.qhat.size());
      for (std::int64_t r = 0; r < p.ratio(); ++r) {
        refgrad::memoryBackward(spec, p, seq, h * p.ratio() + r, tape, adj, gr);  // value heads of the group
      }
      refgrad::keyHeadBackward(spec, p, seq, h, tape, adj, gr);
    }
  }

  TensorMap out;
  for (auto& [name, buf] : named) {
    auto it = inputs.find(name);
    if (it != inputs.end()) out.emplace("d" + name, Tensor::fromDoubles(ScalarType::F64, it->second.shape(), *buf));
  }
  return out;
}

}  // namespace dgps
