// `dgps-spec inputs` and `dgps-spec compare` (DataCommands.h), and the --shape / --cu-seqlens parsing they
// share with dgps-tune (ShapeArg.h): the inputs file holds exactly what generateInputs makes, the reference
// runs on it, compare's numbers match a hand computation, and every bad argument or file ends in exit code 1
// with one message naming what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "dgps/dsl/DataCommands.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/ShapeArg.h"
#include "dgps/dsl/SpecParser.h"
#include "TestUtil.h"

namespace dgps::test {
namespace {

const std::string kSpecs = std::string(DGPS_SOURCE_DIR) + "/specs/";

std::string tempPath(const std::string& stem, const std::string& ext = ".safetensors") {
  return ::testing::TempDir() + "dgps_data_" + stem + "_" + std::to_string(freshSeed() % 1000000007) + ext;
}

Spec loadShipped(const std::string& name) {
  ParseResult r = parseSpecFile(kSpecs + name);
  if (!r.ok()) throw DataError("cannot parse " + name);
  return *r.spec;
}

struct CommandRun {
  int rc = -1;
  std::string out, err;
};

CommandRun inputs(InputsCommandOptions o) {
  std::ostringstream out, err;
  CommandRun r;
  r.rc = runInputsCommand(o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

CommandRun compare(const std::string& ref, const std::string& got, CompareTolerances tol = {}) {
  CompareCommandOptions o;
  o.ref_path = ref;
  o.got_path = got;
  o.tolerances = tol;
  std::ostringstream out, err;
  CommandRun r;
  r.rc = runCompareCommand(o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

InputsCommandOptions pgdnInputs(const std::string& out) {
  InputsCommandOptions o;
  o.spec_path = kSpecs + "pgdn.yaml";
  o.shape = "B=2,T=40,H=2,K=64,V=64";
  o.out_path = out;
  return o;
}

std::string writeTensors(const std::string& stem, const TensorMap& tensors) {
  SafetensorsFile f;
  f.tensors = tensors;
  const std::string path = tempPath(stem);
  writeSafetensors(path, f);
  return path;
}

TEST(InputsCommand, WritesWhatGenerateInputsMakes) {
  DGPS_SEEDED(seed);
  const std::string path = tempPath("in");
  InputsCommandOptions o = pgdnInputs(path);
  o.seed = seed;
  const CommandRun r = inputs(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("B=2,T=40,H=2,HV=2,K=64,V=64"), std::string::npos) << r.out;

  const Spec spec = loadShipped("pgdn.yaml");
  const ReferenceProblem shape = shapeOf(2, 40, 2, 2, 64, 64);
  const ReferenceInputs want = generateInputs(spec, shape, seed, toScalarType(spec.input_dtypes.front()));
  const SafetensorsFile got = readSafetensors(path);
  ASSERT_EQ(got.tensors.size(), want.size());
  for (const auto& [name, t] : want) {
    SCOPED_TRACE(name);
    auto it = got.tensors.find(name);
    ASSERT_NE(it, got.tensors.end());
    EXPECT_EQ(it->second.dtype(), t.dtype());
    EXPECT_EQ(it->second.shape(), t.shape());
    EXPECT_EQ(it->second.bytes(), t.bytes());
  }
  EXPECT_EQ(got.metadata.at("dgps_spec"), "pgdn");
  EXPECT_EQ(got.metadata.at("dgps_seed"), std::to_string(seed));
  // The file is a valid input of the reference.
  EXPECT_NO_THROW(runReference(spec, got.tensors));
}

TEST(InputsCommand, PaddedVarlenBufferAndOptions) {
  DGPS_SEEDED(seed);
  const Spec spec = loadShipped("pgdn.yaml");
  // T larger than cu[N]: the padded token buffer is accepted and the reference zeroes the padding rows of o.
  std::string path = tempPath("varlen");
  InputsCommandOptions o = pgdnInputs(path);
  o.shape = "B=1,T=64,H=2,K=64,V=64";
  o.cu_seqlens = "0,20,45";
  o.dtype = "f16";
  o.initial_states = false;
  o.seed = seed;
  CommandRun r = inputs(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  SafetensorsFile f = readSafetensors(path);
  EXPECT_EQ(f.tensors.at("q").dtype(), ScalarType::F16);
  EXPECT_EQ(f.tensors.at("q").shape(), (std::vector<std::int64_t>{1, 64, 2, 64}));
  EXPECT_EQ(f.tensors.count("initial_state"), 0u);
  const Tensor& cu = f.tensors.at("cu_seqlens");
  ASSERT_EQ(cu.numel(), 3);
  EXPECT_EQ(cu.getInt(2), 45);
  const ReferenceOutputs ref = runReference(spec, f.tensors);
  double tail = 0, head = 0;
  const std::int64_t row = 2 * 64;
  for (std::int64_t i = 0; i < ref.o.numel(); ++i) (i >= 45 * row ? tail : head) += std::fabs(ref.o.get(i));
  EXPECT_EQ(tail, 0.0);
  EXPECT_GT(head, 0.0);

  // T may be left out with --cu-seqlens: T = cu[N].
  path = tempPath("varlen_t");
  o = pgdnInputs(path);
  o.shape = "H=2,K=64,V=64";
  o.cu_seqlens = "0,7,30";
  r = inputs(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(readSafetensors(path).tensors.at("q").shape(), (std::vector<std::int64_t>{1, 30, 2, 64}));
}

void expectInputsError(InputsCommandOptions o, const std::vector<std::string>& needles) {
  const CommandRun r = inputs(o);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "missing '" << n << "' in: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one message: " << r.err;
  std::ifstream f(o.out_path);
  EXPECT_FALSE(f.good()) << "no file is written on an error";
}

TEST(InputsCommand, BadArgumentsGiveOneClearError) {
  const std::string path = tempPath("bad");
  InputsCommandOptions o = pgdnInputs(path);
  o.shape = "B=2,T=4k,H=2,K=64,V=64";
  expectInputsError(o, {"--shape", "'T=4k'", "positive integer"});
  o.shape = "B=2,H=2,K=64,V=64";
  expectInputsError(o, {"--shape", "T is required"});
  o.shape = "B=2,T=40,H=2,K=64,V=64,Q=3";
  expectInputsError(o, {"unknown key 'Q'"});
  o.shape = "B=2,T=40,H=2,K=96,V=64";
  expectInputsError(o, {"96"});  // not one of the spec's key dims
  o.shape = "B=2,T=40,H=2,K=64,V=64";
  o.dtype = "int8";
  expectInputsError(o, {"--dtype 'int8'", "bf16, f16, f32 or f64"});
  o.dtype = "";
  o.cu_seqlens = "0,20,x";
  expectInputsError(o, {"--cu-seqlens", "entry 2", "'x'"});
  o.cu_seqlens = "0";
  expectInputsError(o, {"--cu-seqlens", "at least 2 entries"});
  o.shape = "B=1,T=40,H=2,K=64,V=64";
  o.cu_seqlens = "0,20,50";
  expectInputsError(o, {"cu_seqlens", "must end at most at T = 40", "got 50"});
  o.cu_seqlens = "0,20,40";
  o.shape = "B=2,T=40,H=2,K=64,V=64";
  expectInputsError(o, {"cu_seqlens requires B == 1", "got B = 2"});
  o.cu_seqlens = "";
  o.shape = "B=1024,T=1048576,H=64,K=128,V=128";  // terabytes: refused before anything is allocated
  expectInputsError(o, {"over the limit of 2^31", "smaller"});
  o.shape = "B=2,T=40,H=2,K=64,V=64";
  o.spec_path = kSpecs + "no_such_spec.yaml";
  const CommandRun missing = inputs(o);
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("no_such_spec.yaml"), std::string::npos) << missing.err;
}

TEST(InputsCommand, CuSeqlensOnANonVarlenSpec) {
  std::ifstream in(kSpecs + "pgdn.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const auto at = text.find("varlen: true");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "varlen: false");
  const std::string spec = tempPath("novarlen", ".yaml");
  std::ofstream(spec) << text;
  InputsCommandOptions o = pgdnInputs(tempPath("novarlen_in"));
  o.spec_path = spec;
  o.shape = "B=1,T=40,H=2,K=64,V=64";
  o.cu_seqlens = "0,20,40";
  expectInputsError(o, {"varlen: false", "cu_seqlens"});
}

TEST(ShapeArgParsing, CuSeqlens) {
  EXPECT_EQ(parseCuSeqlensArg("0, 1500,3000"), (std::vector<std::int64_t>{0, 1500, 3000}));
  EXPECT_THROW(parseCuSeqlensArg("0,-5"), DataError);
  EXPECT_THROW(parseCuSeqlensArg("0,5,"), DataError);
  EXPECT_THROW(parseCuSeqlensArg("0,,5"), DataError);
  EXPECT_THROW(parseCuSeqlensArg("0,99999999999999999999"), DataError);
  EXPECT_THROW(parseCuSeqlensArg(""), DataError);
}

TEST(CompareCommand, NumbersMatchAHandComputation) {
  // ref = [3, 4, 0] (‖ref‖ = 5, max |ref| = 4); got = [3, 4.5, 0]: max_abs 0.5, max_rel 0.125, rel_l2 0.1.
  const TensorErrors e = compareTensors(Tensor::fromDoubles(ScalarType::F32, {3}, {3, 4.5, 0}),
                                        Tensor::fromDoubles(ScalarType::F64, {3}, {3, 4, 0}));
  EXPECT_DOUBLE_EQ(e.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(e.max_rel, 0.125);
  EXPECT_DOUBLE_EQ(e.rel_l2, 0.1);
  EXPECT_EQ(e.nonfinite_got, 0);
  CompareTolerances tol;
  tol.rel_l2 = 0.11;
  EXPECT_EQ(toleranceFailure(e, tol), "");
  tol.rel_l2 = 0.09;
  EXPECT_NE(toleranceFailure(e, tol).find("rel_l2 1.00e-01 > 9.00e-02"), std::string::npos);
  tol.rel_l2 = -1;
  tol.max_abs = 0.4;
  EXPECT_NE(toleranceFailure(e, tol).find("max_abs"), std::string::npos);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const TensorErrors n = compareTensors(Tensor::fromDoubles(ScalarType::F32, {3}, {nan, 4, INFINITY}),
                                        Tensor::fromDoubles(ScalarType::F64, {3}, {3, 4, 0}));
  EXPECT_EQ(n.nonfinite_got, 2);
  EXPECT_NE(toleranceFailure(n, CompareTolerances{}).find("2 non-finite"), std::string::npos);
  EXPECT_THROW(compareTensors(Tensor(ScalarType::F32, {3}), Tensor(ScalarType::F32, {1, 3})), DataError);
}

TEST(CompareCommand, ReferenceAgainstItsBf16Rounding) {
  DGPS_SEEDED(seed);
  const Spec spec = loadShipped("gdn.yaml");
  const ReferenceInputs in = generateInputs(spec, shapeOf(1, 50, 2, 2 * spec.gva_ratio, 64, 64), seed, ScalarType::BF16);
  const ReferenceOutputs ref = runReference(spec, in);
  const std::string refPath = writeTensors("ref", ref.toMap());
  TensorMap rounded = ref.toMap();
  rounded["o"] = rounded["o"].to(ScalarType::BF16);  // f64 against bf16: about 2^-9 relative error
  const std::string gotPath = writeTensors("got", rounded);
  CommandRun r = compare(refPath, gotPath);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("o [1, 50, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f64 vs bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;

  // A perturbed o fails and says by how much.
  TensorMap off = rounded;
  Tensor& o = off["o"];
  for (std::int64_t i = 0; i < o.numel(); ++i) o.set(i, o.get(i) * 1.1);
  r = compare(refPath, writeTensors("off", off));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("FAIL: rel_l2"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("1 of "), std::string::npos) << r.err;
  // A looser tolerance lets it pass.
  CompareTolerances loose;
  loose.rel_l2 = 0.2;
  EXPECT_EQ(compare(refPath, writeTensors("off2", off), loose).rc, 0);

  // A NaN fails however loose the tolerance.
  TensorMap poisoned = rounded;
  poisoned["o"].set(7, std::numeric_limits<double>::quiet_NaN());
  r = compare(refPath, writeTensors("nan", poisoned), loose);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("non-finite 0/1"), std::string::npos) << r.out;
}

TEST(CompareCommand, MissingOrMisshapenTensorsFail) {
  const TensorMap ref = {{"o", Tensor::fromDoubles(ScalarType::F64, {2, 2}, {1, 2, 3, 4})},
                         {"final_state", Tensor::fromDoubles(ScalarType::F64, {2}, {1, 2})}};
  const std::string refPath = writeTensors("mref", ref);
  TensorMap missing = ref;
  missing.erase("final_state");
  CommandRun r = compare(refPath, writeTensors("missing", missing));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tensor 'final_state' is in " + refPath + " but not in"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("o [2, 2]"), std::string::npos) << "the tensors present in both are still compared";

  TensorMap reshaped = ref;
  reshaped["o"] = Tensor::fromDoubles(ScalarType::F64, {4}, {1, 2, 3, 4});
  r = compare(refPath, writeTensors("reshaped", reshaped));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tensor 'o': shape [4] in"), std::string::npos) << r.err;

  const std::string notAFile = tempPath("absent");
  r = compare(refPath, notAFile);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(notAFile), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace dgps::test
