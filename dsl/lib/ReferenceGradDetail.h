// Internal pieces of the reference gradients (ReferenceGrad.h; formulas in docs/backward.md). Private to
// dgps_dsl: the inputs and cotangents as doubles, the forward record of one key head along one sequence
// (its "tape"), and the three adjoints the backward is made of:
//   ReferenceGradMemory.cpp   the memory recurrence of one value head (checkpointed reverse sweep)
//   ReferenceGradPrecond.cpp  the key-head quantities: l2 normalisation, preconditioner, read/write keys
//   ReferenceGrad.cpp         validation of the cotangents and the loop over sequences and heads
//   ReferenceGradSteps.cpp    several Householder steps per token, through the single-step backward
#pragma once

#include <cstdint>
#include <vector>

#include "dgps/dsl/Reference.h"

namespace dgps::refgrad {

/// The forward inputs and the cotangents as doubles, with the index arithmetic of the FLA layouts.
/// Absent optional tensors are empty vectors.
struct Problem {
  ReferenceProblem s;
  std::vector<double> q, k, v, g, beta, pg, pb, pc, s0, p0;
  bool hasS0 = false, hasP0 = false;
  std::vector<double> dO, dSfinal, dPfinal;  ///< cotangents of o, final_state, final_precond_state

  std::int64_t ratio() const { return s.heads_v / s.heads_qk; }
  /// Offset of the K-vector of (b, t, key head h) in q, k.
  std::int64_t qk(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return ((b * s.seq_len + t) * s.heads_qk + h) * s.key_dim;
  }
  /// Offset of the V-vector of (b, t, value head hv) in v, o.
  std::int64_t vIdx(std::int64_t b, std::int64_t t, std::int64_t hv) const {
    return ((b * s.seq_len + t) * s.heads_v + hv) * s.value_dim;
  }
  /// Offset of the scalar of (b, t, value head hv) in g (scalar decay) and beta.
  std::int64_t perV(std::int64_t b, std::int64_t t, std::int64_t hv) const {
    return (b * s.seq_len + t) * s.heads_v + hv;
  }
  /// Offset of the scalar of (b, t, key head h) in precond_g, precond_beta.
  std::int64_t perH(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return (b * s.seq_len + t) * s.heads_qk + h;
  }
};

/// Gradients in the layouts of the inputs they belong to (zero-filled; empty when the input is absent).
struct Gradients {
  std::vector<double> dq, dk, dv, dg, dbeta, dpg, dpb, dpc, ds0, dp0;
};

/// Which tokens of which batch row form sequence n.
struct SequenceSpan {
  std::int64_t n = 0, b = 0, t0 = 0, t1 = 0;
  std::int64_t length() const { return t1 - t0; }
};

/// The forward quantities of one key head along one sequence, token j = t − t0 in [0, L). Vectors of K
/// per token, stored row-major [L, K]. They are shared by the value heads of the GVA group.
struct KeyHeadTape {
  std::int64_t L = 0, K = 0;
  std::vector<double> qhat, khat;  ///< q̂ (scale included) and k̂
  std::vector<double> rq, rk;      ///< [L] (Σx² + l2norm_eps)^{-1/2} of q and k (1 without qk_l2norm)
  std::vector<double> P;           ///< preconditioner P_t (empty without a preconditioner)
  std::vector<double> state;       ///< [L + 1, K] preconditioner state before token j (row j); row L is final
  std::vector<double> kw, kr, qr;  ///< write key, read key, read query

  const double* row(const std::vector<double>& x, std::int64_t j) const { return x.data() + j * K; }
};

/// Adjoints of the tape's read/write vectors, summed over the value heads of the group, [L, K] each.
struct KeyHeadAdjoint {
  std::vector<double> dkw, dkr, dqr;
  explicit KeyHeadAdjoint(std::size_t n) : dkw(n, 0.0), dkr(n, 0.0), dqr(n, 0.0) {}
};

// ---- ReferenceGradPrecond.cpp -------------------------------------------------------------------

/// Runs the key-head part of the forward (normalisation, preconditioner, read/write keys) for key head h
/// along `seq`, recording what the adjoint needs.
KeyHeadTape recordKeyHead(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t h);

/// The reverse of recordKeyHead: from the adjoints of the read/write vectors (summed over the group) to
/// dq, dk, and the preconditioner's gradients (dprecond_g, dprecond_beta, dprecond_center,
/// dinitial_precond_state, and dbeta for hypergrad_ogd), accumulated into `out`.
void keyHeadBackward(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t h,
                     const KeyHeadTape& tape, const KeyHeadAdjoint& adj, Gradients& out);

// ---- ReferenceGradMemory.cpp --------------------------------------------------------------------

/// The memory recurrence of value head hv along `seq`, forward (to rebuild its states) and in reverse:
/// writes dv, dg, dbeta (the write's share) and dinitial_state into `out`, and adds the adjoints of the
/// key head's read/write vectors into `adj`.
void memoryBackward(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t hv,
                    const KeyHeadTape& tape, KeyHeadAdjoint& adj, Gradients& out);

// ---- ReferenceGradSteps.cpp ---------------------------------------------------------------------

/// runReferenceBackward for solve.steps = n_h > 1 on validated inputs and cotangents: the single-step
/// backward on the step sequence (T·n_h rows; g on each token's first step, q and do on its last), with
/// dq and dg gathered back to token rows. Same names, shapes and dtype (f64) as runReferenceBackward.
TensorMap stepSequenceBackward(const Spec& spec, const ReferenceInputs& inputs, const TensorMap& cotangents);

}  // namespace dgps::refgrad
