// Input validation: each bad input gives one DataError naming the tensor, what was expected and what came.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace dgps::test {
namespace {

void expectError(const Spec& spec, const ReferenceInputs& in, std::initializer_list<std::string> parts) {
  try {
    runReference(spec, in);
    FAIL() << "accepted bad input";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
  }
}

struct Fixture {
  std::uint64_t seed = freshSeed();
  Spec spec = pgdn();
  ReferenceProblem shape = shapeOf(1, 10, 2, 2, 4, 3, {0, 4, 10});
  ReferenceInputs in;
  Fixture() {
    spec.gva_ratio = 1;
    in = generateInputs(spec, shape, seed, ScalarType::BF16);
  }
};

TEST(ReferenceValidation, GeneratedInputsAreAccepted) {
  Fixture f;
  SCOPED_TRACE("seed=" + std::to_string(f.seed));
  EXPECT_NO_THROW(runReference(f.spec, f.in));
}

TEST(ReferenceValidation, MissingAndExtraTensors) {
  Fixture f;
  ReferenceInputs in = f.in;
  in.erase("beta");
  expectError(f.spec, in, {"'beta'", "missing required input", "[B,T,HV]", "[1, 10, 2]"});
  in = f.in;
  in.erase("q");
  expectError(f.spec, in, {"'q'", "missing"});
  in = f.in;
  in["gate"] = in.at("g");
  expectError(f.spec, in, {"'gate'", "unexpected input", "accepts only", "precond_beta"});
  // A tensor the model does not take: DeltaNet has no decay.
  expectError(deltanet(), generateInputs(gdn(), f.shape, f.seed, ScalarType::F32), {"'g'", "unexpected input"});
  // States a spec declares it does not take.
  Spec noInit = f.spec;
  noInit.initial_state = false;
  expectError(noInit, f.in, {"'initial_state'", "unexpected"});
  Spec noVarlen = f.spec;
  noVarlen.varlen = false;
  expectError(noVarlen, f.in, {"'cu_seqlens'", "unexpected"});
}

TEST(ReferenceValidation, MisshapenTensors) {
  Fixture f;
  ReferenceInputs in = f.in;
  in["g"] = Tensor(ScalarType::F32, {1, 10, 2, 4});
  expectError(f.spec, in, {"'g'", "expected shape [B,T,HV] = [1, 10, 2]", "got [1, 10, 2, 4]"});
  in = f.in;
  in["k"] = Tensor(ScalarType::BF16, {1, 10, 2, 5});
  expectError(f.spec, in, {"'k'", "[1, 10, 2, 4]", "got [1, 10, 2, 5]"});
  in = f.in;
  in["v"] = Tensor(ScalarType::BF16, {1, 9, 2, 3});
  expectError(f.spec, in, {"'v'", "T=10", "got [1, 9, 2, 3]"});
  in = f.in;
  in["q"] = Tensor(ScalarType::BF16, {10, 2, 4});
  expectError(f.spec, in, {"'q'", "rank 4", "[B,T,H,K]"});
  in = f.in;
  in["initial_precond_state"] = Tensor(ScalarType::F32, {2, 2, 3});
  expectError(f.spec, in, {"'initial_precond_state'", "[N,H,K] = [2, 2, 4]", "got [2, 2, 3]"});
  in = f.in;
  in["precond_center"] = Tensor(ScalarType::F32, {4});
  expectError(f.spec, in, {"'precond_center'", "[H] = [2]"});
}

TEST(ReferenceValidation, MistypedTensors) {
  Fixture f;
  ReferenceInputs in = f.in;
  in["beta"] = in.at("beta").to(ScalarType::BF16);
  expectError(f.spec, in, {"'beta'", "expected dtype f32 or f64", "got bf16"});
  in = f.in;
  in["v"] = in.at("v").to(ScalarType::F16);
  expectError(f.spec, in, {"'v'", "share one dtype", "q is bf16"});
  in = f.in;
  in["q"] = in.at("q").to(ScalarType::I32);
  in["k"] = in.at("k").to(ScalarType::I32);
  in["v"] = in.at("v").to(ScalarType::I32);
  expectError(f.spec, in, {"'q'", "got i32"});
  in = f.in;
  in["cu_seqlens"] = in.at("cu_seqlens").to(ScalarType::I32);
  expectError(f.spec, in, {"'cu_seqlens'", "expected dtype i64", "got i32"});
  Spec bf16Only = f.spec;
  bf16Only.input_dtypes = {DType::BF16};
  in = f.in;
  for (const char* n : {"q", "k", "v"}) in[n] = in.at(n).to(ScalarType::F16);
  expectError(bf16Only, in, {"'q'", "one of bf16, f32, f64", "got f16"});
}

TEST(ReferenceValidation, VarlenContract) {
  Fixture f;
  ReferenceInputs in = f.in;
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {3}, {0, 6, 4});
  expectError(f.spec, in, {"cu_seqlens", "non-decreasing", "cu_seqlens[2] = 4"});
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {3}, {0, 4, 11});
  expectError(f.spec, in, {"cu_seqlens", "must end at most at T = 10", "got 11"});
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {3}, {0, 4, 9});  // a padded buffer is accepted
  EXPECT_NO_THROW(validateReferenceInputs(f.spec, in));
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {3}, {1, 4, 10});
  expectError(f.spec, in, {"cu_seqlens", "start at 0"});
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {1}, {10});
  expectError(f.spec, in, {"'cu_seqlens'", "[N+1] with N >= 1"});
  // B != 1 with cu_seqlens.
  ReferenceInputs b2 = generateInputs(f.spec, shapeOf(2, 5, 2, 2, 4, 3), f.seed, ScalarType::F32);
  b2["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {2}, {0, 5});
  expectError(f.spec, b2, {"cu_seqlens requires B == 1", "got B = 2"});
}

TEST(ReferenceValidation, HeadsAndDims) {
  Fixture f;
  // HV not a multiple of H.
  Spec g = gdn();
  ReferenceInputs in = generateInputs(g, shapeOf(1, 4, 4, 4, 4, 3), f.seed, ScalarType::F32);
  in["v"] = Tensor(ScalarType::F32, {1, 4, 10, 3});
  expectError(g, in, {"HV = 10 is not a multiple of H = 4"});
  // HV a multiple but not the spec's ratio.
  in["v"] = Tensor(ScalarType::F32, {1, 4, 8, 3});
  expectError(g, in, {"gva_ratio 1", "HV must be 4", "got HV = 8"});
  // H = 0.
  ReferenceInputs zero;
  zero["q"] = Tensor(ScalarType::F32, {1, 4, 0, 4});
  zero["k"] = Tensor(ScalarType::F32, {1, 4, 0, 4});
  zero["v"] = Tensor(ScalarType::F32, {1, 4, 0, 3});
  expectError(linearAttention(), zero, {"H (heads_qk) must be >= 1, got 0"});
  // A fixed head count and supported dims.
  Spec fixed = gdn();
  fixed.heads_qk = 8;
  expectError(fixed, generateInputs(gdn(), shapeOf(1, 3, 2, 2, 4, 3), f.seed, ScalarType::F32),
              {"fixes heads_qk = 8", "got H = 2"});
  Spec dims = gdn();
  dims.key_dims = {64, 128};
  expectError(dims, generateInputs(gdn(), shapeOf(1, 3, 2, 2, 4, 3), f.seed, ScalarType::F32),
              {"supports K in [64, 128]", "got K = 4"});
  // OSDN's d is per key head: grouped value heads are rejected.
  Spec o = osdn();
  o.gva_ratio = 2;
  expectError(o, generateInputs(osdn(), shapeOf(1, 3, 2, 2, 4, 3), f.seed, ScalarType::F32),
              {"hypergrad_ogd", "needs gva_ratio 1", "got gva_ratio 2"});
}

TEST(ReferenceValidation, ValueContracts) {
  Fixture f;
  ReferenceInputs in = f.in;
  in["g"].set(7, 5.0);  // docs/math.md §7.1: a positive log-decay
  expectError(f.spec, in, {"'g'", "log-decay values <= 0", "docs/math.md §7.1", "got 5", "index [0, 3, 1]"});
  in = f.in;
  in["precond_g"].set(0, 0.5);
  expectError(f.spec, in, {"'precond_g'", "<= 0"});
  in = f.in;
  in["beta"].set(3, 1.5);
  expectError(f.spec, in, {"'beta'", "in [0, 1]", "got 1.5"});
  in = f.in;
  in["precond_beta"].set(3, -0.1);
  expectError(f.spec, in, {"'precond_beta'", ">= 0"});
  in = f.in;
  in["q"].set(5, NAN);
  expectError(f.spec, in, {"'q'", "finite", "nan"});
  in = f.in;
  in["initial_state"].set(2, INFINITY);
  expectError(f.spec, in, {"'initial_state'", "finite", "inf"});
  in = f.in;
  in["initial_precond_state"].set(1, -0.5);
  expectError(f.spec, in, {"'initial_precond_state'", "A_0 >= 0"});
}

TEST(ReferenceValidation, SpecFieldsTheReferenceNeeds) {
  Fixture f;
  Spec s = f.spec;
  s.gva_ratio = 0;
  expectError(s, f.in, {"gva_ratio must be >= 1"});
  s = f.spec;
  s.precond.squash.x = 0.0;
  expectError(s, f.in, {"squash x must be finite and > 0"});
  s = f.spec;
  s.precond.squash.eps = 0.0;
  expectError(s, f.in, {"squash eps"});
  Spec o = osdn();
  o.precond.hypergrad.clamp_min = 2.0;
  o.precond.hypergrad.clamp_max = 1.0;
  expectError(o, generateInputs(osdn(), shapeOf(1, 3, 2, 2, 4, 3), f.seed, ScalarType::F32), {"clamp_min 2 > clamp_max 1"});
}

TEST(ReferenceValidation, OutputsFollowTheSpec) {
  Fixture f;
  Spec s = f.spec;
  s.final_state = false;
  s.final_precond_state = false;
  const ReferenceOutputs r = runReference(s, f.in);
  EXPECT_FALSE(r.has_final_state);
  EXPECT_FALSE(r.has_final_precond_state);
  EXPECT_EQ(r.toMap().size(), 1u);
  EXPECT_EQ(r.o.dtype(), ScalarType::F64);
  EXPECT_EQ(r.o.shape(), (std::vector<std::int64_t>{1, 10, 2, 3}));
  const ReferenceOutputs full = runReference(f.spec, f.in);
  EXPECT_EQ(full.toMap().size(), 3u);
  EXPECT_EQ(full.final_state.shape(), (std::vector<std::int64_t>{2, 2, 4, 3}));
  EXPECT_EQ(full.final_precond_state.shape(), (std::vector<std::int64_t>{2, 2, 4}));
  const std::vector<TensorSlot> outs = referenceOutputSlots(f.spec, f.shape);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[2].name, "final_precond_state");
}

}  // namespace
}  // namespace dgps::test
