// The adjoint ops of a derived backward (ChunkGradOps.td), float64, one member function per op. Each
// loops over chunks (or sequences, for the reverse scans) as the forward op does, and accumulates
// cotangents with += so that key-head results sum the value heads of their group (GVA).
#include "Interpreter.h"

namespace dgps::exec {

bool Interpreter::runGradOp(Operation* op) {
  bool handled = true;
  llvm::TypeSwitch<Operation*>(op)
      .Case([&](AddOp o) { addOp(o); })
      .Case([&](L2NormGradOp o) { l2normGrad(o); })
      .Case([&](GateCumsumGradOp o) { gateCumsumGrad(o); })
      .Case([&](KKTGradOp o) { kktGrad(o); })
      .Case([&](SolveTrilGradOp o) { solveTrilGrad(o); })
      .Case([&](WYRecomputeGradOp o) { wyRecomputeGrad(o); })
      .Case([&](GainScaleGradOp o) { gainScaleGrad(o); })
      .Case([&](StatePassGradOp o) { statePassGrad(o); })
      .Case([&](QKAttnGradOp o) { qkAttnGrad(o); })
      .Case([&](OutputGradOp o) { outputGrad(o); })
      .Case([&](AccumScanGradOp o) { accumScanGrad(o); })
      .Case([&](SquashApplyGradOp o) { squashApplyGrad(o); })
      .Case([&](HypergradScanGradOp o) { hypergradScanGrad(o); })
      .Default([&](Operation*) { handled = false; });
  return handled;
}

void Interpreter::addOp(AddOp o) {
  ArrayPtr r = make(o.getType());
  for (Value t : o.getTerms()) {
    const Array& a = get(t);
    for (size_t i = 0; i < r->data.size(); ++i) r->data[i] += a.data[i];
  }
  set(o, r);
}

// ---- prologue ----------------------------------------------------------------------------------

void Interpreter::l2normGrad(L2NormGradOp o) {
  const Array &x = get(o.getInput()), &dy = get(o.getDResult());
  ArrayPtr dx = make(o.getType());
  const int64_t w = x.sizes.back(), rows = static_cast<int64_t>(x.data.size()) / std::max<int64_t>(w, 1);
  const double eps = o.getEps().convertToDouble();
  for (int64_t i = 0; i < rows; ++i) {
    const double* xi = &x.data[i * w];
    const double* di = &dy.data[i * w];
    double ss = 0, yd = 0;
    for (int64_t d = 0; d < w; ++d) ss += xi[d] * xi[d];
    const double r = 1.0 / std::sqrt(ss + eps);
    for (int64_t d = 0; d < w; ++d) yd += xi[d] * r * di[d];
    for (int64_t d = 0; d < w; ++d) dx->data[i * w + d] = r * (di[d] - xi[d] * r * yd);
  }
  set(o, dx);
}

void Interpreter::gateCumsumGrad(GateCumsumGradOp o) {
  const Array& dG = get(o.getDCumsum());
  ArrayPtr dg = make(o.getType());
  const int64_t w = dG.dims.size() == 4 ? K_ : 1;
  for (const ChunkRef& c : chunks_)
    for (int64_t hv = 0; hv < HV_; ++hv)
      for (int64_t d = 0; d < w; ++d) {
        double acc = 0;
        for (int64_t i = c.len - 1; i >= 0; --i) {
          const int64_t at = (tok(c.b, c.t0 + i) * HV_ + hv) * w + d;
          acc += dG.data[at];
          dg->data[at] = acc;
        }
      }
  set(o, dg);
}

// ---- chunkwise WY ------------------------------------------------------------------------------

void Interpreter::kktGrad(KKTGradOp o) {
  const Array &kr = get(o.getReadKey()), &kw = get(o.getWriteKey()), &dA = get(o.getDKkt());
  const Array *beta = getOpt(o.getGain()), *G = getOpt(o.getGate());
  ArrayPtr dkr = make(o.getDReadKey().getType()), dkw = make(o.getDWriteKey().getType()),
           dbeta = make(o.getDGain().getType()), dG = make(o.getDGate().getType());
  for (const ChunkRef& c : chunks_)
    for (int64_t hv = 0; hv < HV_; ++hv) {
      const int64_t h = keyHead(hv);
      for (int64_t i = 0; i < c.len; ++i) {
        const int64_t ti = tok(c.b, c.t0 + i);
        const double bi = beta ? beta->data[ti * HV_ + hv] : 1.0;
        const double* ki = row(kr, ti, h, H_, K_);
        double* dki = row(*dkr, ti, h, H_, K_);
        for (int64_t j = 0; j < i; ++j) {
          const double a = dA.data[(ti * HV_ + hv) * C_ + j];
          const int64_t tj = tok(c.b, c.t0 + j);
          const double* kj = row(kw, tj, h, H_, K_);
          double* dkj = row(*dkw, tj, h, H_, K_);
          for (int64_t d = 0; d < K_; ++d) {
            const double e = std::exp(gateAt(G, ti, hv, d) - gateAt(G, tj, hv, d));
            const double prod = ki[d] * kj[d] * e;
            dbeta->data[ti * HV_ + hv] += a * prod;
            dki[d] += a * bi * kj[d] * e;
            dkj[d] += a * bi * ki[d] * e;
            addGate(*dG, ti, hv, d, a * bi * prod);
            addGate(*dG, tj, hv, d, -a * bi * prod);
          }
        }
      }
    }
  set(o.getDReadKey(), dkr);
  set(o.getDWriteKey(), dkw);
  set(o.getDGain(), dbeta);
  set(o.getDGate(), dG);
}

void Interpreter::solveTrilGrad(SolveTrilGradOp o) {
  const Array &T = get(o.getTril()), &dT = get(o.getDTril());
  ArrayPtr dA = make(o.getType());
  std::vector<double> M;
  for (const ChunkRef& c : chunks_)
    for (int64_t hv = 0; hv < HV_; ++hv) {
      const int64_t L = c.len;
      auto at = [&](int64_t i, int64_t j) { return (tok(c.b, c.t0 + i) * HV_ + hv) * C_ + j; };
      // M = d𝒯 𝒯ᵀ (only the lower triangle of d𝒯 is a cotangent of 𝒯's free entries), then
      // d𝒜_ij = −Σ_k 𝒯_ki M_kj for i > j.
      M.assign(static_cast<size_t>(L * L), 0.0);
      for (int64_t k = 0; k < L; ++k)
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t l = 0; l <= std::min(k, j); ++l) s += dT.data[at(k, l)] * T.data[at(j, l)];
          M[k * L + j] = s;
        }
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < i; ++j) {
          double s = 0;
          for (int64_t k = i; k < L; ++k) s += T.data[at(k, i)] * M[k * L + j];
          dA->data[at(i, j)] = -s;
        }
    }
  set(o, dA);
}

void Interpreter::wyRecomputeGrad(WYRecomputeGradOp o) {
  const Array &T = get(o.getTril()), &kr = get(o.getReadKey()), &v = get(o.getValue()), &dW = get(o.getDW()),
              &dU = get(o.getDU());
  const Array *beta = getOpt(o.getGain()), *G = getOpt(o.getGate());
  ArrayPtr dT = make(o.getDTril().getType()), dkr = make(o.getDReadKey().getType()),
           dv = make(o.getDValue().getType()), dbeta = make(o.getDGain().getType()),
           dG = make(o.getDGate().getType());
  for (const ChunkRef& c : chunks_)
    for (int64_t hv = 0; hv < HV_; ++hv) {
      const int64_t h = keyHead(hv);
      for (int64_t i = 0; i < c.len; ++i) {
        const int64_t ti = tok(c.b, c.t0 + i);
        const double* dwi = row(dW, ti, hv, HV_, K_);
        const double* dui = row(dU, ti, hv, HV_, V_);
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t tj = tok(c.b, c.t0 + j);
          const double tij = T.data[(ti * HV_ + hv) * C_ + j];
          const double bj = beta ? beta->data[tj * HV_ + hv] : 1.0;
          const double* kj = row(kr, tj, h, H_, K_);
          const double* vj = row(v, tj, hv, HV_, V_);
          double* dkj = row(*dkr, tj, h, H_, K_);
          double* dvj = row(*dv, tj, hv, HV_, V_);
          double xy = 0;
          for (int64_t d = 0; d < K_; ++d) {
            const double e = std::exp(gateAt(G, tj, hv, d));
            xy += dwi[d] * e * kj[d];
            dkj[d] += tij * bj * e * dwi[d];
            addGate(*dG, tj, hv, d, tij * bj * e * kj[d] * dwi[d]);
          }
          for (int64_t x = 0; x < V_; ++x) {
            xy += dui[x] * vj[x];
            dvj[x] += tij * bj * dui[x];
          }
          dT->data[(ti * HV_ + hv) * C_ + j] = bj * xy;
          dbeta->data[tj * HV_ + hv] += tij * xy;
        }
      }
    }
  set(o.getDTril(), dT);
  set(o.getDReadKey(), dkr);
  set(o.getDValue(), dv);
  set(o.getDGain(), dbeta);
  set(o.getDGate(), dG);
}

void Interpreter::gainScaleGrad(GainScaleGradOp o) {
  const Array &v = get(o.getValue()), &beta = get(o.getGain()), &dU = get(o.getDResult());
  ArrayPtr dv = make(o.getDValue().getType()), dbeta = make(o.getDGain().getType());
  for (int64_t bt = 0; bt < B_ * T_; ++bt)
    for (int64_t hv = 0; hv < HV_; ++hv)
      for (int64_t e = 0; e < V_; ++e) {
        const int64_t at = (bt * HV_ + hv) * V_ + e;
        dv->data[at] = beta.data[bt * HV_ + hv] * dU.data[at];
        dbeta->data[bt * HV_ + hv] += dU.data[at] * v.data[at];
      }
  set(o.getDValue(), dv);
  set(o.getDGain(), dbeta);
}

void Interpreter::statePassGrad(StatePassGradOp o) {
  const Array *w = getOpt(o.getW()), &kw = get(o.getWriteKey()), &vnew = get(o.getVNew()),
              &states = get(o.getStates()), &dvnewIn = get(o.getDVNew()), &dstates = get(o.getDStates()),
              &dfinal = get(o.getDFinal());
  const Array* G = getOpt(o.getGate());
  ArrayPtr dW = make(o.getDW().getType()), dU = make(o.getDU().getType()),
           dkw = make(o.getDWriteKey().getType()), dG = make(o.getDGate().getType()),
           dinit = make(o.getDInit().getType());
  const int64_t KV = K_ * V_;
  std::vector<double> dS(static_cast<size_t>(KV)), next(dS.size()), kbar(static_cast<size_t>(K_));
  for (int64_t hv = 0; hv < HV_; ++hv) {
    const int64_t h = keyHead(hv);
    // A sequence without tokens passes its final cotangent straight to its initial state.
    for (int64_t n = 0; n < N_; ++n)
      std::copy_n(dfinal.data.begin() + (n * HV_ + hv) * KV, KV, dinit->data.begin() + (n * HV_ + hv) * KV);
    int64_t current = -1;
    for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
      const ChunkRef& c = *it;
      if (c.n != current) {  // the last chunk of a sequence: dS starts at d_final
        current = c.n;
        std::copy_n(dfinal.data.begin() + (c.n * HV_ + hv) * KV, KV, dS.begin());
      }
      const double* S = &states.data[(c.slot * HV_ + hv) * KV];
      const int64_t tl = tok(c.b, c.t0 + c.len - 1);
      // dS ← e^{G_C} dS + d_states_c − Σ_i W_i dv_iᵀ; the decay's own gate cotangent first.
      for (int64_t d = 0; d < K_; ++d) {
        const double decay = std::exp(gateAt(G, tl, hv, d));
        double s = 0;
        for (int64_t e = 0; e < V_; ++e) {
          s += dS[d * V_ + e] * S[d * V_ + e];
          next[d * V_ + e] = decay * dS[d * V_ + e] + dstates.data[(c.slot * HV_ + hv) * KV + d * V_ + e];
        }
        addGate(*dG, tl, hv, d, decay * s);
      }
      for (int64_t i = 0; i < c.len; ++i) {
        const int64_t ti = tok(c.b, c.t0 + i);
        const double* ki = row(kw, ti, h, H_, K_);
        const double* vn = row(vnew, ti, hv, HV_, V_);
        double* dki = row(*dkw, ti, h, H_, K_);
        double* dv = row(*dU, ti, hv, HV_, V_);
        const double* dvIn = row(dvnewIn, ti, hv, HV_, V_);
        for (int64_t e = 0; e < V_; ++e) dv[e] = dvIn[e];
        for (int64_t d = 0; d < K_; ++d) {
          const double decay = std::exp(gateAt(G, tl, hv, d) - gateAt(G, ti, hv, d));
          kbar[d] = decay * ki[d];
          double sv = 0;  // (dS v_new_i)_d
          for (int64_t e = 0; e < V_; ++e) {
            sv += dS[d * V_ + e] * vn[e];
            dv[e] += kbar[d] * dS[d * V_ + e];
          }
          dki[d] += decay * sv;
          addGate(*dG, tl, hv, d, kbar[d] * sv);
          addGate(*dG, ti, hv, d, -kbar[d] * sv);
        }
        if (!w) continue;
        const double* wi = row(*w, ti, hv, HV_, K_);
        double* dwi = row(*dW, ti, hv, HV_, K_);
        for (int64_t d = 0; d < K_; ++d) {
          double s = 0;
          for (int64_t e = 0; e < V_; ++e) {
            s += dv[e] * S[d * V_ + e];
            next[d * V_ + e] -= wi[d] * dv[e];
          }
          dwi[d] = -s;
        }
      }
      dS.swap(next);
      // The first chunk of its sequence (chunks_ lists a sequence's chunks in order): dS is d_init.
      auto prev = std::next(it);
      if (prev == chunks_.rend() || prev->n != c.n)
        std::copy(dS.begin(), dS.end(), dinit->data.begin() + (c.n * HV_ + hv) * KV);
    }
  }
  set(o.getDW(), dW);
  set(o.getDU(), dU);
  set(o.getDWriteKey(), dkw);
  set(o.getDGate(), dG);
  set(o.getDInit(), dinit);
}

void Interpreter::qkAttnGrad(QKAttnGradOp o) {
  const Array &q = get(o.getQuery()), &kw = get(o.getWriteKey()), &dA = get(o.getDAttn());
  const Array* G = getOpt(o.getGate());
  const double scale = scaleOf(o.getScale());
  ArrayPtr dq = make(o.getDQuery().getType()), dkw = make(o.getDWriteKey().getType()),
           dG = make(o.getDGate().getType());
  for (const ChunkRef& c : chunks_)
    for (int64_t hv = 0; hv < HV_; ++hv) {
      const int64_t h = keyHead(hv);
      for (int64_t i = 0; i < c.len; ++i) {
        const int64_t ti = tok(c.b, c.t0 + i);
        const double* qi = row(q, ti, h, H_, K_);
        double* dqi = row(*dq, ti, h, H_, K_);
        for (int64_t j = 0; j <= i; ++j) {
          const double a = scale * dA.data[(ti * HV_ + hv) * C_ + j];
          const int64_t tj = tok(c.b, c.t0 + j);
          const double* kj = row(kw, tj, h, H_, K_);
          double* dkj = row(*dkw, tj, h, H_, K_);
          for (int64_t d = 0; d < K_; ++d) {
            const double e = std::exp(gateAt(G, ti, hv, d) - gateAt(G, tj, hv, d));
            dqi[d] += a * kj[d] * e;
            dkj[d] += a * qi[d] * e;
            addGate(*dG, ti, hv, d, a * qi[d] * kj[d] * e);
            addGate(*dG, tj, hv, d, -a * qi[d] * kj[d] * e);
          }
        }
      }
    }
  set(o.getDQuery(), dq);
  set(o.getDWriteKey(), dkw);
  set(o.getDGate(), dG);
}

void Interpreter::outputGrad(OutputGradOp o) {
  const Array &q = get(o.getQuery()), &vnew = get(o.getVNew()), &states = get(o.getStates()),
              &attn = get(o.getAttn()), &dO = get(o.getDO());
  const Array* G = getOpt(o.getGate());
  const double scale = scaleOf(o.getScale());
  ArrayPtr dq = make(o.getDQuery().getType()), dvnew = make(o.getDVNew().getType()),
           dstates = make(o.getDStates().getType()), dattn = make(o.getDAttn().getType()),
           dG = make(o.getDGate().getType());
  const int64_t KV = K_ * V_;
  for (const ChunkRef& c : chunks_)
    for (int64_t hv = 0; hv < HV_; ++hv) {
      const int64_t h = keyHead(hv);
      const double* S = &states.data[(c.slot * HV_ + hv) * KV];
      double* dS = &dstates->data[(c.slot * HV_ + hv) * KV];
      for (int64_t i = 0; i < c.len; ++i) {
        const int64_t ti = tok(c.b, c.t0 + i);
        const double* qi = row(q, ti, h, H_, K_);
        const double* doi = row(dO, ti, hv, HV_, V_);
        double* dqi = row(*dq, ti, h, H_, K_);
        for (int64_t d = 0; d < K_; ++d) {
          const double f = scale * std::exp(gateAt(G, ti, hv, d));
          double s = 0;
          for (int64_t e = 0; e < V_; ++e) {
            s += doi[e] * S[d * V_ + e];
            dS[d * V_ + e] += f * qi[d] * doi[e];
          }
          dqi[d] += f * s;
          addGate(*dG, ti, hv, d, f * qi[d] * s);
        }
        const double* ai = row(attn, ti, hv, HV_, C_);
        double* dai = row(*dattn, ti, hv, HV_, C_);
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t tj = tok(c.b, c.t0 + j);
          const double* vj = row(vnew, tj, hv, HV_, V_);
          double* dvj = row(*dvnew, tj, hv, HV_, V_);
          double s = 0;
          for (int64_t e = 0; e < V_; ++e) {
            s += doi[e] * vj[e];
            dvj[e] += ai[j] * doi[e];
          }
          dai[j] = s;
        }
      }
    }
  set(o.getDQuery(), dq);
  set(o.getDVNew(), dvnew);
  set(o.getDStates(), dstates);
  set(o.getDAttn(), dattn);
  set(o.getDGate(), dG);
}

// ---- ema_sq_squash preconditioner ----------------------------------------------------------------

void Interpreter::accumScanGrad(AccumScanGradOp o) {
  const Array &key = get(o.getKey()), &A = get(o.getAccum()), &dA = get(o.getDAccum()),
              &dfinal = get(o.getDFinal());
  const Array *gate = getOpt(o.getGate()), *gain = getOpt(o.getGain()), *init = getOpt(o.getInit());
  ArrayPtr dk = make(o.getDKey().getType()), dgate = make(o.getDGate().getType()),
           dgain = make(o.getDGain().getType()), dinit = make(o.getDInit().getType());
  std::vector<double> lambda(static_cast<size_t>(K_));
  std::vector<int64_t> tokens;
  for (int64_t n = 0; n < N_; ++n) {
    tokens.clear();
    for (const ChunkRef& c : chunks_)
      if (c.n == n)
        for (int64_t i = 0; i < c.len; ++i) tokens.push_back(tok(c.b, c.t0 + i));
    for (int64_t h = 0; h < H_; ++h) {
      std::copy_n(dfinal.data.begin() + (n * H_ + h) * K_, K_, lambda.begin());
      for (size_t x = tokens.size(); x-- > 0;) {
        const int64_t bt = tokens[x];
        const double gamma = std::exp(headScalar(gate, bt, h, 0.0)), ba = headScalar(gain, bt, h, 1.0);
        const double* k = row(key, bt, h, H_, K_);
        const double* dAt = row(dA, bt, h, H_, K_);
        const double* prev = x > 0 ? row(A, tokens[x - 1], h, H_, K_) : nullptr;
        double* dkt = row(*dk, bt, h, H_, K_);
        double sg = 0, sb = 0;
        for (int64_t d = 0; d < K_; ++d) {
          lambda[d] += dAt[d];
          const double before = prev ? prev[d] : (init ? init->data[(n * H_ + h) * K_ + d] : 0.0);
          dkt[d] = 2.0 * ba * k[d] * lambda[d];
          sb += lambda[d] * k[d] * k[d];
          sg += lambda[d] * before;
          lambda[d] *= gamma;
        }
        dgain->data[bt * H_ + h] = sb;
        dgate->data[bt * H_ + h] = gamma * sg;
      }
      std::copy(lambda.begin(), lambda.end(), dinit->data.begin() + (n * H_ + h) * K_);
    }
  }
  set(o.getDKey(), dk);
  set(o.getDGate(), dgate);
  set(o.getDGain(), dgain);
  set(o.getDInit(), dinit);
}

void Interpreter::squashApplyGrad(SquashApplyGradOp o) {
  const Array &t = get(o.getTarget()), &A = get(o.getAccum()), &center = get(o.getCenter()),
              &dy = get(o.getDResult());
  const double lnx = std::log(o.getX().convertToDouble()), eps = o.getEps().convertToDouble();
  ArrayPtr dt = make(o.getDTarget().getType()), dA = make(o.getDAccum().getType()),
           dc = make(o.getDCenter().getType());
  for (int64_t bt = 0; bt < B_ * T_; ++bt)
    for (int64_t h = 0; h < H_; ++h)
      for (int64_t d = 0; d < K_; ++d) {
        const int64_t at = (bt * H_ + h) * K_ + d;
        const double r = std::log(A.data[at] + eps) - center.data[h];
        const double M = squash(A.data[at], center.data[h], lnx, eps);
        const double onePlus = 1.0 + std::fabs(r);
        const double gr = dy.data[at] * t.data[at] * M * (-lnx) / (onePlus * onePlus);  // dy ⊙ ∂y/∂r
        dt->data[at] = dy.data[at] * M;
        dA->data[at] = gr / (A.data[at] + eps);
        dc->data[h] -= gr;
      }
  set(o.getDTarget(), dt);
  set(o.getDAccum(), dA);
  set(o.getDCenter(), dc);
}

// ---- hypergrad_ogd preconditioner ----------------------------------------------------------------

void Interpreter::hypergradScanGrad(HypergradScanGradOp o) {
  const HypergradParams p = paramsOf(o);
  const Array &key = get(o.getKey()), &diag = get(o.getDiag()), &dDiag = get(o.getDDiag()),
              &dfinal = get(o.getDFinal());
  const Array *gain = getOpt(o.getGain()), *retention = getOpt(o.getRetention()), *init = getOpt(o.getInit());
  ArrayPtr dk = make(o.getDKey().getType()), dgain = make(o.getDGain().getType()),
           dret = make(o.getDRetention().getType()), dinit = make(o.getDInitState().getType());
  std::vector<double> lambda(static_cast<size_t>(K_)), delta(lambda.size()), d0(lambda.size());
  std::vector<int64_t> tokens;
  for (int64_t n = 0; n < N_; ++n) {
    tokens.clear();
    for (const ChunkRef& c : chunks_)
      if (c.n == n)
        for (int64_t i = 0; i < c.len; ++i) tokens.push_back(tok(c.b, c.t0 + i));
    for (int64_t h = 0; h < H_; ++h) {
      for (int64_t i = 0; i < K_; ++i) d0[i] = init ? init->data[(n * H_ + h) * K_ + i] : p.init;
      std::copy_n(dfinal.data.begin() + (n * H_ + h) * K_, K_, lambda.begin());
      for (size_t x = tokens.size(); x-- > 0;) {
        const int64_t bt = tokens[x];
        // d before token t: diag holds it (pre) or the d after the previous token (post).
        const double* d = !p.post ? row(diag, bt, h, H_, K_) : x > 0 ? row(diag, tokens[x - 1], h, H_, K_) : d0.data();
        const double* k = row(key, bt, h, H_, K_);
        const double* dDt = row(dDiag, bt, h, H_, K_);
        if (p.post)
          for (int64_t i = 0; i < K_; ++i) lambda[i] += dDt[i];
        const double beta = hypergradGain(gain, bt, h), rho = std::exp(headScalar(retention, bt, h, 0.0));
        double kk = 0, du = 0, drho = 0, dcoef = 0;
        for (int64_t i = 0; i < K_; ++i) {
          kk += k[i] * k[i];
          du += d[i] * k[i] * k[i];
        }
        const double coef = kk > 0 ? p.eta * beta / kk * (1.0 - beta * du) : 0.0;  // as stepCoef
        for (int64_t i = 0; i < K_; ++i) {
          const double u = k[i] * k[i], xi = rho * d[i] + coef * u;
          // The clamp passes the gradient where x is inside [clamp_min, clamp_max] (a bound included).
          const bool inside = (!p.lo || !(xi < *p.lo)) && (!p.hi || !(*p.hi < xi));
          delta[i] = inside ? lambda[i] : 0.0;
          drho += delta[i] * d[i];
          dcoef += delta[i] * u;
        }
        const bool step = kk > 0;
        const double e = step ? -dcoef * p.eta * beta * beta / kk : 0.0;  // ∂L/∂⟨d, u⟩
        const double f = step ? -dcoef * coef / kk : 0.0;                  // ∂L/∂‖k̂‖²
        dret->data[bt * H_ + h] = rho * drho;
        if (gain) dgain->data[bt * HV_ + h] = step ? dcoef * p.eta * (1.0 - 2.0 * beta * du) / kk : 0.0;
        double* dkt = row(*dk, bt, h, H_, K_);
        for (int64_t i = 0; i < K_; ++i) {
          const double u = k[i] * k[i];
          dkt[i] = 2.0 * k[i] * (coef * delta[i] + f + e * d[i]);
          lambda[i] = rho * delta[i] + e * u;
        }
        if (!p.post)
          for (int64_t i = 0; i < K_; ++i) lambda[i] += dDt[i];
      }
      std::copy(lambda.begin(), lambda.end(), dinit->data.begin() + (n * H_ + h) * K_);
    }
  }
  set(o.getDKey(), dk);
  set(o.getDGain(), dgain);
  set(o.getDRetention(), dret);
  set(o.getDInitState(), dinit);
}

}  // namespace dgps::exec
