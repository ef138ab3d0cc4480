// runCheckCommand (behind `dgps-spec check` and `dgpsc check`) and robustness of the parser against
// arbitrary bytes: it returns 0 or 1, prints one line per problem, and never throws or crashes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "DslTestUtil.h"
#include "dgps/dsl/CheckCommand.h"
#include "dgps/dsl/Classify.h"

namespace dgps {
namespace {

namespace fs = std::filesystem;

/// A file in a fresh temporary directory, removed with the fixture.
class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("dgps_dsl_test_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

struct CheckRun {
  int rc;
  std::string out, err;
};

CheckRun check(const std::string& path) {
  std::ostringstream out, err;
  const int rc = runCheckCommand(path, out, err);
  return {rc, out.str(), err.str()};
}

TEST(CheckCommand, GoodSpecPrintsClassHashAndCanonicalForm) {
  const std::string path = test::specsDir() + "/pgdn.yaml";
  const CheckRun r = check(path);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const Spec s = test::parseOk(test::readText(path));
  EXPECT_NE(r.out.find("# class: " + classify(s) + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# hash: " + specHash(s) + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("precond_center"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(canonicalYaml(s)), std::string::npos) << r.out;
  // The output is itself a spec (the header lines are comments) with the same hash.
  const Spec again = test::parseOk(r.out);
  EXPECT_EQ(specHash(again), specHash(s));
}

TEST(CheckCommand, EveryShippedSpecPasses) {
  for (const std::string& stem : test::shippedSpecs()) {
    const CheckRun r = check(test::specsDir() + "/" + stem + ".yaml");
    EXPECT_EQ(r.rc, 0) << stem << ": " << r.err;
  }
}

TEST(CheckCommand, BadSpecReturnsOneWithTheDiagnostic) {
  const std::string path = test::testDir() + "/specs_bad/unstable_neg_eigval.yaml";
  const CheckRun r = check(path);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(path + ":9:14: error: gain.range[1]: unstable write"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 error; spec rejected"), std::string::npos) << r.err;
}

TEST_F(TempDir, WarningOnlySpecReturnsZero) {
  const std::string p = write("x8.yaml",
                              "name: x8\ndecay: scalar\ngain: scalar\nprecond:\n  kind: diagonal\n"
                              "  squash: {x: 8}\nsolve: delta\nallow_unstable: true\n");
  const CheckRun r = check(p);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find(p + ":6:15: warning: precond.squash.x"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("allow_unstable: true"), std::string::npos);
}

TEST_F(TempDir, MissingFileDirectoryAndGarbageReturnOne) {
  CheckRun r = check((dir_ / "nope.yaml").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cannot open spec file"), std::string::npos) << r.err;

  r = check(dir_.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;

  std::string garbage;
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>(rng() & 0xff);
  r = check(write("garbage.yaml", garbage));
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;

  r = check(write("empty.yaml", ""));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(":1:1: error: empty spec"), std::string::npos) << r.err;
}

/// Random edits of a valid spec: delete, duplicate or replace a byte, swap two lines, truncate.
std::string mutate(std::string text, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  static const std::string alphabet = std::string(" :-[]{},#\"'\n\t0123456789.aeinx_&*!|>%@`?\\\r\x01\x7f") +
                                      std::string(1, '\0');
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = rng() % text.size();
    switch (rng() % 5) {
      case 0: text.erase(at, 1 + rng() % 4); break;
      case 1: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      case 2: text[at] = alphabet[rng() % alphabet.size()]; break;
      case 3: text.resize(at); break;
      case 4: {
        std::vector<std::string> lines;
        std::istringstream in(text);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (lines.size() > 2) std::swap(lines[rng() % lines.size()], lines[rng() % lines.size()]);
        text.clear();
        for (const std::string& l : lines) text += l + "\n";
        break;
      }
    }
  }
  return text;
}

TEST(Robustness, RandomEditsOfShippedSpecsNeverThrowAndAlwaysLocateErrors) {
  std::mt19937_64 rng(std::random_device{}());
  int rejected = 0;
  for (const std::string& stem : test::shippedSpecs()) {
    const std::string original = test::readText(test::specsDir() + "/" + stem + ".yaml");
    for (int i = 0; i < 300; ++i) {
      const std::string text = mutate(original, rng);
      ParseResult r;
      ASSERT_NO_THROW(r = parseSpecString(text, "fuzz.yaml"));
      for (const Diagnostic& d : r.diagnostics) {
        EXPECT_EQ(d.message.find("internal error"), std::string::npos) << formatDiagnostic(d) << "\n" << text;
        EXPECT_GE(d.line, 1) << formatDiagnostic(d) << "\n" << text;
        EXPECT_GE(d.column, 1) << formatDiagnostic(d) << "\n" << text;
        EXPECT_FALSE(d.message.empty());
        EXPECT_EQ(formatDiagnostic(d).find('\n'), std::string::npos) << formatDiagnostic(d);
      }
      if (!r.ok()) {
        ++rejected;
        EXPECT_TRUE(hasErrors(r.diagnostics));
      } else {
        // Whatever was accepted round-trips.
        ParseResult again = parseSpecString(canonicalYaml(*r.spec));
        ASSERT_TRUE(again.ok()) << test::allDiagnostics(again) << canonicalYaml(*r.spec);
        EXPECT_EQ(specHash(*again.spec), specHash(*r.spec));
      }
      if (HasFailure()) return;
    }
  }
  EXPECT_GT(rejected, 100);
}

TEST(Robustness, DeepNestingIsOneError) {
  const std::string text = "name: " + std::string(50000, '[') + std::string(50000, ']') + "\n";
  ParseResult r = parseSpecString(text, "deep.yaml");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u) << test::allDiagnostics(r);
  EXPECT_NE(r.diagnostics[0].message.find("nesting too deep"), std::string::npos) << r.diagnostics[0].message;
  EXPECT_EQ(r.diagnostics[0].line, 1);
}

TEST(Robustness, ControlCharactersAndLongValuesStayOnOneLine) {
  const std::string longWord(5000, 'z');
  for (const std::string& text : {
           std::string("name: t\ndecay: \"sca\\nlar\"\ngain: none\nprecond: none\nsolve: delta\n"),
           std::string("name: t\ndecay: ") + longWord + "\ngain: none\nprecond: none\nsolve: delta\n",
           std::string("name: t\n\"we\\tird\\x01key\": 1\ndecay: none\ngain: none\nprecond: none\nsolve: delta\n"),
       }) {
    ParseResult r = parseSpecString(text, "ctl.yaml");
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.diagnostics.size(), 1u) << test::allDiagnostics(r);
    const std::string line = formatDiagnostic(r.diagnostics[0]);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_LT(line.size(), 400u) << line;
  }
}

}  // namespace
}  // namespace dgps
