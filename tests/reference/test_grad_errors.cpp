// Bad cotangents are one clear DataError naming the tensor and what was expected; `dgps-spec gradients`
// writes exactly runReferenceBackward's gradients and turns every error into exit code 1 and one
// message naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "GradTestUtil.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps::test {
namespace {

/// Expects runReferenceBackward to throw a DataError whose message contains every string of `parts`.
void expectError(const Spec& spec, const ReferenceInputs& in, const TensorMap& ct, std::vector<std::string> parts) {
  try {
    runReferenceBackward(spec, in, ct);
    ADD_FAILURE() << "no error; expected one containing '" << parts.front() << "'";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

struct Case {
  Spec spec;
  ReferenceProblem shape;
  ReferenceInputs in;
  TensorMap ct;
};

Case pgdnCase(std::uint64_t seed) {
  Case c{pgdn(), shapeOf(2, 5, 2, 2, 3, 4), {}, {}};
  c.in = inputs64(c.spec, c.shape, seed);
  c.ct = randomCotangents(c.spec, c.shape, seed + 1);
  return c;
}

TEST(ReferenceGradErrors, MissingDoIsNamed) {
  DGPS_SEEDED(seed);
  Case c = pgdnCase(seed);
  c.ct.erase("do");
  expectError(c.spec, c.in, c.ct, {"cotangent 'do'", "missing required", "[2, 5, 2, 4]"});
}

TEST(ReferenceGradErrors, MisshapenCotangentsAreNamedWithTheExpectedShape) {
  DGPS_SEEDED(seed);
  const Case c = pgdnCase(seed);
  {
    TensorMap ct = c.ct;
    ct["do"] = Tensor(ScalarType::F64, {2, 5, 2, 3});
    expectError(c.spec, c.in, ct, {"cotangent 'do'", "expected shape [B,T,HV,V] = [2, 5, 2, 4]", "got [2, 5, 2, 3]"});
  }
  {
    TensorMap ct = c.ct;
    ct["dfinal_state"] = Tensor(ScalarType::F32, {2, 2, 4, 3});
    expectError(c.spec, c.in, ct, {"cotangent 'dfinal_state'", "[N,HV,K,V] = [2, 2, 3, 4]", "got [2, 2, 4, 3]"});
  }
  {
    TensorMap ct = c.ct;
    ct["dfinal_precond_state"] = Tensor(ScalarType::F64, {2, 3});
    expectError(c.spec, c.in, ct, {"cotangent 'dfinal_precond_state'", "[N,H,K] = [2, 2, 3]", "got [2, 3]"});
  }
}

TEST(ReferenceGradErrors, CotangentOfAFinalStateTheSpecLacks) {
  DGPS_SEEDED(seed);
  {
    Spec spec = gdn();
    spec.final_state = false;
    const ReferenceProblem shape = shapeOf(1, 4, 1, 1, 2, 2);
    const ReferenceInputs in = inputs64(spec, shape, seed);
    TensorMap ct = randomCotangents(spec, shape, seed);
    ct["dfinal_state"] = Tensor(ScalarType::F64, {1, 1, 2, 2});
    expectError(spec, in, ct, {"cotangent 'dfinal_state'", "no final_state output", "accepted: do"});
  }
  {
    const Spec spec = gdn();  // no preconditioner
    const ReferenceProblem shape = shapeOf(1, 4, 1, 1, 2, 2);
    const ReferenceInputs in = inputs64(spec, shape, seed);
    TensorMap ct = randomCotangents(spec, shape, seed);
    ct["dfinal_precond_state"] = Tensor(ScalarType::F64, {1, 1, 2});
    expectError(spec, in, ct, {"cotangent 'dfinal_precond_state'", "no preconditioner", "accepted: do, dfinal_state"});
  }
  {
    Spec spec = pgdn();
    spec.final_precond_state = false;
    const ReferenceProblem shape = shapeOf(1, 4, 1, 1, 2, 2);
    const ReferenceInputs in = inputs64(spec, shape, seed);
    TensorMap ct = randomCotangents(spec, shape, seed);
    ct["dfinal_precond_state"] = Tensor(ScalarType::F64, {1, 1, 2});
    expectError(spec, in, ct, {"cotangent 'dfinal_precond_state'", "io.final_precond_state: false"});
  }
}

TEST(ReferenceGradErrors, UnknownDtypeAndNonFiniteCotangents) {
  DGPS_SEEDED(seed);
  const Case c = pgdnCase(seed);
  {
    TensorMap ct = c.ct;
    ct["dq"] = Tensor(ScalarType::F64, {2, 5, 2, 3});
    expectError(c.spec, c.in, ct, {"cotangent 'dq'", "unexpected", "accepted: do, dfinal_state, dfinal_precond_state"});
  }
  {
    TensorMap ct = c.ct;
    ct["do"] = ct.at("do").to(ScalarType::BF16);
    expectError(c.spec, c.in, ct, {"cotangent 'do'", "expected dtype f32 or f64, got bf16"});
  }
  {
    TensorMap ct = c.ct;
    ct["dfinal_state"].set(7, NAN);
    expectError(c.spec, c.in, ct, {"cotangent 'dfinal_state'", "finite", "flat index 7"});
  }
}

TEST(ReferenceGradErrors, BadInputsAreTheForwardsErrors) {
  DGPS_SEEDED(seed);
  Case c = pgdnCase(seed);
  c.in.at("g").set(3, 0.5);
  std::string forward;
  try {
    runReference(c.spec, c.in);
  } catch (const DataError& e) {
    forward = e.what();
  }
  ASSERT_FALSE(forward.empty());
  expectError(c.spec, c.in, c.ct, {forward});
}

// ---- dgps-spec gradients -------------------------------------------------------------------------

const std::string kSpecs = std::string(DGPS_SOURCE_DIR) + "/specs/";

std::string tempPath(const std::string& stem) {
  return ::testing::TempDir() + "dgps_grad_" + stem + "_" + std::to_string(freshSeed() % 1000000007) + ".safetensors";
}

TEST(ReferenceGradCommand, WritesTheGradientsAndReportsErrorsByFile) {
  DGPS_SEEDED(seed);
  ParseResult r = parseSpecFile(kSpecs + "pgdn.yaml");
  ASSERT_TRUE(r.ok());
  const Spec spec = *r.spec;
  const std::int64_t K = spec.key_dims.front(), V = spec.value_dims.front();
  const ReferenceProblem shape = shapeOf(1, 9, 1, spec.gva_ratio, K, V, {0, 4, 9});
  SafetensorsFile in, ct;
  in.tensors = generateInputs(spec, shape, seed, ScalarType::BF16);
  ct.tensors = randomCotangents(spec, shape, seed + 1);
  ct.tensors["do"] = ct.tensors.at("do").to(ScalarType::F32);  // the ABI's dtype is accepted too
  const std::string inPath = tempPath("in"), ctPath = tempPath("ct"), outPath = tempPath("out");
  writeSafetensors(inPath, in);
  writeSafetensors(ctPath, ct);
  {
    std::ostringstream out, err;
    ASSERT_EQ(runGradientsCommand(kSpecs + "pgdn.yaml", inPath, ctPath, outPath, out, err), 0) << err.str();
    EXPECT_NE(out.str().find("gradients pgdn: 10 gradient tensors"), std::string::npos) << out.str();
    const SafetensorsFile got = readSafetensors(outPath);
    const TensorMap want = runReferenceBackward(spec, in.tensors, ct.tensors);
    ASSERT_EQ(got.tensors.size(), want.size());
    for (const auto& kv : want) {
      SCOPED_TRACE(kv.first);
      ASSERT_TRUE(got.tensors.count(kv.first));
      EXPECT_EQ(got.tensors.at(kv.first).dtype(), ScalarType::F64);
      EXPECT_EQ(got.tensors.at(kv.first).bytes(), kv.second.bytes());
    }
    EXPECT_GT(maxAbs(got.tensors.at("dq")), 1e-6);
    EXPECT_EQ(got.metadata.at("dgps_spec"), "pgdn");
    std::remove(outPath.c_str());
  }
  {  // a misshapen cotangent: the cotangent file and the tensor are named, nothing is written
    SafetensorsFile bad = ct;
    bad.tensors["dfinal_state"] = Tensor(ScalarType::F32, {1, 1, K, V});
    writeSafetensors(ctPath, bad);
    std::ostringstream out, err;
    EXPECT_EQ(runGradientsCommand(kSpecs + "pgdn.yaml", inPath, ctPath, outPath, out, err), 1);
    EXPECT_NE(err.str().find(ctPath + ": reference cotangent 'dfinal_state': expected shape"), std::string::npos)
        << err.str();
    EXPECT_FALSE(std::ifstream(outPath).good()) << "a gradient file was written for bad cotangents";
  }
  {  // a bad input: the input file is named
    SafetensorsFile bad = in;
    bad.tensors.erase("beta");
    writeSafetensors(inPath, bad);
    writeSafetensors(ctPath, ct);
    std::ostringstream out, err;
    EXPECT_EQ(runGradientsCommand(kSpecs + "pgdn.yaml", inPath, ctPath, outPath, out, err), 1);
    EXPECT_NE(err.str().find(inPath + ": reference input 'beta': missing required input"), std::string::npos)
        << err.str();
  }
  {  // a corrupt cotangent file, a missing spec
    std::ofstream(ctPath, std::ios::binary | std::ios::trunc) << "xyz";
    std::ostringstream out, err;
    EXPECT_EQ(runGradientsCommand(kSpecs + "pgdn.yaml", inPath, ctPath, outPath, out, err), 1);
    EXPECT_NE(err.str().find(ctPath + ": truncated safetensors file"), std::string::npos) << err.str();
    std::ostringstream out2, err2;
    EXPECT_EQ(runGradientsCommand(kSpecs + "no_such_spec.yaml", inPath, ctPath, outPath, out2, err2), 1);
    EXPECT_NE(err2.str().find("no_such_spec.yaml"), std::string::npos) << err2.str();
  }
  std::remove(inPath.c_str());
  std::remove(ctPath.c_str());
}

}  // namespace
}  // namespace dgps::test
