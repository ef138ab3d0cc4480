// Every shipped spec parses without diagnostics, round-trips through the canonical form, and is
// classified as the model its file is named after.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "DslTestUtil.h"
#include "dgps/dsl/Classify.h"
#include "dgps/dsl/Signature.h"

namespace dgps {
namespace {

using test::expectSameFields;
using test::shippedSpecs;
using test::specsDir;

class ShippedSpec : public ::testing::TestWithParam<std::string> {
 protected:
  std::string path() const { return specsDir() + "/" + GetParam() + ".yaml"; }
};

TEST_P(ShippedSpec, ParsesWithoutDiagnostics) {
  ParseResult r = parseSpecFile(path());
  ASSERT_TRUE(r.ok()) << test::allDiagnostics(r);
  EXPECT_TRUE(r.diagnostics.empty()) << test::allDiagnostics(r);
  EXPECT_EQ(r.spec->name, GetParam()) << "spec name and file name differ";
  EXPECT_FALSE(r.spec->description.empty());
  EXPECT_TRUE(validateSpec(*r.spec).empty());
}

TEST_P(ShippedSpec, RoundTripsThroughCanonicalForm) {
  ParseResult r = parseSpecFile(path());
  ASSERT_TRUE(r.ok()) << test::allDiagnostics(r);
  const Spec& s = *r.spec;
  const std::string canon = canonicalYaml(s);
  ParseResult again = parseSpecString(canon, "canonical");
  ASSERT_TRUE(again.ok()) << test::allDiagnostics(again) << canon;
  EXPECT_TRUE(again.diagnostics.empty()) << test::allDiagnostics(again);
  expectSameFields(*again.spec, s);
  EXPECT_TRUE(*again.spec == s);
  EXPECT_EQ(canonicalYaml(*again.spec), canon);  // idempotent
  EXPECT_EQ(specHash(*again.spec), specHash(s));
  EXPECT_EQ(specHash(s).size(), 16u);
}

TEST_P(ShippedSpec, HashIsStableAcrossParses) {
  const std::string text = test::readText(path());
  Spec a = test::parseOk(text);
  Spec b = test::parseOk(text);
  EXPECT_EQ(specHash(a), specHash(b));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(specHash64(a)));
  EXPECT_EQ(std::string(buf), specHash(a));
}

INSTANTIATE_TEST_SUITE_P(Specs, ShippedSpec, ::testing::ValuesIn(shippedSpecs()),
                         [](const auto& info) { return info.param; });

TEST(ShippedSpecs, EveryYamlInSpecsDirIsListed) {
  // A new spec must be added to shippedSpecs() so that it is tested.
  std::set<std::string> listed(shippedSpecs().begin(), shippedSpecs().end());
  std::set<std::string> onDisk;
  for (const auto& e : std::filesystem::directory_iterator(specsDir()))
    if (e.path().extension() == ".yaml") onDisk.insert(e.path().stem().string());
  EXPECT_EQ(onDisk, listed);
}

TEST(ShippedSpecs, AllHashesDiffer) {
  std::map<std::string, std::string> seen;
  for (const std::string& stem : shippedSpecs()) {
    ParseResult r = parseSpecFile(specsDir() + "/" + stem + ".yaml");
    ASSERT_TRUE(r.ok()) << stem;
    const std::string h = specHash(*r.spec);
    EXPECT_EQ(seen.count(h), 0u) << stem << " has the same hash as " << seen[h];
    seen[h] = stem;
  }
}

TEST(ShippedSpecs, ClassifiedAsTheirModel) {
  const std::map<std::string, std::string> expected = {
      {"linear_attention", "D=none G=1 P=none S=linear  ~ linear attention"},
      {"mamba2", "D=scalar G=Delta(0,inf) P=none S=linear  ~ Mamba-2 (SSD)"},
      {"deltanet", "D=none G=beta(0,1) P=none S=delta  ~ DeltaNet"},
      {"gdn", "D=scalar G=beta(0,1) P=none S=delta  ~ GDN"},
      {"kda", "D=diagonal G=beta(0,1) P=none S=delta  ~ KDA"},
      {"pdn", "D=none G=beta(0,1) P=diagonal-key/ema_sq_squash S=delta  ~ PDN"},
      {"pgdn", "D=scalar G=beta(0,1) P=diagonal-key/ema_sq_squash S=delta  ~ PGDN"},
      {"pkda", "D=diagonal G=beta(0,1) P=diagonal-key/ema_sq_squash S=delta  ~ PKDA"},
      {"osdn", "D=none G=beta(0,1) P=diagonal-key/hypergrad_ogd S=delta  ~ OSDN"},
      {"osdn_apf", "D=none G=beta(0,1) P=diagonal-key/hypergrad_ogd+retention S=delta  ~ OSDN (APF)"},
      {"atq", "D=scalar G=beta(0,1) P=diagonal-query/ema_sq_squash S=delta  ~ GDN + diagonal ATQ (no "
              "released kernel)"},
      {"gated_deltaproduct", "D=scalar G=beta(0,1) P=none S=deltax2  ~ Gated DeltaProduct"},
      {"gdn_gva", "D=scalar G=beta(0,1) P=none S=delta  ~ GDN"},  // grouped value heads do not change the model
  };
  for (const std::string& stem : shippedSpecs()) {
    ParseResult r = parseSpecFile(specsDir() + "/" + stem + ".yaml");
    ASSERT_TRUE(r.ok()) << stem;
    ASSERT_TRUE(expected.count(stem)) << stem;
    EXPECT_EQ(classify(*r.spec), expected.at(stem)) << stem;
  }
}

TEST(ShippedSpecs, DefaultsMatchTheReleasedLayers) {
  // docs/math.md §3.6: x = 1.5, eps = 1e-6, centre -0.2, separate accumulator gate and gain.
  for (const char* stem : {"pdn", "pgdn", "pkda", "atq"}) {
    ParseResult r = parseSpecFile(specsDir() + "/" + stem + ".yaml");
    ASSERT_TRUE(r.ok()) << stem;
    const SquashParams& p = r.spec->precond.squash;
    EXPECT_EQ(p.x, 1.5) << stem;
    EXPECT_EQ(p.eps, 1e-6) << stem;
    EXPECT_EQ(p.center_init, -0.2) << stem;
    EXPECT_TRUE(p.has_gate) << stem;
    EXPECT_TRUE(p.has_gain) << stem;
    EXPECT_TRUE(r.spec->qk_l2norm) << stem;
    EXPECT_EQ(r.spec->l2norm_eps, 1e-6) << stem;
  }
  ParseResult pkda = parseSpecFile(specsDir() + "/pkda.yaml");
  ASSERT_TRUE(pkda.ok());
  EXPECT_EQ(pkda.spec->key_dims, (std::vector<int>{64, 120, 128}));  // PKDA-1B: K = 120
  ParseResult mamba = parseSpecFile(specsDir() + "/mamba2.yaml");
  ASSERT_TRUE(mamba.ok());
  EXPECT_FALSE(mamba.spec->qk_l2norm);
  EXPECT_TRUE(std::isinf(mamba.spec->gain.hi));
  EXPECT_EQ(mamba.spec->scale, 1.0);
}

/// Input names with their symbolic shape, from forwardSignature.
std::map<std::string, std::string> signatureOf(const std::string& stem) {
  ParseResult r = parseSpecFile(specsDir() + "/" + stem + ".yaml");
  EXPECT_TRUE(r.ok()) << stem;
  std::map<std::string, std::string> out;
  if (!r.ok()) return out;
  for (const TensorSig& t : forwardSignature(*r.spec)) out[t.name] = shapeText(t) + " " + t.dtype;
  return out;
}

TEST(ShippedSpecs, TensorSignaturesFollowAbi) {
  auto gdn = signatureOf("gdn");
  EXPECT_EQ(gdn["q"], "[B, T, H, K] input");
  EXPECT_EQ(gdn["v"], "[B, T, HV, V] input");
  EXPECT_EQ(gdn["g"], "[B, T, HV] f32");  // per-head gate
  EXPECT_EQ(gdn["beta"], "[B, T, HV] f32");
  EXPECT_EQ(gdn["initial_state"], "[N, HV, K, V] f32");
  EXPECT_EQ(gdn["cu_seqlens"], "[N+1] i64");
  EXPECT_EQ(gdn.count("precond_g"), 0u);
  EXPECT_EQ(gdn.count("initial_precond_state"), 0u);

  auto gdp = signatureOf("gated_deltaproduct");  // 2 Householder steps: k, v, beta carry T*2 rows
  EXPECT_EQ(gdp["q"], "[B, T, H, K] input");
  EXPECT_EQ(gdp["k"], "[B, T*2, H, K] input");
  EXPECT_EQ(gdp["v"], "[B, T*2, HV, V] input");
  EXPECT_EQ(gdp["beta"], "[B, T*2, HV] f32");
  EXPECT_EQ(gdp["g"], "[B, T, HV] f32");
  EXPECT_EQ(gdp["o"], "[B, T, HV, V] input");

  auto kda = signatureOf("kda");
  EXPECT_EQ(kda["g"], "[B, T, HV, K] f32");  // per-channel gate

  auto pkda = signatureOf("pkda");
  EXPECT_EQ(pkda["g"], "[B, T, HV, K] f32");
  EXPECT_EQ(pkda["precond_g"], "[B, T, H] f32");  // the ATK gate stays a scalar per key head
  EXPECT_EQ(pkda["precond_beta"], "[B, T, H] f32");
  EXPECT_EQ(pkda["precond_center"], "[H] f32");
  EXPECT_EQ(pkda["initial_precond_state"], "[N, H, K] f32");
  EXPECT_EQ(pkda["final_precond_state"], "[N, H, K] f32");

  auto la = signatureOf("linear_attention");
  EXPECT_EQ(la.count("g"), 0u);
  EXPECT_EQ(la.count("beta"), 0u);

  auto osdn = signatureOf("osdn");
  EXPECT_EQ(osdn.count("precond_g"), 0u);  // no retention
  EXPECT_EQ(osdn.count("precond_center"), 0u);
  EXPECT_EQ(osdn["initial_precond_state"], "[N, H, K] f32");
  auto apf = signatureOf("osdn_apf");
  EXPECT_EQ(apf["precond_g"], "[B, T, H] f32");
}

}  // namespace
}  // namespace dgps

namespace dgps {
namespace {

// Every ```yaml example in docs/spec.md is a complete, valid spec.
TEST(Docs, EveryYamlExampleInSpecMdParses) {
  const std::string doc = test::readText(std::string(DGPS_DOCS_DIR) + "/spec.md");
  ASSERT_FALSE(doc.empty());
  int blocks = 0;
  for (size_t at = doc.find("```yaml\n"); at != std::string::npos; at = doc.find("```yaml\n", at)) {
    at += 8;
    const size_t end = doc.find("```", at);
    ASSERT_NE(end, std::string::npos);
    const std::string text = doc.substr(at, end - at);
    ParseResult r = parseSpecString(text, "docs/spec.md example");
    EXPECT_TRUE(r.ok()) << test::allDiagnostics(r) << text;
    ++blocks;
    at = end + 3;
  }
  EXPECT_GE(blocks, 12);
}

}  // namespace
}  // namespace dgps
