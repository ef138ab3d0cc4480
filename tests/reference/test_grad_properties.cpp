// Reference gradients on random points of the spec space (finite differences on sampled elements) and
// the invariants a correct backward must keep: split/resume through the states, varlen equals separate
// runs, reductions between models (PGDN with x = 1 is GDN, OSDN with η = 0 and d = 1 is DeltaNet), and
// padding rows past cu_seqlens[N].
#include <gtest/gtest.h>

#include <set>

#include "GradTestUtil.h"

namespace dgps::test {
namespace {

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
bool coin(std::mt19937_64& rng) { return rng() % 2 == 0; }

/// A random spec the reference runs, over every axis the gradients must cover. Gains stay where the
/// recurrence is well conditioned over a few tokens (unbounded gains only with the linear solve).
Spec randomSpec(std::mt19937_64& rng) {
  Spec s = baseSpec("rand");
  s.decay.kind = std::vector<DecayKind>{DecayKind::None, DecayKind::Scalar, DecayKind::Diagonal}[rng() % 3];
  s.solve.kind = coin(rng) ? SolveKind::Delta : SolveKind::Linear;
  s.gain.kind = coin(rng) ? GainKind::Scalar : GainKind::None;
  if (s.gain.kind == GainKind::Scalar) {
    s.gain.lo = coin(rng) ? 0.0 : 0.1;
    s.gain.hi = s.solve.kind == SolveKind::Linear && coin(rng) ? INFINITY : (coin(rng) ? 1.0 : 2.0);
  }
  if (rng() % 3 != 0) {
    s.precond.kind = PrecondKind::Diagonal;
    s.precond.side = coin(rng) ? PrecondSide::Key : PrecondSide::Query;
    s.precond.source = coin(rng) ? PrecondSource::EmaSqSquash : PrecondSource::HypergradOgd;
    if (s.precond.source == PrecondSource::EmaSqSquash) {
      SquashParams& p = s.precond.squash;
      p.x = uniform(rng, 1.1, 4.0);
      p.eps = std::pow(10.0, uniform(rng, -8.0, -2.0));
      p.center_init = uniform(rng, -1.0, 0.5);
      p.has_gate = coin(rng);
      p.has_gain = coin(rng);
    } else {
      HypergradParams& p = s.precond.hypergrad;
      p.eta = uniform(rng, 0.1, 1.5);
      p.has_retention = coin(rng);
      p.timing = coin(rng) ? WriteTiming::Pre : WriteTiming::Post;
      p.init = uniform(rng, 0.5, 1.5);
      if (coin(rng)) p.clamp_min = uniform(rng, 0.0, 0.3);
      if (coin(rng)) p.clamp_max = uniform(rng, 1.6, 3.0);
    }
  }
  s.qk_l2norm = rng() % 4 != 0;
  s.l2norm_eps = s.qk_l2norm ? std::pow(10.0, uniform(rng, -9.0, -3.0)) : 1e-6;
  if (coin(rng)) s.scale = uniform(rng, 0.1, 1.2);
  s.gva_ratio = usesHypergrad(s) ? 1 : 1 + static_cast<int>(rng() % 3);
  s.initial_state = coin(rng);
  s.final_state = coin(rng);
  s.initial_precond_state = hasPrecond(s) && coin(rng);
  s.final_precond_state = hasPrecond(s) && coin(rng);
  s.varlen = coin(rng);
  return s;
}

/// A small random shape for `spec`: packed sequences (one may be empty) when varlen, else a batch.
ReferenceProblem randomShape(const Spec& spec, std::mt19937_64& rng) {
  const std::int64_t H = 1 + static_cast<std::int64_t>(rng() % 2);
  const std::int64_t K = 2 + static_cast<std::int64_t>(rng() % 4), V = 1 + static_cast<std::int64_t>(rng() % 4);
  if (spec.varlen && coin(rng)) {
    std::vector<std::int64_t> cu = {0};
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) cu.push_back(cu.back() + static_cast<std::int64_t>(rng() % 6));
    cu.back() += 1;  // at least one token
    return shapeOf(1, cu.back(), H, H * spec.gva_ratio, K, V, cu);
  }
  // Mostly short; sometimes long enough for several checkpoint blocks of uneven length (C = ⌈√T⌉).
  const bool longer = rng() % 5 == 0;
  const std::int64_t T = longer ? 20 + static_cast<std::int64_t>(rng() % 20) : 1 + static_cast<std::int64_t>(rng() % 8);
  return shapeOf(1 + static_cast<std::int64_t>(rng() % 2), T, H, H * spec.gva_ratio, K, V);
}

std::string describe(const Spec& s) {
  std::string d = std::string("decay ") + toString(s.decay.kind) + ", gain " + toString(s.gain.kind) + " (" +
                  std::to_string(s.gain.lo) + ", " + std::to_string(s.gain.hi) + "), solve " + toString(s.solve.kind) +
                  ", l2norm " + (s.qk_l2norm ? "on" : "off") + ", gva " + std::to_string(s.gva_ratio) + ", precond " +
                  toString(s.precond.kind);
  if (hasPrecond(s)) {
    d += std::string(" ") + toString(s.precond.source) + " " + toString(s.precond.side);
    if (usesHypergrad(s)) d += std::string(" timing ") + toString(s.precond.hypergrad.timing);
  }
  return d;
}

TEST(ReferenceGradProperties, RandomSpecsMatchFiniteDifferences) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 150; ++trial) {
    const Spec spec = randomSpec(rng);
    const ReferenceProblem shape = randomShape(spec, rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + describe(spec) + ", T=" + std::to_string(shape.seq_len));
    InputGenOptions opt;
    opt.initial_state = coin(rng);
    opt.initial_precond_state = coin(rng);
    ReferenceInputs in = inputs64(spec, shape, rng(), opt);
    keepOffBounds(spec, in);
    if (!spec.qk_l2norm) {  // unnormalised keys of norm ~0.5 keep the delta rule's write contractive
      Tensor& k = in.at("k");
      for (std::int64_t i = 0; i < k.numel(); ++i) k.set(i, 0.5 * k.get(i) / std::sqrt(1.0 * shape.key_dim));
    }
    const TensorMap ct = randomCotangents(spec, shape, rng());
    FiniteDifferenceOptions fd;
    fd.samplesPerTensor = 6;
    fd.nonZero = false;  // e.g. a clamp can hold every d at its bound; the shipped-spec test checks non-triviality
    expectGradientsMatchFiniteDifferences(spec, in, ct, rng(), fd);
    if (HasFailure()) return;
  }
}

// ---- invariants ---------------------------------------------------------------------------------------

bool perToken(const std::string& name, const Tensor& t) {
  return t.rank() >= 3 && name != "initial_state" && name != "initial_precond_state";
}

/// Expects grads[name] == concatenation along T of first[name] and second[name].
void expectConcatenated(const TensorMap& whole, const TensorMap& first, const TensorMap& second,
                        const std::string& name, std::int64_t t1, double tol) {
  const Tensor& w = whole.at(name);
  const std::int64_t T = w.dim(1);
  expectClose(first.at(name), sliceT(w, 0, t1), tol, name + " before the split");
  expectClose(second.at(name), sliceT(w, t1, T), tol, name + " after the split");
}

TEST(ReferenceGradProperties, SplitSequenceEqualsWholeThroughTheStates) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (Spec spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    if (!usesHypergrad(spec)) spec.gva_ratio = 2;
    const std::int64_t B = 2, T = 11, H = 2, K = 4, V = 3, HV = H * spec.gva_ratio;
    const ReferenceProblem shape = shapeOf(B, T, H, HV, K, V);
    const ReferenceInputs in = inputs64(spec, shape, rng());
    const TensorMap ct = randomCotangents(spec, shape, rng());
    const std::int64_t t1 = 1 + static_cast<std::int64_t>(rng() % (T - 1));
    SCOPED_TRACE("split at t=" + std::to_string(t1));
    const TensorMap whole = runReferenceBackward(spec, in, ct);

    // Forward through the first half; its final states are the second half's initial states.
    ReferenceInputs in1, in2;
    for (const auto& kv : in) {
      in1[kv.first] = perToken(kv.first, kv.second) ? sliceT(kv.second, 0, t1) : kv.second;
      in2[kv.first] = perToken(kv.first, kv.second) ? sliceT(kv.second, t1, T) : kv.second;
    }
    const ReferenceOutputs r1 = runReference(spec, in1);
    in2["initial_state"] = r1.final_state;
    const bool precond = hasPrecond(spec);
    if (precond) in2["initial_precond_state"] = r1.final_precond_state;

    // Backward through the second half; the adjoints of its initial states are the first half's
    // final-state cotangents.
    TensorMap ct2 = ct, ct1 = ct;
    ct2["do"] = sliceT(ct.at("do"), t1, T);
    ct1["do"] = sliceT(ct.at("do"), 0, t1);
    const TensorMap g2 = runReferenceBackward(spec, in2, ct2);
    ct1["dfinal_state"] = g2.at("dinitial_state");
    if (precond) ct1["dfinal_precond_state"] = g2.at("dinitial_precond_state");
    const TensorMap g1 = runReferenceBackward(spec, in1, ct1);

    EXPECT_GT(maxAbs(whole.at("dq")), 1e-6);
    for (const auto& kv : in) {
      const std::string d = "d" + kv.first;
      if (perToken(kv.first, kv.second)) {
        expectConcatenated(whole, g1, g2, d, t1, 1e-12);
      } else if (kv.first == "precond_center") {  // shared by every token: the halves' sum
        Tensor sum = g1.at(d);
        for (std::int64_t i = 0; i < sum.numel(); ++i) sum.set(i, sum.get(i) + g2.at(d).get(i));
        expectClose(sum, whole.at(d), 1e-12, d);
      } else {  // initial states: only the first half sees them
        expectClose(g1.at(d), whole.at(d), 1e-12, d);
      }
    }
  }
}

TEST(ReferenceGradProperties, VarlenEqualsSeparateRuns) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (Spec spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    if (!usesHypergrad(spec)) spec.gva_ratio = 2;
    const std::int64_t H = 2, K = 3, V = 4, HV = H * spec.gva_ratio;
    const std::vector<std::int64_t> lens = {static_cast<std::int64_t>(1 + rng() % 6), 0,
                                            static_cast<std::int64_t>(1 + rng() % 6)};
    std::vector<std::int64_t> cu = {0};
    for (std::int64_t l : lens) cu.push_back(cu.back() + l);
    const ReferenceProblem shape = shapeOf(1, cu.back(), H, HV, K, V, cu);
    const ReferenceInputs packed = inputs64(spec, shape, rng());
    const TensorMap ct = randomCotangents(spec, shape, rng());
    const TensorMap whole = runReferenceBackward(spec, packed, ct);
    EXPECT_GT(maxAbs(whole.at("dk")), 1e-6);

    std::map<std::string, Tensor> centreSum;
    for (std::size_t n = 0; n < lens.size(); ++n) {
      SCOPED_TRACE("sequence " + std::to_string(n) + " of length " + std::to_string(lens[n]));
      const std::int64_t t0 = cu[n], t1 = cu[n + 1];
      auto pick = [&](const TensorMap& m, const std::string& name) {
        const Tensor& t = m.at(name);
        if (name.find("final_state") != std::string::npos || name.find("initial_") != std::string::npos ||
            name.find("final_precond") != std::string::npos) {
          return sliceN(t, static_cast<std::int64_t>(n));
        }
        return t.rank() >= 3 ? sliceT(t, t0, t1) : t;
      };
      ReferenceInputs one;
      TensorMap oneCt;
      for (const auto& kv : packed) {
        if (kv.first != "cu_seqlens") one[kv.first] = pick(packed, kv.first);
      }
      for (const auto& kv : ct) oneCt[kv.first] = pick(ct, kv.first);
      const TensorMap g = runReferenceBackward(spec, one, oneCt);
      for (const auto& kv : g) {
        if (kv.first == "dprecond_center") {
          if (!centreSum.count(kv.first)) centreSum[kv.first] = Tensor(ScalarType::F64, kv.second.shape());
          Tensor& s = centreSum[kv.first];
          for (std::int64_t i = 0; i < s.numel(); ++i) s.set(i, s.get(i) + kv.second.get(i));
        } else {
          expectClose(kv.second, pick(whole, kv.first), 1e-13, kv.first);
        }
      }
      if (lens[n] == 0) {  // an empty sequence hands the final-state cotangent through
        expectClose(g.at("dinitial_state"), oneCt.at("dfinal_state"), 0.0, "empty sequence dinitial_state");
      }
    }
    for (const auto& kv : centreSum) expectClose(kv.second, whole.at(kv.first), 1e-12, kv.first);
  }
}

/// Keeps only the entries of `m` whose names (after dropping `prefix`) are inputs of `spec`.
TensorMap restrictTo(const Spec& spec, const ReferenceProblem& shape, const TensorMap& m, const std::string& prefix = "") {
  std::set<std::string> names;
  for (const TensorSlot& s : referenceInputSlots(spec, shape)) names.insert(prefix + s.name);
  TensorMap out;
  for (const auto& kv : m) {
    if (names.count(kv.first)) out.emplace(kv.first, kv.second);
  }
  return out;
}

void expectAllZero(const TensorMap& g, const std::string& name) {
  ASSERT_TRUE(g.count(name)) << name;
  EXPECT_EQ(maxAbs(g.at(name)), 0.0) << name;
}

TEST(ReferenceGradProperties, PgdnWithUnitSquashRangeEqualsGdn) {
  DGPS_SEEDED(seed);
  for (PrecondSide side : {PrecondSide::Key, PrecondSide::Query}) {
    SCOPED_TRACE(std::string("side ") + toString(side));
    Spec p = withSquash(gdn(), side);
    p.precond.squash.x = 1.0;  // P = x^{-s} = 1 for every accumulator value
    p.gva_ratio = 2;
    Spec g = gdn();
    g.gva_ratio = 2;
    const ReferenceProblem shape = shapeOf(2, 9, 2, 4, 5, 3);
    const ReferenceInputs in = inputs64(p, shape, seed);
    TensorMap ct = randomCotangents(p, shape, seed + 1);
    ct.erase("dfinal_precond_state");  // A_T still depends on the accumulator's inputs; GDN has no A
    const TensorMap gp = runReferenceBackward(p, in, ct);
    const TensorMap gg = runReferenceBackward(g, restrictTo(g, shape, in), ct);
    EXPECT_GT(maxAbs(gg.at("dk")), 1e-6);
    for (const auto& kv : gg) expectClose(gp.at(kv.first), kv.second, 1e-13, kv.first);
    for (const char* name : {"dprecond_g", "dprecond_beta", "dprecond_center", "dinitial_precond_state"}) {
      expectAllZero(gp, name);
    }
  }
}

TEST(ReferenceGradProperties, OsdnWithZeroStepAndUnitStateEqualsDeltanet) {
  DGPS_SEEDED(seed);
  for (WriteTiming timing : {WriteTiming::Pre, WriteTiming::Post}) {
    SCOPED_TRACE(std::string("timing ") + toString(timing));
    Spec o = osdn(timing, /*retention=*/true);
    o.precond.hypergrad.eta = 0.0;  // d_t = ρ^t d_0 = 1 with ρ = 1
    const ReferenceProblem shape = shapeOf(2, 8, 2, 2, 4, 3);
    InputGenOptions opt;
    opt.initial_precond_state = false;  // d_0 = init = 1
    ReferenceInputs in = inputs64(o, shape, seed, opt);
    Tensor& pg = in.at("precond_g");
    for (std::int64_t i = 0; i < pg.numel(); ++i) pg.set(i, 0.0);
    TensorMap ct = randomCotangents(o, shape, seed + 1);
    ct.erase("dfinal_precond_state");
    const TensorMap go = runReferenceBackward(o, in, ct);
    const TensorMap gd = runReferenceBackward(deltanet(), restrictTo(deltanet(), shape, in), ct);
    EXPECT_GT(maxAbs(gd.at("dk")), 1e-6);
    for (const auto& kv : gd) expectClose(go.at(kv.first), kv.second, 1e-13, kv.first);
    // The retention still matters: d_t = Π ρ, so dprecond_g is ⟨dP, d⟩ summed over later tokens, not 0.
    EXPECT_GT(maxAbs(go.at("dprecond_g")), 1e-6);
  }
}

TEST(ReferenceGradProperties, GvaEqualsRepeatedKeyHeads) {
  // A GVA spec equals the same recurrence with q, k and the preconditioner's inputs repeated to every
  // value head; so its per-key-head gradients are the repeated run's summed over each group.
  DGPS_SEEDED(seed);
  for (Spec spec : {mamba2(), gdn(), kda(), pgdn(), withSquash(kda(), PrecondSide::Query)}) {
    SCOPED_TRACE(spec.name + " side " + toString(spec.precond.side));
    const std::int64_t ratio = 3, B = 2, T = 6, H = 2, K = 3, V = 2;
    spec.gva_ratio = static_cast<int>(ratio);
    const ReferenceProblem shape = shapeOf(B, T, H, H * ratio, K, V);
    const ReferenceInputs in = inputs64(spec, shape, seed);
    const TensorMap ct = randomCotangents(spec, shape, seed + 1);
    const TensorMap grouped = runReferenceBackward(spec, in, ct);
    Spec flat = spec;
    flat.gva_ratio = 1;
    TensorMap flatCt = ct;
    if (ct.count("dfinal_precond_state")) {  // the loss sees the group's state once: through its first head
      const Tensor& d = ct.at("dfinal_precond_state");
      Tensor first(ScalarType::F64, {B, H * ratio, K});
      for (std::int64_t n = 0; n < B; ++n) {
        for (std::int64_t h = 0; h < H; ++h) {
          for (std::int64_t c = 0; c < K; ++c) {
            first.set((n * H * ratio + h * ratio) * K + c, d.get((n * H + h) * K + c));
          }
        }
      }
      flatCt["dfinal_precond_state"] = first;
    }
    const TensorMap repeated = runReferenceBackward(flat, repeatToValueHeads(in, ratio), flatCt);
    EXPECT_GT(maxAbs(grouped.at("dq")), 1e-6);
    ASSERT_EQ(repeated.size(), grouped.size());
    for (const auto& kv : grouped) {
      const int d = keyHeadDim(kv.first.substr(1));
      const Tensor want = d >= 0 ? sumHeadGroups(repeated.at(kv.first), static_cast<std::size_t>(d), ratio)
                                 : repeated.at(kv.first);
      expectClose(kv.second, want, 1e-13, kv.first);
    }
  }
}

TEST(ReferenceGradProperties, RowsPastTheLastSequenceGetZeroGradients) {
  // A varlen buffer may be longer than cu_seqlens[N] (padding). The forward either rejects it (then the
  // backward must reject it with the same message) or gives zero output rows there; then the padding
  // gets zero gradients and the real rows are those of the trimmed buffer.
  DGPS_SEEDED(seed);
  for (const Spec& spec : {pgdn(), osdn(WriteTiming::Post, true), kda()}) {
    SCOPED_TRACE(spec.name);
    const std::int64_t T = 10, used = 7, H = 2, K = 3, V = 2;
    ReferenceInputs in = inputs64(spec, shapeOf(1, T, H, H, K, V, {0, 4, T}), seed);
    in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {3}, {0.0, 4.0, double(used)});
    TensorMap ct = randomCotangents(spec, shapeOf(1, T, H, H, K, V, {0, 4, T}), seed + 1);
    std::string forwardError;
    try {
      runReference(spec, in);
    } catch (const DataError& e) {
      forwardError = e.what();
    }
    if (!forwardError.empty()) {
      try {
        runReferenceBackward(spec, in, ct);
        ADD_FAILURE() << "the forward rejects the padded buffer (" << forwardError << ") but the backward ran";
      } catch (const DataError& e) {
        EXPECT_EQ(std::string(e.what()), forwardError);
      }
      continue;
    }
    const TensorMap g = runReferenceBackward(spec, in, ct);
    ReferenceInputs inT;
    TensorMap ctT;
    for (const auto& kv : in) inT[kv.first] = perToken(kv.first, kv.second) ? sliceT(kv.second, 0, used) : kv.second;
    for (const auto& kv : ct) ctT[kv.first] = kv.first == "do" ? sliceT(kv.second, 0, used) : kv.second;
    const TensorMap gT = runReferenceBackward(spec, inT, ctT);
    for (const auto& kv : g) {
      if (kv.second.rank() >= 3 && perToken(kv.first.substr(1), kv.second)) {
        expectClose(sliceT(kv.second, 0, used), gT.at(kv.first), 0.0, kv.first + " real rows");
        EXPECT_EQ(maxAbs(sliceT(kv.second, used, T)), 0.0) << kv.first << " padding rows";
      } else {
        expectClose(kv.second, gT.at(kv.first), 0.0, kv.first);
      }
    }
  }
}

}  // namespace
}  // namespace dgps::test
