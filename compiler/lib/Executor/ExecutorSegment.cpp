// The float64 interpreter of the sequence-parallel state-pass ops (ChunkSegmentOps.td, docs/math.md §8).
// Each op runs its stages the way the kernels would: per segment independently (summaries, reruns), and
// the fold through dsl's SegmentScan.h, the same code the runtime's launcher will use.
#include "Interpreter.h"

namespace dgps::exec {

using dgps::segment::FoldShape;
using dgps::segment::Segment;

const std::vector<Interpreter::SegmentRef>& Interpreter::segments() const {
  if (segmentsBuilt_) return segments_;
  int64_t L = 0;
  if (segmentOptions_.segmentChunks) {
    L = *segmentOptions_.segmentChunks;
  } else if (auto a = fn_->getAttrOfType<IntegerAttr>(kSegmentChunksAttr)) {
    L = a.getInt();
  } else {
    int64_t longest = 0, run = 0, current = -1;
    for (const ChunkRef& c : chunks_) {
      run = c.n == current ? run + 1 : 1;
      current = c.n;
      longest = std::max(longest, run);
    }
    segment::SegmentRuleInputs rule;
    rule.chunksPerSeq = longest;
    rule.parallelWork = N_ * HV_;
    rule.smCount = segmentOptions_.smCount;
    rule.K = K_, rule.C = C_;
    L = segment::chooseSegmentChunks(rule);
  }
  if (L < 1) throw ExecError("segment length: expected >= 1 chunk, got " + std::to_string(L));
  // Chunks of one sequence are consecutive in chunks_; cut every L chunks and at every sequence start.
  const int64_t rows = cu_ ? 1 : std::max<int64_t>(B_, 1);
  std::vector<std::vector<SegmentRef>> perRow(static_cast<size_t>(rows));
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const ChunkRef& c = chunks_[i];
    std::vector<SegmentRef>& row = perRow[static_cast<size_t>(c.b)];
    if (row.empty() || row.back().n != c.n || row.back().count == L)
      row.push_back({c.n, static_cast<int64_t>(i), 0, 0});
    ++row.back().count;
  }
  // Every row of a fixed-length batch has the same number of segments: slot = b · NS + j.
  for (int64_t b = 0; b < rows; ++b)
    for (SegmentRef s : perRow[static_cast<size_t>(b)]) {
      s.slot = static_cast<int64_t>(segments_.size());
      segments_.push_back(s);
    }
  segmentsBuilt_ = true;
  return segments_;
}

std::vector<Segment> Interpreter::foldSegmentsList() const {
  std::vector<Segment> out;
  for (const SegmentRef& s : segments()) {
    const ChunkRef& first = chunks_[static_cast<size_t>(s.first)];
    const ChunkRef& last = chunks_[static_cast<size_t>(s.first + s.count - 1)];
    out.push_back({s.n, first.b, first.t0, last.t0 + last.len});
  }
  return out;
}

bool Interpreter::runSegmentOp(Operation* op) {
  return llvm::TypeSwitch<Operation*, bool>(op)
      .Case([&](SegmentSummaryOp o) { return segmentSummary(o), true; })
      .Case([&](SegmentFoldOp o) { return segmentFold(o), true; })
      .Case([&](SegmentStatePassOp o) { return segmentStatePass(o), true; })
      .Case([&](AccumSegmentPassOp o) { return accumSegmentPass(o), true; })
      .Case([&](HypergradSegmentPassOp o) { return hypergradSegmentPass(o), true; })
      .Default([](Operation*) { return false; });
}

void Interpreter::chunkStep(const ChunkRef& c, int64_t hv, const Array* w, const Array* u, const Array& kw,
                            const Array* G, std::vector<double>& X, int64_t width, std::vector<double>& vn) const {
  const int64_t h = keyHead(hv);
  vn.assign(static_cast<size_t>(c.len * width), 0.0);
  for (int64_t i = 0; i < c.len; ++i) {  // v_new = U − W X
    const int64_t ti = tok(c.b, c.t0 + i);
    double* vi = &vn[static_cast<size_t>(i * width)];
    if (u) std::copy_n(row(*u, ti, hv, HV_, V_), width, vi);
    if (!w) continue;
    const double* wi = row(*w, ti, hv, HV_, K_);
    for (int64_t d = 0; d < K_; ++d)
      for (int64_t e = 0; e < width; ++e) vi[e] -= wi[d] * X[d * width + e];
  }
  const int64_t tl = tok(c.b, c.t0 + c.len - 1);
  for (int64_t d = 0; d < K_; ++d) {  // X ← D_C X + (e^{G_C − G} ⊙ K̃)ᵀ v_new
    const double decay = std::exp(gateAt(G, tl, hv, d));
    for (int64_t e = 0; e < width; ++e) X[d * width + e] *= decay;
  }
  for (int64_t i = 0; i < c.len; ++i) {
    const int64_t ti = tok(c.b, c.t0 + i);
    const double* ki = row(kw, ti, h, H_, K_);
    const double* vi = &vn[static_cast<size_t>(i * width)];
    for (int64_t d = 0; d < K_; ++d) {
      const double f = ki[d] * std::exp(gateAt(G, tl, hv, d) - gateAt(G, ti, hv, d));
      for (int64_t e = 0; e < width; ++e) X[d * width + e] += f * vi[e];
    }
  }
}

void Interpreter::segmentSummary(SegmentSummaryOp o) {
  const Array *w = getOpt(o.getW()), &u = get(o.getU()), &kw = get(o.getWriteKey()), *G = getOpt(o.getGate());
  ArrayPtr ext = make(o.getExt().getType()), trans = make(o.getTrans().getType());
  const int64_t KV = K_ * V_, KK = K_ * K_;
  std::vector<double> E, M, vn;
  for (const SegmentRef& s : segments())  // independent segments: the parallel dimension of the kernel
    for (int64_t hv = 0; hv < HV_; ++hv) {
      E.assign(static_cast<size_t>(KV), 0.0);
      M.assign(static_cast<size_t>(KK), 0.0);
      for (int64_t d = 0; d < K_; ++d) M[d * K_ + d] = 1.0;
      for (int64_t i = 0; i < s.count; ++i) {
        const ChunkRef& c = chunks_[static_cast<size_t>(s.first + i)];
        chunkStep(c, hv, w, &u, kw, G, E, V_, vn);
        chunkStep(c, hv, w, nullptr, kw, G, M, K_, vn);
      }
      std::copy(E.begin(), E.end(), ext->data.begin() + (s.slot * HV_ + hv) * KV);
      std::copy(M.begin(), M.end(), trans->data.begin() + (s.slot * HV_ + hv) * KK);
    }
  set(o.getExt(), ext);
  set(o.getTrans(), trans);
}

void Interpreter::segmentFold(SegmentFoldOp o) {
  const Array &ext = get(o.getExt()), &trans = get(o.getTrans()), *init = getOpt(o.getInit());
  ArrayPtr start = make(o.getStart().getType()), fin = make(o.getFinal().getType());
  try {
    segment::foldSegments<double>(foldSegmentsList(), FoldShape{N_, HV_, K_, V_, false}, trans.data.data(),
                                  ext.data.data(), init ? init->data.data() : nullptr, start->data.data(),
                                  fin->data.data());
  } catch (const std::invalid_argument& e) {
    throw ExecError(std::string("segment_fold: ") + e.what());
  }
  set(o.getStart(), start);
  set(o.getFinal(), fin);
}

void Interpreter::segmentStatePass(SegmentStatePassOp o) {
  const Array *w = getOpt(o.getW()), &u = get(o.getU()), &kw = get(o.getWriteKey()), *G = getOpt(o.getGate());
  const Array& start = get(o.getStart());
  ArrayPtr vnew = make(o.getVNew().getType()), states = make(o.getStates().getType());
  const int64_t KV = K_ * V_;
  std::vector<double> X, vn;
  for (const SegmentRef& s : segments())
    for (int64_t hv = 0; hv < HV_; ++hv) {
      X.assign(start.data.begin() + (s.slot * HV_ + hv) * KV, start.data.begin() + (s.slot * HV_ + hv + 1) * KV);
      for (int64_t i = 0; i < s.count; ++i) {
        const ChunkRef& c = chunks_[static_cast<size_t>(s.first + i)];
        std::copy(X.begin(), X.end(), states->data.begin() + (c.slot * HV_ + hv) * KV);
        chunkStep(c, hv, w, &u, kw, G, X, V_, vn);
        for (int64_t t = 0; t < c.len; ++t)
          std::copy_n(&vn[static_cast<size_t>(t * V_)], V_, row(*vnew, tok(c.b, c.t0 + t), hv, HV_, V_));
      }
    }
  set(o.getVNew(), vnew);
  set(o.getStates(), states);
}

void Interpreter::accumSegmentPass(AccumSegmentPassOp o) {
  const Array &sum = get(o.getSum()), &logDecay = get(o.getLogDecay()), *init = getOpt(o.getInit());
  ArrayPtr start = make(o.getStart().getType()), fin = make(o.getFinal().getType());
  const std::vector<SegmentRef>& segs = segments();
  // 1. Per segment and key head, in parallel: the decay product (diagonal M, one value per channel since
  //    the accumulator's gate is per head) and the accumulator from zero.
  std::vector<double> trans(segs.size() * H_ * K_), ext(segs.size() * H_ * K_);
  for (const SegmentRef& s : segs)
    for (int64_t h = 0; h < H_; ++h) {
      double logGamma = 0;
      double* E = &ext[(s.slot * H_ + h) * K_];
      for (int64_t i = 0; i < s.count; ++i) {
        const ChunkRef& c = chunks_[static_cast<size_t>(s.first + i)];
        const double gamma = std::exp(logDecay.data[c.slot * H_ + h]);
        for (int64_t d = 0; d < K_; ++d) E[d] = gamma * E[d] + sum.data[(c.slot * H_ + h) * K_ + d];
        logGamma += logDecay.data[c.slot * H_ + h];
      }
      std::fill_n(&trans[(s.slot * H_ + h) * K_], K_, std::exp(logGamma));
    }
  // 2. The fold over segments.
  std::vector<double> segStart(ext.size());
  try {
    segment::foldSegments<double>(foldSegmentsList(), FoldShape{N_, H_, K_, 1, true}, trans.data(), ext.data(),
                                  init ? init->data.data() : nullptr, segStart.data(), fin->data.data());
  } catch (const std::invalid_argument& e) {
    throw ExecError(std::string("accum_segment_pass: ") + e.what());
  }
  // 3. Per segment, in parallel: the chunk-start states from the segment's start.
  std::vector<double> A(static_cast<size_t>(K_));
  for (const SegmentRef& s : segs)
    for (int64_t h = 0; h < H_; ++h) {
      std::copy_n(&segStart[(s.slot * H_ + h) * K_], K_, A.begin());
      for (int64_t i = 0; i < s.count; ++i) {
        const ChunkRef& c = chunks_[static_cast<size_t>(s.first + i)];
        std::copy(A.begin(), A.end(), start->data.begin() + (c.slot * H_ + h) * K_);
        const double gamma = std::exp(logDecay.data[c.slot * H_ + h]);
        for (int64_t d = 0; d < K_; ++d) A[d] = gamma * A[d] + sum.data[(c.slot * H_ + h) * K_ + d];
      }
    }
  set(o.getStart(), start);
  set(o.getFinal(), fin);
}

void Interpreter::hypergradSegmentPass(HypergradSegmentPassOp o) {
  HypergradParams p = paramsOf(o);
  if (p.lo || p.hi) throw ExecError("hypergrad_segment_pass: a clamped step has no affine segment summary");
  const Array &key = get(o.getKey()), *gain = getOpt(o.getGain()), *retention = getOpt(o.getRetention()),
              *init = getOpt(o.getInit());
  ArrayPtr start = make(o.getStart().getType()), coef = make(o.getCoef().getType()),
           fin = make(o.getFinal().getType());
  const std::vector<SegmentRef>& segs = segments();
  const int64_t KK = K_ * K_;
  // 1. Per segment and key head, in parallel: d_end = M d_start + e with
  //    M = Π_t (r_t I − c_t u_t u_tᵀ), c_t = η β_t² / ‖k_t‖², and e the scan from d = 0
  //    (docs/math.md §5.2, §8.3).
  std::vector<double> trans(segs.size() * H_ * KK), ext(segs.size() * H_ * K_), uM(static_cast<size_t>(K_));
  for (const SegmentRef& s : segs)
    for (int64_t h = 0; h < H_; ++h) {
      double* M = &trans[(s.slot * H_ + h) * KK];
      double* e = &ext[(s.slot * H_ + h) * K_];
      for (int64_t d = 0; d < K_; ++d) M[d * K_ + d] = 1.0;
      for (int64_t i = 0; i < s.count; ++i) {
        const ChunkRef& c = chunks_[static_cast<size_t>(s.first + i)];
        for (int64_t t = 0; t < c.len; ++t) {
          const int64_t bt = tok(c.b, c.t0 + t);
          const double* k = row(key, bt, h, H_, K_);
          const double r = std::exp(headScalar(retention, bt, h, 0.0)), beta = hypergradGain(gain, bt, h);
          double kk = 0, ue = 0;
          for (int64_t x = 0; x < K_; ++x) kk += k[x] * k[x];
          const double cStep = kk > 0 ? p.eta * beta * beta / kk : 0.0, eStep = kk > 0 ? p.eta * beta / kk : 0.0;
          std::fill(uM.begin(), uM.end(), 0.0);  // uᵀ M and uᵀ e before the update
          for (int64_t x = 0; x < K_; ++x) {
            const double ux = k[x] * k[x];
            ue += ux * e[x];
            for (int64_t y = 0; y < K_; ++y) uM[y] += ux * M[x * K_ + y];
          }
          for (int64_t x = 0; x < K_; ++x) {
            const double ux = k[x] * k[x];
            e[x] = r * e[x] - cStep * ux * ue + eStep * ux;
            for (int64_t y = 0; y < K_; ++y) M[x * K_ + y] = r * M[x * K_ + y] - cStep * ux * uM[y];
          }
        }
      }
    }
  // 2. The fold over segments from init (or d_init in every channel).
  std::vector<double> d0(static_cast<size_t>(N_ * H_ * K_), p.init), segStart(ext.size());
  if (init) d0 = init->data;
  try {
    segment::foldSegments<double>(foldSegmentsList(), FoldShape{N_, H_, K_, 1, false}, trans.data(), ext.data(),
                                  d0.data(), segStart.data(), fin->data.data());
  } catch (const std::invalid_argument& e) {
    throw ExecError(std::string("hypergrad_segment_pass: ") + e.what());
  }
  // 3. Per segment, in parallel: the token-by-token scan from the folded start, for the chunk-start states
  //    and the step coefficients the chunk kernels rebuild d from.
  std::vector<double> d(static_cast<size_t>(K_));
  for (const SegmentRef& s : segs)
    for (int64_t h = 0; h < H_; ++h) {
      std::copy_n(&segStart[(s.slot * H_ + h) * K_], K_, d.begin());
      for (int64_t i = 0; i < s.count; ++i) {
        const ChunkRef& c = chunks_[static_cast<size_t>(s.first + i)];
        std::copy(d.begin(), d.end(), start->data.begin() + (c.slot * H_ + h) * K_);
        for (int64_t t = 0; t < c.len; ++t) {
          const int64_t bt = tok(c.b, c.t0 + t);
          const double* k = row(key, bt, h, H_, K_);
          const double cf = stepCoef(d, k, hypergradGain(gain, bt, h), p);
          coef->data[bt * H_ + h] = cf;
          hypergradUpdate(d, k, std::exp(headScalar(retention, bt, h, 0.0)), cf, p);
        }
      }
    }
  set(o.getStart(), start);
  set(o.getCoef(), coef);
  set(o.getFinal(), fin);
}

}  // namespace dgps::exec
