// Item: tuning records dated 9999 won forever and were only format-checked; duplicate JSON keys resolved
// last-wins. Manifests accepted a second YAML document and YAML tags on numbers, and a package's
// spec.yaml accepted `heads.qk: 0` for `any`.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "RobustUtil.h"
#include "dgps/dsl/Diagnostic.h"
#include "dgps/dsl/SpecParser.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps {
namespace {

using robust::TempDir;

std::string withDate(const std::string& date) {
  tuning::TuningRecord r = robust::sampleRecord();
  r.date = date;
  return tuning::toJsonLine(r);
}

std::string parseError(const std::string& line) {
  tuning::TuningRecord r;
  std::string error;
  if (tuning::parseJsonLine(line, &r, &error)) return "";
  return error.empty() ? "(no message)" : error;
}

TEST(Records, DatesMustBeRealAndNotInTheFuture) {
  EXPECT_EQ(parseError(withDate(tuning::utcNow())), "");
  EXPECT_EQ(parseError(withDate("2024-02-29T23:59:59.999Z")), "") << "a leap day";
  for (const char* bad : {"9999-12-31T00:00:00.000Z", "2023-02-29T00:00:00.000Z", "2025-13-01T00:00:00.000Z",
                          "2025-04-31T00:00:00.000Z", "2025-01-00T00:00:00.000Z", "2025-01-01T24:00:00.000Z",
                          "2025-01-01T00:60:00.000Z", "2025-01-01T00:00:60.000Z", "1900-02-29T00:00:00.000Z",
                          "0000-01-01T00:00:00.000Z"}) {
    const std::string e = parseError(withDate(bad));
    EXPECT_EQ(e.rfind("date: expected", 0), 0u) << bad << ": " << e;
  }
  EXPECT_NE(parseError(withDate("9999-12-31T00:00:00.000Z")).find("future"), std::string::npos);
  // The bound is now + 1 day: a slightly fast clock elsewhere is fine, a wrong year is not.
  tuning::TuningRecord r;
  std::string error;
  EXPECT_TRUE(tuning::parseJsonLine(withDate("2030-01-01T00:00:00.000Z"), &r, &error, "2030-01-01T00:00:00.000Z"));
  EXPECT_FALSE(tuning::parseJsonLine(withDate("2030-01-01T00:00:00.001Z"), &r, &error, "2030-01-01T00:00:00.000Z"));
}

TEST(Records, AFutureRecordDoesNotWinTheLookup) {
  TempDir tmp;
  const std::string path = tmp / "tuning.jsonl";
  tuning::TuningRecord good = robust::sampleRecord();
  tuning::TuningRecord forged = good;
  forged.config = tuning::TileConfig{32, 32, 8, 1};
  forged.date = "9999-01-01T00:00:00.000Z";
  robust::writeFile(path, tuning::toJsonLine(forged) + "\n" + tuning::toJsonLine(good) + "\n");
  tuning::TuningDb db(path);
  ASSERT_TRUE(db.load());
  ASSERT_EQ(db.records().size(), 1u);
  EXPECT_EQ(db.records()[0].config, good.config);
  ASSERT_EQ(db.warnings().size(), 1u);
  EXPECT_EQ(db.warnings()[0].line, 1);
  EXPECT_NE(db.warnings()[0].message.find("future"), std::string::npos);
}

TEST(Records, DuplicateKeysAreRefusedByName) {
  const std::string line = withDate(tuning::utcNow());
  // A second "config" at the top level, and a second "warps" inside config.
  std::string top = line;
  top.insert(top.size() - 1, ",\"config\":{\"chunk\":32,\"block_v\":32,\"warps\":8,\"stages\":1}");
  EXPECT_NE(parseError(top).find("duplicate key \"config\""), std::string::npos) << parseError(top);
  std::string inner = line;
  const auto at = inner.find("\"warps\":4");
  ASSERT_NE(at, std::string::npos);
  inner.insert(at, "\"warps\":8,");
  EXPECT_NE(parseError(inner).find("duplicate key \"warps\""), std::string::npos) << parseError(inner);
  // The same key in different objects is fine ("name" is not a field of both, "chunk" is only in config).
  EXPECT_EQ(parseError(line), "");
}

TEST(Records, DeepOrLongLinesAreRefused) {
  EXPECT_NE(parseError(std::string(100000, '[') + std::string(100000, ']')), "");
  EXPECT_NE(parseError("{\"a\":\"" + std::string(1 << 20, 'x') + "\"}").find("bytes"), std::string::npos);
}

// Opens the package and returns the RuntimeError message ("" when it opened).
std::string openError(const std::string& dir) {
  try {
    (void)Package::open(dir).spec();  // open reads manifest and source; spec() reads spec.yaml
    return "";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
    return e.what();
  }
}

void edit(const std::string& path, const std::string& from, const std::string& to) {
  std::string s = robust::readFile(path);
  const auto at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  robust::writeFile(path, s.replace(at, from.size(), to));
}

TEST(Manifests, SecondDocumentTagsAndAnchorsAreRefused) {
  struct Case {
    std::string file, from, to, where, what;
  } cases[] = {
      {"manifest.yaml", "plan:", "---\nname: other\n...\nplan:", "manifest.yaml:", "YAML"},
      {"manifest.yaml", "dgps_package: 2", "dgps_package: 2\n---\ndgps_package: 2", "manifest.yaml:2:1:", "second YAML document"},
      {"manifest.yaml", "bytes_per_token_head: ", "bytes_per_token_head: !!str ", "manifest.yaml:", "tag !!str"},
      {"manifest.yaml", "codegen_version: 1", "codegen_version: !!int 1", "manifest.yaml:2:", "tag !!int"},
      {"manifest.yaml", "warps: [4, 8]", "warps: &w [4, 8]", "manifest.yaml:", "anchor"},
      {"spec.yaml", "eps: 1e-6", "eps: !!str 1e-6", "spec.yaml:", "tag !!str"},
      {"spec.yaml", "allow_unstable: false", "allow_unstable: false\n---\nname: x", "spec.yaml:", "second YAML document"},
      {"spec.yaml", "qk: any", "qk: 0", "spec.yaml:", "qk: any"},
      {"spec.yaml", "scale: auto", "scale: auto  # a comment", "spec.yaml:", "canonical form"},
  };
  for (const auto& c : cases) {
    TempDir tmp;
    const std::string dir = robust::copyPackage("pgdn", tmp / "pgdn");
    edit(dir + "/" + c.file, c.from, c.to);
    const std::string msg = openError(dir);
    EXPECT_NE(msg.find(c.where), std::string::npos) << c.to << ": " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.to << ": " << msg;
  }
}

// The launch formulas are untrusted text: nesting, length and integer size are bounded at load, with one
// error naming line:column and what was expected; a let cannot refer to itself or a later let, so no
// definition cycle exists; a formula that overflows for a call's shape is one InvalidArgument at that call.
TEST(Manifests, HostileLaunchFormulasAreOneBoundedError) {
  struct Case {
    std::string from, to, what;
  } cases[] = {
      {"value: \"align_up(K, 16)\"", "value: \"" + std::string(200, '(') + "K" + std::string(200, ')') + "\"",
       "launch.let[0].value: bad formula"},
      {"value: \"align_up(K, 16)\"", "value: \"" + std::string(20, '(') + "K" + std::string(20, ')') + "\"",
       "nests deeper than 16 levels"},
      {"value: \"align_up(K, 16)\"", "value: \"KP + 1\"", "unknown name 'KP'"},
      {"value: \"align_up(K, 16)\"", "value: \"slots\"", "unknown name 'slots'"},
      {"value: \"align_up(K, 16)\"", "value: \"K * 123456789012345678901234567890\"", "does not fit in 64 bits"},
      {"value: \"align_up(K, 16)\"", "value: \"" + std::string(300, 'K') + "\"", "expected at most 256 characters, got"},
      {"block: [\"warps * 32\"", "block: [\"warps ** 32\"", "launch.forward[0].block[0]"},
      {"    - {name: KP,", "    - {name: KP, value: \"1\"}\n" + std::string("    - {name: KP,"),
       "'KP' is already a symbol or an earlier let name"},
  };
  for (const auto& c : cases) {
    TempDir tmp;
    const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
    edit(dir + "/manifest.yaml", c.from, c.to);
    const std::string msg = openError(dir);
    EXPECT_EQ(msg.rfind(dir + "/manifest.yaml:", 0), 0u) << msg.substr(0, 300);
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.to.substr(0, 80) << ": " << msg.substr(0, 400);
    EXPECT_LT(msg.size(), 1200u) << "the message must not echo the whole formula";
  }
  // Loads, but overflows 64 bits for every real shape: the call fails with one InvalidArgument.
  TempDir tmp;
  const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
  edit(dir + "/manifest.yaml", "grid: [\"slots * HV\"", "grid: [\"slots * HV * 9223372036854775807\"");
  const Package pkg = Package::open(dir);
  ForwardProblem p;
  p.batch = p.num_seqs = 2;
  p.seq_len = 100;
  p.heads_qk = p.heads_v = 2;
  p.key_dim = p.value_dim = 64;
  Runtime rt;
  try {
    rt.forwardWorkspaceBytes(pkg, p, pkg.manifest().default_config);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("launch.forward[0].grid[0] = \"slots * HV * 9223372036854775807\" overflows"),
              std::string::npos)
        << e.what();
  }
}

// The three schema readers (spec, package manifest, tuning database) share one error style (dsl Diagnostic.h):
// "<file>:<line>[:<col>]: <severity>: <field path>: <what is wrong>", what was expected said in the message.
TEST(SchemaReaders, ShareOneErrorStyle) {
  TempDir tmp;
  const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
  // A spec field of the wrong kind: line 13, normalize.qk_l2norm.
  std::string spec = robust::readFile(dir + "/spec.yaml");
  const auto flag = spec.find("qk_l2norm: true");
  ASSERT_NE(flag, std::string::npos);
  const ParseResult parsed = parseSpecString(spec.replace(flag, 15, "qk_l2norm: maybe"), "s.yaml");
  ASSERT_FALSE(parsed.ok());
  const std::string specMsg = formatDiagnostic(parsed.diagnostics.at(0));
  EXPECT_TRUE(std::regex_search(specMsg, std::regex(R"(^s\.yaml:13:\d+: error: normalize\.qk_l2norm: .*expected)")))
      << specMsg;
  // A manifest field of the wrong kind: line 38, the tunables' warps list.
  edit(dir + "/manifest.yaml", "warps: [4, 8]", "warps: [4, x]");
  const std::string manifestMsg = openError(dir);
  ASSERT_EQ(manifestMsg.rfind(dir + "/manifest.yaml:38:", 0), 0u) << manifestMsg;
  EXPECT_TRUE(std::regex_search(manifestMsg, std::regex(R"(^[^ ]+:38:\d+: error: tunables\.warps\[1\]: expected an )"
                                                        R"(integer .*, got 'x')")))
      << manifestMsg;
  // A tuning record with a field of the wrong kind on line 2 (the record itself is skipped).
  const std::string db = tmp / "tuning.jsonl";
  std::string bad = tuning::toJsonLine(robust::sampleRecord());
  const auto at = bad.find("\"warps\":");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, bad.find_first_of(",}", at) - at, "\"warps\":\"four\"");
  robust::writeFile(db, tuning::toJsonLine(robust::sampleRecord()) + "\n" + bad + "\n");
  tuning::TuningDb tdb(db);
  ASSERT_TRUE(tdb.load());
  ASSERT_EQ(tdb.warnings().size(), 1u);
  const std::string dbMsg = tuning::format(tdb.warnings()[0]);
  EXPECT_EQ(dbMsg.rfind(db + ":2: warning: config.warps: expected an integer in [1, 1024], got \"four\"", 0), 0u)
      << dbMsg;
}

TEST(Manifests, HeadsQkZeroNamesLineAndExpectation) {
  TempDir tmp;
  const std::string dir = robust::copyPackage("pgdn", tmp / "pgdn");
  const std::string spec = robust::readFile(dir + "/spec.yaml");
  int line = 1;
  for (std::size_t i = 0; i < spec.find("qk: any"); ++i) line += spec[i] == '\n';
  edit(dir + "/spec.yaml", "qk: any", "qk: 0");
  const std::string msg = openError(dir);
  EXPECT_NE(msg.find("spec.yaml:" + std::to_string(line) + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected '  qk: any'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got '  qk: 0'"), std::string::npos) << msg;
}

TEST(Manifests, TheShippedPackagesOpen) {
  for (const char* p : {"atq", "deltanet", "gdn", "kda", "linear_attention", "mamba2", "osdn", "osdn_apf", "pdn",
                        "pgdn", "pkda"}) {
    EXPECT_EQ(openError(robust::generatedPackage(p)), "") << p;
  }
}

TEST(Manifests, ASpecFileInsteadOfAPackageIsNamed) {
  const std::string spec = std::string(DGPS_SOURCE_DIR) + "/specs/pgdn.yaml";
  const std::string msg = openError(spec);
  EXPECT_NE(msg.find("this is a spec"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dgpsc tune"), std::string::npos) << msg;
  std::string out;
  const int rc = robust::runCommand(std::string(DGPS_TUNE_EXE) + " " + spec + " --shape B=1,T=64,H=2,K=64,V=64", &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("this is a spec; compile it first"), std::string::npos) << out;
  // Also before --shape is given.
  EXPECT_EQ(robust::runCommand(std::string(DGPS_TUNE_EXE) + " " + spec, &out), 2) << out;
  EXPECT_NE(out.find("this is a spec; compile it first"), std::string::npos) << out;
}

}  // namespace
}  // namespace dgps
