// `dgps-spec reference` / `dgps-spec demo` entry points on the shipped specs: outputs equal runReference,
// and every bad input ends in exit code 1 with one clear message (never an exception).
#include <gtest/gtest.h>

#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sstream>

#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/SpecParser.h"
#include "TestUtil.h"

namespace dgps::test {
namespace {

const std::string kSpecs = std::string(DGPS_SOURCE_DIR) + "/specs/";

std::string tempPath(const std::string& stem) {
  return ::testing::TempDir() + "dgps_cmd_" + stem + "_" + std::to_string(freshSeed() % 1000000007) + ".safetensors";
}

Spec loadShipped(const std::string& name) {
  ParseResult r = parseSpecFile(kSpecs + name);
  if (!r.ok()) {
    for (const Diagnostic& d : r.diagnostics) ADD_FAILURE() << formatDiagnostic(d);
    throw DataError("cannot parse " + name);
  }
  return *r.spec;
}

std::vector<std::string> shippedSpecs() {
  std::vector<std::string> names;
  if (DIR* d = opendir(kSpecs.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".yaml") names.push_back(n);
    }
    closedir(d);
  }
  return names;
}

TEST(ReferenceCommand, WritesTheReferenceOutputs) {
  DGPS_SEEDED(seed);
  const Spec spec = loadShipped("pgdn.yaml");
  const std::int64_t H = spec.heads_qk > 0 ? spec.heads_qk : 2;
  const ReferenceProblem shape = shapeOf(1, 40, H, H * spec.gva_ratio, spec.key_dims.front(), spec.value_dims.front(),
                                     {0, 15, 40});
  SafetensorsFile in;
  in.tensors = generateInputs(spec, shape, seed, ScalarType::BF16);
  const std::string inPath = tempPath("in"), outPath = tempPath("out");
  writeSafetensors(inPath, in);
  std::ostringstream out, err;
  const int rc = runReferenceCommand(kSpecs + "pgdn.yaml", inPath, outPath, out, err);
  ASSERT_EQ(rc, 0) << err.str();
  EXPECT_NE(out.str().find("o [1, 40, " + std::to_string(H * spec.gva_ratio) + ", " +
                           std::to_string(spec.value_dims.front()) + "]"), std::string::npos)
      << out.str();
  const SafetensorsFile got = readSafetensors(outPath);
  std::remove(inPath.c_str());
  std::remove(outPath.c_str());
  const ReferenceOutputs want = runReference(spec, in.tensors);
  const TensorMap wantMap = want.toMap();
  ASSERT_EQ(got.tensors.size(), wantMap.size());
  for (const auto& kv : wantMap) {
    SCOPED_TRACE(kv.first);
    ASSERT_TRUE(got.tensors.count(kv.first));
    EXPECT_EQ(got.tensors.at(kv.first).dtype(), ScalarType::F64);
    EXPECT_EQ(got.tensors.at(kv.first).bytes(), kv.second.bytes());
  }
  EXPECT_GT(maxAbs(got.tensors.at("o")), 1e-3);
  EXPECT_EQ(got.metadata.at("dgps_spec"), "pgdn");
}

TEST(ReferenceCommand, BadInputsAreOneClearError) {
  DGPS_SEEDED(seed);
  const Spec spec = loadShipped("gdn.yaml");
  const std::int64_t H = spec.heads_qk > 0 ? spec.heads_qk : 1;
  const ReferenceProblem shape = shapeOf(2, 6, H, H * spec.gva_ratio, spec.key_dims.front(), spec.value_dims.front());
  SafetensorsFile in;
  in.tensors = generateInputs(spec, shape, seed, ScalarType::BF16);
  in.tensors.erase("beta");
  const std::string inPath = tempPath("bad"), outPath = tempPath("never");
  writeSafetensors(inPath, in);
  {
    std::ostringstream out, err;
    EXPECT_EQ(runReferenceCommand(kSpecs + "gdn.yaml", inPath, outPath, out, err), 1);
    EXPECT_NE(err.str().find(inPath + ": reference input 'beta': missing required input"), std::string::npos)
        << err.str();
    std::ifstream never(outPath);
    EXPECT_FALSE(never.good()) << "an output file was written for bad inputs";
  }
  {  // a corrupt input file
    std::ofstream(inPath, std::ios::binary | std::ios::trunc) << "abc";
    std::ostringstream out, err;
    EXPECT_EQ(runReferenceCommand(kSpecs + "gdn.yaml", inPath, outPath, out, err), 1);
    EXPECT_NE(err.str().find(inPath + ": truncated safetensors file"), std::string::npos) << err.str();
  }
  {  // a missing spec file: the parser's diagnostic
    std::ostringstream out, err;
    EXPECT_EQ(runReferenceCommand(kSpecs + "no_such_spec.yaml", inPath, outPath, out, err), 1);
    EXPECT_NE(err.str().find("no_such_spec.yaml"), std::string::npos) << err.str();
  }
  {  // an unwritable output path
    in.tensors = generateInputs(spec, shape, seed, ScalarType::BF16);
    writeSafetensors(inPath, in);
    std::ostringstream out, err;
    EXPECT_EQ(runReferenceCommand(kSpecs + "gdn.yaml", inPath, "/nonexistent/dir/o.safetensors", out, err), 1);
    EXPECT_NE(err.str().find("/nonexistent/dir/o.safetensors: cannot open for writing"), std::string::npos)
        << err.str();
  }
  std::remove(inPath.c_str());
}

TEST(ReferenceCommand, DemoRunsEveryShippedSpec) {
  const std::vector<std::string> names = shippedSpecs();
  EXPECT_GE(names.size(), 8u) << "shipped specs not found under " << kSpecs;
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    std::ostringstream out, err;
    ASSERT_EQ(runDemoCommand(kSpecs + n, out, err), 0) << err.str();
    EXPECT_NE(out.str().find("||o|| = "), std::string::npos) << out.str();
    EXPECT_EQ(out.str().find("||o|| = 0\n"), std::string::npos) << out.str();
    EXPECT_EQ(out.str().find("nan"), std::string::npos) << out.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(runDemoCommand(kSpecs + "no_such_spec.yaml", out, err), 1);
  EXPECT_FALSE(err.str().empty());
}

}  // namespace
}  // namespace dgps::test
