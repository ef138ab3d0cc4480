// Algebraic properties of the reference recurrence that catch wrong maths: reductions between models,
// state hand-off, varlen, causality and GVA. Fresh random inputs per test (the seed is printed on failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "TestUtil.h"

namespace dgps::test {
namespace {

// Keeps only the inputs `spec` accepts at `shape` (drops e.g. the precond_* tensors for a base model).
ReferenceInputs restrictTo(const Spec& spec, const ReferenceProblem& shape, const ReferenceInputs& in) {
  std::set<std::string> names;
  for (const TensorSlot& s : referenceInputSlots(spec, shape)) names.insert(s.name);
  ReferenceInputs out;
  for (const auto& kv : in) {
    if (names.count(kv.first)) out.emplace(kv.first, kv.second);
  }
  return out;
}

Tensor filled(ScalarType dt, const std::vector<std::int64_t>& shape, double value) {
  Tensor t(dt, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, value);
  return t;
}

void expectSameOutputs(const ReferenceOutputs& a, const ReferenceOutputs& b, double tol, bool precondToo = false) {
  expectClose(a.o, b.o, tol, "o");
  ASSERT_TRUE(a.has_final_state && b.has_final_state);
  expectClose(a.final_state, b.final_state, tol, "final_state");
  if (precondToo) {
    ASSERT_TRUE(a.has_final_precond_state && b.has_final_precond_state);
    expectClose(a.final_precond_state, b.final_precond_state, tol, "final_precond_state");
  }
}

// Outputs of a real run must be non-trivial, otherwise an equality proves nothing.
void expectNonTrivial(const ReferenceOutputs& r) {
  EXPECT_GT(maxAbs(r.o), 1e-3);
  if (r.has_final_state) EXPECT_GT(maxAbs(r.final_state), 1e-3);
}

TEST(ReferenceProperties, PgdnWithUnitSquashRangeEqualsGdn) {
  DGPS_SEEDED(seed);
  Spec p = pgdn();
  p.precond.squash.x = 1.0;  // M = x^{-s} = 1 for every s
  p.gva_ratio = 2;
  Spec g = gdn();
  g.gva_ratio = 2;
  const ReferenceProblem shape = shapeOf(2, 19, 2, 4, 6, 5);
  const ReferenceInputs in = inputs64(p, shape, seed);
  const ReferenceOutputs rp = runReference(p, in);
  const ReferenceOutputs rg = runReference(g, restrictTo(g, shape, in));
  expectNonTrivial(rg);
  expectSameOutputs(rp, rg, 1e-14);
}

TEST(ReferenceProperties, PdnEqualsPgdnWithZeroDecay) {
  DGPS_SEEDED(seed);
  const ReferenceProblem shape = shapeOf(2, 21, 3, 3, 7, 4);
  ReferenceInputs in = inputs64(pgdn(), shape, seed);
  in["g"] = filled(ScalarType::F64, {2, 21, 3}, 0.0);
  const ReferenceOutputs rg = runReference(pgdn(), in);
  const ReferenceOutputs rp = runReference(pdn(), restrictTo(pdn(), shape, in));
  expectNonTrivial(rp);
  expectSameOutputs(rg, rp, 1e-14, /*precondToo=*/true);
}

TEST(ReferenceProperties, OsdnWithZeroStepAndUnitInitEqualsDeltanet) {
  DGPS_SEEDED(seed);
  for (bool retention : {false, true}) {
    for (WriteTiming timing : {WriteTiming::Pre, WriteTiming::Post}) {
      SCOPED_TRACE(std::string("retention=") + (retention ? "1" : "0") + " timing=" + toString(timing));
      Spec o = osdn(timing, retention);
      o.precond.hypergrad.eta = 0.0;
      o.precond.hypergrad.init = 1.0;
      const ReferenceProblem shape = shapeOf(2, 17, 2, 2, 5, 6);
      InputGenOptions opt;
      opt.initial_precond_state = false;  // d_0 = init = 1
      ReferenceInputs in = inputs64(o, shape, seed, opt);
      if (retention) in["precond_g"] = filled(ScalarType::F64, {2, 17, 2}, 0.0);  // r = 1
      const ReferenceOutputs ro = runReference(o, in);
      const ReferenceOutputs rd = runReference(deltanet(), restrictTo(deltanet(), shape, in));
      expectNonTrivial(rd);
      expectSameOutputs(ro, rd, 1e-14);
      ASSERT_TRUE(ro.has_final_precond_state);
      for (std::int64_t i = 0; i < ro.final_precond_state.numel(); ++i) {
        ASSERT_EQ(ro.final_precond_state.get(i), 1.0);
      }
    }
  }
}

TEST(ReferenceProperties, ZeroLogDecayEqualsNoDecay) {
  DGPS_SEEDED(seed);
  struct Pair {
    Spec decayed, plain;
  };
  Spec mambaNoDecay = mamba2();
  mambaNoDecay.decay.kind = DecayKind::None;
  std::vector<Pair> pairs = {{gdn(), deltanet()}, {kda(), deltanet()}, {pkda(), pdn()}, {mamba2(), mambaNoDecay}};
  for (const Pair& p : pairs) {
    SCOPED_TRACE(p.decayed.name + " vs " + p.plain.name);
    const ReferenceProblem shape = shapeOf(2, 15, 2, 2, 4, 5);
    ReferenceInputs in = inputs64(p.decayed, shape, seed);
    const Tensor& g = in.at("g");
    in["g"] = filled(ScalarType::F64, g.shape(), 0.0);
    const ReferenceOutputs rd = runReference(p.decayed, in);
    const ReferenceOutputs rp = runReference(p.plain, restrictTo(p.plain, shape, in));
    expectNonTrivial(rp);
    expectSameOutputs(rd, rp, 1e-14);
  }
}

TEST(ReferenceProperties, DiagonalDecayWithEqualChannelsEqualsScalarDecay) {
  DGPS_SEEDED(seed);
  const std::vector<std::pair<Spec, Spec>> pairs = {{kda(), gdn()}, {pkda(), pgdn()}};
  for (const auto& pr : pairs) {
    SCOPED_TRACE(pr.first.name + " vs " + pr.second.name);
    const std::int64_t B = 2, T = 13, H = 2, K = 6, V = 3;
    const ReferenceProblem shape = shapeOf(B, T, H, H, K, V);
    ReferenceInputs in = inputs64(pr.second, shape, seed);  // scalar g [B,T,HV]
    const Tensor gs = in.at("g");
    Tensor gd(ScalarType::F64, {B, T, H, K});
    for (std::int64_t i = 0; i < gs.numel(); ++i) {
      for (std::int64_t c = 0; c < K; ++c) gd.set(i * K + c, gs.get(i));
    }
    const ReferenceOutputs rs = runReference(pr.second, in);
    in["g"] = gd;
    const ReferenceOutputs rd = runReference(pr.first, in);
    expectNonTrivial(rs);
    expectSameOutputs(rd, rs, 1e-14);
  }
}

TEST(ReferenceProperties, SplitSequenceResumesFromFinalStates) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t B = 2, T = 23, H = 2, K = 5, V = 4;
    const std::int64_t HV = H * spec.gva_ratio;
    const ReferenceProblem shape = shapeOf(B, T, H, HV, K, V);
    const ReferenceInputs in = inputs64(spec, shape, rng());
    const std::int64_t t1 = 1 + static_cast<std::int64_t>(rng() % (T - 1));
    SCOPED_TRACE("split at t=" + std::to_string(t1));
    const ReferenceOutputs whole = runReference(spec, in);
    expectNonTrivial(whole);

    ReferenceInputs first, second;
    for (const auto& kv : in) {
      const bool perToken = kv.second.rank() >= 3 && kv.first != "initial_state" && kv.first != "initial_precond_state";
      if (perToken) {
        first[kv.first] = sliceT(kv.second, 0, t1);
        second[kv.first] = sliceT(kv.second, t1, T);
      } else {
        first[kv.first] = kv.second;
        second[kv.first] = kv.second;
      }
    }
    const ReferenceOutputs r1 = runReference(spec, first);
    second["initial_state"] = r1.final_state;
    const bool precond = spec.precond.kind == PrecondKind::Diagonal;
    if (precond) second["initial_precond_state"] = r1.final_precond_state;
    const ReferenceOutputs r2 = runReference(spec, second);

    expectClose(r1.o, sliceT(whole.o, 0, t1), 1e-14, "o before the split");
    expectClose(r2.o, sliceT(whole.o, t1, T), 1e-14, "o after the split");
    expectClose(r2.final_state, whole.final_state, 1e-14, "final_state");
    if (precond) expectClose(r2.final_precond_state, whole.final_precond_state, 1e-14, "final_precond_state");
  }
}

TEST(ReferenceProperties, VarlenEqualsSeparateRuns) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t H = 2, K = 4, V = 5, HV = H * spec.gva_ratio;
    std::vector<std::int64_t> lens = {static_cast<std::int64_t>(1 + rng() % 9), 0,
                                      static_cast<std::int64_t>(1 + rng() % 9),
                                      static_cast<std::int64_t>(1 + rng() % 9)};
    std::vector<std::int64_t> cu = {0};
    for (std::int64_t l : lens) cu.push_back(cu.back() + l);
    const std::int64_t T = cu.back();
    const ReferenceProblem packedShape = shapeOf(1, T, H, HV, K, V, cu);
    const ReferenceInputs packed = inputs64(spec, packedShape, rng());
    const ReferenceOutputs whole = runReference(spec, packed);
    expectNonTrivial(whole);
    for (std::size_t n = 0; n < lens.size(); ++n) {
      SCOPED_TRACE("sequence " + std::to_string(n) + " of length " + std::to_string(lens[n]));
      ReferenceInputs one;
      for (const auto& kv : packed) {
        if (kv.first == "cu_seqlens") continue;
        if (kv.first == "initial_state" || kv.first == "initial_precond_state") {
          one[kv.first] = sliceN(kv.second, static_cast<std::int64_t>(n));
        } else if (kv.second.rank() >= 3) {
          one[kv.first] = sliceT(kv.second, cu[n], cu[n + 1]);
        } else {
          one[kv.first] = kv.second;
        }
      }
      const ReferenceOutputs r = runReference(spec, one);
      expectClose(r.o, sliceT(whole.o, cu[n], cu[n + 1]), 0.0, "o");
      expectClose(r.final_state, sliceN(whole.final_state, static_cast<std::int64_t>(n)), 0.0, "final_state");
      if (r.has_final_precond_state) {
        expectClose(r.final_precond_state, sliceN(whole.final_precond_state, static_cast<std::int64_t>(n)), 0.0,
                    "final_precond_state");
      }
      if (lens[n] == 0) {  // an empty sequence hands its initial state through
        expectClose(r.final_state, one.at("initial_state"), 0.0, "empty sequence final_state");
      }
    }
  }
}

// A token buffer longer than the packed sequences (cu[N] < T): the sequences' outputs and states are those of
// the unpadded buffer, and the padding rows of o are exactly 0 whatever their inputs hold.
TEST(ReferenceProperties, VarlenPaddedBufferZeroesTheTail) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t H = 2, K = 4, V = 5, HV = H * spec.gva_ratio, pad = 1 + static_cast<std::int64_t>(rng() % 7);
    const std::vector<std::int64_t> cu = {0, 1 + static_cast<std::int64_t>(rng() % 8), 10};
    const std::int64_t T = cu.back() + pad;
    const ReferenceInputs padded = inputs64(spec, shapeOf(1, T, H, HV, K, V, cu), rng());
    ReferenceInputs exact;
    for (const auto& kv : padded)
      exact[kv.first] = (kv.second.rank() >= 3 && kv.first != "initial_state" && kv.first != "initial_precond_state")
                            ? sliceT(kv.second, 0, cu.back())
                            : kv.second;
    const ReferenceOutputs rp = runReference(spec, padded);
    const ReferenceOutputs re = runReference(spec, exact);
    expectNonTrivial(re);
    ASSERT_EQ(rp.o.shape(), (std::vector<std::int64_t>{1, T, HV, V}));
    expectClose(sliceT(rp.o, 0, cu.back()), re.o, 0.0, "o of the sequences");
    EXPECT_EQ(maxAbs(sliceT(rp.o, cu.back(), T)), 0.0) << "padding rows of o";
    expectClose(rp.final_state, re.final_state, 0.0, "final_state");
    if (rp.has_final_precond_state) expectClose(rp.final_precond_state, re.final_precond_state, 0.0, "final_precond_state");
  }
}

TEST(ReferenceProperties, VarlenWithEqualLengthsEqualsBatch) {
  DGPS_SEEDED(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t N = 3, L = 6, H = 2, K = 3, V = 4, HV = H * spec.gva_ratio;
    const ReferenceProblem batched = shapeOf(N, L, H, HV, K, V);
    const ReferenceInputs in = inputs64(spec, batched, seed);
    ReferenceInputs packed;
    for (const auto& kv : in) {
      Tensor t = kv.second;
      if (kv.second.rank() >= 3 && kv.first != "initial_state" && kv.first != "initial_precond_state") {
        std::vector<std::int64_t> shape = t.shape();
        shape[0] = 1;
        shape[1] = N * L;
        t = Tensor::fromBytes(t.dtype(), shape, t.bytes());  // [N, L, ...] and [1, N*L, ...] share a layout
      }
      packed[kv.first] = t;
    }
    packed["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {N + 1}, {0.0, 1.0 * L, 2.0 * L, 3.0 * L});
    const ReferenceOutputs rb = runReference(spec, in);
    const ReferenceOutputs rp = runReference(spec, packed);
    expectNonTrivial(rb);
    const Tensor oPacked = Tensor::fromBytes(rp.o.dtype(), rb.o.shape(), rp.o.bytes());
    expectClose(oPacked, rb.o, 0.0, "o");
    expectClose(rp.final_state, rb.final_state, 0.0, "final_state");
  }
}

TEST(ReferenceProperties, Causality) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t B = 1, T = 12, H = 2, K = 4, V = 3, HV = H * spec.gva_ratio;
    const ReferenceProblem shape = shapeOf(B, T, H, HV, K, V);
    const ReferenceInputs base = inputs64(spec, shape, rng());
    const ReferenceInputs other = inputs64(spec, shape, rng());
    const std::int64_t ts = static_cast<std::int64_t>(rng() % T);
    SCOPED_TRACE("perturbed token " + std::to_string(ts));
    ReferenceInputs changed = base;
    for (auto& kv : changed) {
      if (kv.second.rank() < 3 || kv.first == "initial_state" || kv.first == "initial_precond_state") continue;
      std::int64_t inner = 1;
      for (std::size_t d = 2; d < kv.second.rank(); ++d) inner *= kv.second.dim(d);
      for (std::int64_t i = 0; i < inner; ++i) kv.second.set(ts * inner + i, other.at(kv.first).get(ts * inner + i));
    }
    const ReferenceOutputs a = runReference(spec, base);
    const ReferenceOutputs b = runReference(spec, changed);
    if (ts > 0) expectClose(sliceT(a.o, 0, ts), sliceT(b.o, 0, ts), 0.0, "o before the perturbed token");
    EXPECT_GT(maxAbsDiff(sliceT(a.o, ts, ts + 1), sliceT(b.o, ts, ts + 1)), 1e-9) << "o at the perturbed token";
    EXPECT_GT(maxAbsDiff(a.final_state, b.final_state), 1e-12) << "final_state";
  }
}

TEST(ReferenceProperties, GvaEqualsRepeatInterleavedKeyHeads) {
  DGPS_SEEDED(seed);
  Spec pgdnAtq = withSquash(gdn(), PrecondSide::Query);
  pgdnAtq.name = "pgdn_atq";
  for (Spec spec : {linearAttention(), mamba2(), deltanet(), gdn(), kda(), pgdn(), pkda(), pgdnAtq}) {
    SCOPED_TRACE(spec.name);
    const std::int64_t ratio = 3, B = 2, T = 9, H = 2, K = 4, V = 3;
    spec.gva_ratio = static_cast<int>(ratio);
    const ReferenceProblem shape = shapeOf(B, T, H, H * ratio, K, V);
    const ReferenceInputs in = inputs64(spec, shape, seed);
    const ReferenceOutputs grouped = runReference(spec, in);
    expectNonTrivial(grouped);
    Spec flat = spec;
    flat.gva_ratio = 1;
    const ReferenceOutputs repeated = runReference(flat, repeatToValueHeads(in, ratio));
    expectClose(repeated.o, grouped.o, 0.0, "o");
    expectClose(repeated.final_state, grouped.final_state, 0.0, "final_state");
    if (grouped.has_final_precond_state) {  // the group's value heads all carry the key head's state
      const Tensor& fp = grouped.final_precond_state;  // [N, H, K]
      const Tensor& fr = repeated.final_precond_state;  // [N, HV, K]
      for (std::int64_t n = 0; n < B; ++n) {
        for (std::int64_t hv = 0; hv < H * ratio; ++hv) {
          for (std::int64_t c = 0; c < K; ++c) {
            ASSERT_EQ(fr.get((n * H * ratio + hv) * K + c), fp.get((n * H + hv / ratio) * K + c));
          }
        }
      }
    }
  }
}

TEST(ReferenceProperties, MissingInitialStatesMeanDefaults) {
  DGPS_SEEDED(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t H = 2, HV = H * spec.gva_ratio, K = 4, V = 3;
    const ReferenceProblem shape = shapeOf(2, 7, H, HV, K, V);
    InputGenOptions none;
    none.initial_state = false;
    none.initial_precond_state = false;
    const ReferenceInputs in = inputs64(spec, shape, seed, none);
    ReferenceInputs explicitDefaults = in;
    explicitDefaults["initial_state"] = filled(ScalarType::F32, {2, HV, K, V}, 0.0);
    const bool precond = spec.precond.kind == PrecondKind::Diagonal;
    if (precond) {
      const double d0 = spec.precond.source == PrecondSource::HypergradOgd ? spec.precond.hypergrad.init : 0.0;
      explicitDefaults["initial_precond_state"] = filled(ScalarType::F32, {2, H, K}, d0);
    }
    const ReferenceOutputs a = runReference(spec, in);
    const ReferenceOutputs b = runReference(spec, explicitDefaults);
    expectNonTrivial(a);
    expectSameOutputs(a, b, 0.0, precond);
  }
}

TEST(ReferenceProperties, AtqReadsWithTheSquashedQuery) {
  // Independent check of the ATQ read and of the squash: compute A_t and M_t here, then ATQ must equal
  // the unpreconditioned model read with q' = M ⊙ q̂ (keys pre-normalised, l2norm off in both).
  DGPS_SEEDED(seed);
  Spec atq = withSquash(gdn(), PrecondSide::Query);
  atq.qk_l2norm = false;
  atq.scale = 0.6;
  Spec plain = gdn();
  plain.qk_l2norm = false;
  plain.scale = 0.6;
  const std::int64_t B = 2, T = 11, H = 2, K = 5, V = 3;
  const ReferenceProblem shape = shapeOf(B, T, H, H, K, V);
  ReferenceInputs in = inputs64(atq, shape, seed);
  Tensor& k = in.at("k");
  for (std::int64_t row = 0; row < B * T * H; ++row) {  // unit keys, as the accumulator expects
    double ss = 0.0;
    for (std::int64_t c = 0; c < K; ++c) ss += k.get(row * K + c) * k.get(row * K + c);
    for (std::int64_t c = 0; c < K; ++c) k.set(row * K + c, k.get(row * K + c) / std::sqrt(ss));
  }
  Tensor qPre = in.at("q");
  const double lnx = std::log(atq.precond.squash.x), eps = atq.precond.squash.eps;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      std::vector<double> A(static_cast<std::size_t>(K));
      for (std::int64_t c = 0; c < K; ++c) A[c] = in.at("initial_precond_state").get((b * H + h) * K + c);
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t row = (b * T + t) * H + h;
        const double gamma = std::exp(in.at("precond_g").get(row));
        const double ba = in.at("precond_beta").get(row);
        for (std::int64_t c = 0; c < K; ++c) {
          const double kc = k.get(row * K + c);
          A[c] = gamma * A[c] + ba * kc * kc;
          const double r = std::log(A[c] + eps) - in.at("precond_center").get(h);
          const double M = std::pow(atq.precond.squash.x, -r / (1 + std::fabs(r)));
          ASSERT_NEAR(M, std::exp(-lnx * r / (1 + std::fabs(r))), 1e-15);
          qPre.set(row * K + c, M * in.at("q").get(row * K + c));
        }
      }
    }
  }
  const ReferenceOutputs ra = runReference(atq, in);
  ReferenceInputs pin = restrictTo(plain, shape, in);
  pin["q"] = qPre;
  const ReferenceOutputs rp = runReference(plain, pin);
  expectNonTrivial(rp);
  expectSameOutputs(ra, rp, 1e-13);
}

}  // namespace
}  // namespace dgps::test
