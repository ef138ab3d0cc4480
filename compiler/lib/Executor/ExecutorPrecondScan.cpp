// The float64 interpreter of the chunked hypergradient scan (ChunkPrecondScanOps.td, docs/math.md §5.2):
// the summary per chunk independently (the parallel dimension of its kernel), the pass over each
// sequence's chunks in order. A direct transcription of the ops' formulas: no token-by-token scan here,
// so comparing with hypergrad_pass checks the algebra.
#include "Interpreter.h"

namespace dgps::exec {

bool Interpreter::runPrecondScanOp(Operation* op) {
  return llvm::TypeSwitch<Operation*, bool>(op)
      .Case([&](HypergradChunkSummaryOp o) { return hypergradChunkSummary(o), true; })
      .Case([&](HypergradChunkPassOp o) { return hypergradChunkPass(o), true; })
      .Default([](Operation*) { return false; });
}

void Interpreter::hypergradChunkSummary(HypergradChunkSummaryOp o) {
  const Array &key = get(o.getKey()), *gain = getOpt(o.getGain()), *retention = getOpt(o.getRetention());
  const double eta = o.getEta().convertToDouble();
  ArrayPtr readRows = make(o.getReadRows().getType()), base = make(o.getBase().getType()),
           writeRows = make(o.getWriteRows().getType()), logDecay = make(o.getLogDecay().getType());
  std::vector<double> beta, kappa, cum, T, u;  // per token of the chunk; cum[i] = Σ_{l<i} ρ_l (so L_i = e^{cum_i})
  for (const ChunkRef& c : chunks_)
    for (int64_t h = 0; h < H_; ++h) {
      const int64_t n = c.len;
      beta.assign(n, 0.0), kappa.assign(n, 0.0), cum.assign(n + 1, 0.0), u.assign(n * K_, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t bt = tok(c.b, c.t0 + i);
        const double* k = row(key, bt, h, H_, K_);
        double kk = 0;
        for (int64_t x = 0; x < K_; ++x) {
          u[i * K_ + x] = k[x] * k[x];
          kk += u[i * K_ + x];
        }
        beta[i] = hypergradGain(gain, bt, h);
        kappa[i] = kk > 0 ? eta * beta[i] / kk : 0.0;  // a zero key takes no step
        cum[i + 1] = cum[i] + headScalar(retention, bt, h, 0.0);
      }
      auto dotU = [&](int64_t i, int64_t j) {
        double s = 0;
        for (int64_t x = 0; x < K_; ++x) s += u[i * K_ + x] * u[j * K_ + x];
        return s;
      };
      // 𝒯 = (I + 𝒢)^{-1} by forward substitution, 𝒢_ij = β_i ⟨u_i, u_j⟩ κ_j e^{cum_i − cum_{j+1}} (i > j).
      T.assign(n * n, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        T[i * n + i] = 1.0;
        for (int64_t j = 0; j < i; ++j) {
          const double g = beta[i] * dotU(i, j) * kappa[j] * std::exp(cum[i] - cum[j + 1]);
          // Row i of (I + 𝒢) 𝒯 = I: 𝒯_i = e_i − Σ_{j<i} 𝒢_ij 𝒯_j, and row j of 𝒯 is zero past column j.
          for (int64_t m = 0; m <= j; ++m) T[i * n + m] -= g * T[j * n + m];
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t bt = tok(c.b, c.t0 + j);
        double* rr = row(*readRows, bt, h, H_, K_);
        double a = 0;
        for (int64_t i = 0; i <= j; ++i) {
          a += T[j * n + i];
          const double f = T[j * n + i] * beta[i] * std::exp(cum[i]);
          for (int64_t x = 0; x < K_; ++x) rr[x] += f * u[i * K_ + x];
        }
        for (int64_t x = 0; x < K_; ++x) rr[x] *= kappa[j];
        base->data[bt * H_ + h] = kappa[j] * a;
        const double carry = std::exp(cum[n] - cum[j + 1]);
        double* wr = row(*writeRows, bt, h, H_, K_);
        for (int64_t x = 0; x < K_; ++x) wr[x] = carry * u[j * K_ + x];
      }
      logDecay->data[c.slot * H_ + h] = cum[n];
    }
  set(o.getReadRows(), readRows);
  set(o.getBase(), base);
  set(o.getWriteRows(), writeRows);
  set(o.getLogDecay(), logDecay);
}

void Interpreter::hypergradChunkPass(HypergradChunkPassOp o) {
  const Array &readRows = get(o.getReadRows()), &base = get(o.getBase()), &writeRows = get(o.getWriteRows()),
              &logDecay = get(o.getLogDecay()), *init = getOpt(o.getInit());
  const double d0 = o.getDInit().convertToDouble();
  ArrayPtr start = make(o.getStart().getType()), coef = make(o.getCoef().getType()),
           fin = make(o.getFinal().getType());
  std::vector<double> d(static_cast<size_t>(K_)), next(d.size());
  for (int64_t n = 0; n < N_; ++n)
    for (int64_t h = 0; h < H_; ++h) {
      for (int64_t x = 0; x < K_; ++x) d[x] = init ? init->data[(n * H_ + h) * K_ + x] : d0;
      for (const ChunkRef& c : chunks_) {
        if (c.n != n) continue;
        std::copy(d.begin(), d.end(), start->data.begin() + (c.slot * H_ + h) * K_);
        const double decay = std::exp(logDecay.data[c.slot * H_ + h]);
        for (int64_t x = 0; x < K_; ++x) next[x] = decay * d[x];
        for (int64_t j = 0; j < c.len; ++j) {
          const int64_t bt = tok(c.b, c.t0 + j);
          const double* rr = row(readRows, bt, h, H_, K_);
          double cf = base.data[bt * H_ + h];
          for (int64_t x = 0; x < K_; ++x) cf -= rr[x] * d[x];
          coef->data[bt * H_ + h] = cf;
          const double* wr = row(writeRows, bt, h, H_, K_);
          for (int64_t x = 0; x < K_; ++x) next[x] += cf * wr[x];
        }
        d.swap(next);
      }
      std::copy(d.begin(), d.end(), fin->data.begin() + (n * H_ + h) * K_);
    }
  set(o.getStart(), start);
  set(o.getCoef(), coef);
  set(o.getFinal(), fin);
}

}  // namespace dgps::exec
