// One regression test per kind of defect the robustness work fixed on the dsl side, each with the
// example that used to crash, hang, exhaust memory or be accepted.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

const std::string kGdn =
    "name: gdn\n"
    "decay: scalar\n"
    "gain: {kind: scalar, range: [0, 1]}\n"
    "precond: none\n"
    "solve: delta\n";

std::string firstError(const ParseResult& r) {
  for (const Diagnostic& d : r.diagnostics)
    if (d.severity == Severity::Error) return formatDiagnostic(d);
  return "";
}

/// A private temporary directory, removed afterwards.
struct TempDir : ::testing::Test {
  std::filesystem::path dir;
  void SetUp() override {
    char tmpl[] = "/tmp/dgps_robustness_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

// ---- 1. no std::regex on untrusted text: a 30,000-character name used to overflow the stack ----

TEST(Regression, LongSpecNameIsOneErrorNotACrash) {
  const ParseResult r = parseSpecString("name: " + std::string(30000, 'a') + "\n" + kGdn.substr(kGdn.find('\n') + 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(firstError(r).find("name: is 30000 characters long"), std::string::npos) << firstError(r);
  EXPECT_NE(firstError(r).find("at most 64 characters"), std::string::npos) << firstError(r);
  // The hand-written check rejects what the regex [a-z][a-z0-9_]* rejected, and accepts what it accepted.
  for (const char* bad : {"Gdn", "1gdn", "_gdn", "g-dn", "g dn", "gdn\xc3\xa9", "g.dn"}) {
    const ParseResult b = parseSpecString("name: \"" + std::string(bad) + "\"\n" + kGdn.substr(kGdn.find('\n') + 1));
    EXPECT_NE(firstError(b).find("is not an identifier"), std::string::npos) << bad << ": " << firstError(b);
  }
  for (const std::string& good : {std::string("g"), std::string("gdn_2"), std::string("a0_"), std::string(64, 'z')}) {
    const ParseResult g = parseSpecString("name: " + good + "\n" + kGdn.substr(kGdn.find('\n') + 1));
    EXPECT_TRUE(g.ok()) << good << ": " << firstError(g);
  }
}

TEST(Regression, LongUnknownValueIsReportedQuickly) {
  // The "did you mean" search used to build a word-length-by-candidate table for every candidate.
  const auto start = std::chrono::steady_clock::now();
  const ParseResult r = parseSpecString("name: t\ndecay: " + std::string(500000, 'k') +
                                        "\ngain: none\nprecond: none\nsolve: delta\n");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(firstError(r).find("unknown value 'kkkk"), std::string::npos) << firstError(r);
  EXPECT_LT(s, 5.0);
}

// ---- 4. bounded reads: FIFOs, devices and huge files are refused unread ----

TEST_F(TempDir, SpecFromDevZeroFifoOrHugeFileIsRefused) {
  const std::string fifo = (dir / "spec.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string huge = (dir / "huge.yaml").string();
  { std::ofstream(huge) << "name: x\n"; }
  std::filesystem::resize_file(huge, 3ull << 30);  // sparse: 3 GiB
  const std::pair<std::string, std::string> cases[] = {
      {"/dev/zero", "is a character device"}, {fifo, "is a FIFO"}, {huge, "the limit for a spec file is"}};
  for (const auto& [path, message] : cases) {
    const ParseResult r = parseSpecFile(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_NE(firstError(r).find(message), std::string::npos) << firstError(r);
  }
}

TEST_F(TempDir, SafetensorsFromDevZeroOrFifoIsRefused) {
  const std::string fifo = (dir / "in.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo}) {
    try {
      readSafetensors(path);
      FAIL() << path << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
}

// ---- 4. the reference bounds what it allocates ----

TEST(Regression, ManyEmptySequencesAreRefusedBeforeAllocating) {
  // 20,000 empty sequences in a 10-token batch used to size 3.8 GB of final states.
  Spec spec = *parseSpecString(kGdn).spec;
  ReferenceProblem shape;
  shape.batch = 1, shape.seq_len = 10, shape.heads_qk = 1, shape.heads_v = 1, shape.key_dim = 128,
  shape.value_dim = 128, shape.cu_seqlens = {0, 10};
  ReferenceInputs in = generateInputs(spec, shape, 7, ScalarType::F32);
  Tensor cu(ScalarType::I64, {20001});
  for (std::int64_t i = 0; i < 20001; ++i) cu.set(i, i == 20000 ? 10 : 0);
  in["cu_seqlens"] = cu;
  try {
    runReference(spec, in);
    FAIL() << "accepted";
  } catch (const DataError& e) {
    // 20,000 final states of 128 x 128: over the element limit, refused before anything is allocated.
    EXPECT_NE(std::string(e.what()).find("N=20000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("limit is " + std::to_string(kMaxReferenceOutputElements)),
              std::string::npos)
        << e.what();
  }
}

TEST(Regression, HugeOutputIsRefusedNamingTheLimit) {
  Spec spec = *parseSpecString(kGdn).spec;
  ReferenceProblem shape;
  shape.batch = 1, shape.seq_len = 4, shape.heads_qk = 1, shape.heads_v = 1, shape.key_dim = 128,
  shape.value_dim = 128;
  shape.cu_seqlens = {0, 4};
  EXPECT_NO_THROW(checkReferenceSize(spec, shape));
  shape.seq_len = 10000000, shape.cu_seqlens = {0, 10000000};  // o alone: 1.28e9 values
  try {
    checkReferenceSize(spec, shape);
    FAIL() << "accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("limit is " + std::to_string(kMaxReferenceOutputElements)),
              std::string::npos)
        << e.what();
  }
}

// ---- 5. duplicates, tags and second documents are refused ----

TEST(Regression, SafetensorsDuplicateTensorNameIsRefused) {
  SafetensorsFile f;
  Tensor t(ScalarType::F32, {2});
  t.set(0, 1.5), t.set(1, -2.0);
  f.tensors.emplace("q", t);
  std::string bytes = serializeSafetensors(f);
  // Rewrite the header with "q" twice (both entries valid on their own).
  const std::string entry = "\"q\":{\"data_offsets\":[0,8],\"dtype\":\"F32\",\"shape\":[2]}";
  std::string header = "{" + entry + "," + entry + "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header + bytes.substr(bytes.size() - 8);
  try {
    parseSafetensors(file, "dup.safetensors");
    FAIL() << "accepted a header naming 'q' twice";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key 'q'"), std::string::npos) << e.what();
  }
}

TEST(Regression, YamlTagsDuplicateKeysAndSecondDocumentsAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {kGdn + "normalize: {eps: !!str 1e-6}\n", "YAML tag '!!str' is not allowed"},
      {kGdn + "scale: !!float 0.5\n", "YAML tag '!!float' is not allowed"},
      {kGdn + "dims: !mine {key: [64]}\n", "YAML tag '!mine' is not allowed"},
      {kGdn + "decay: none\n", "duplicate key 'decay'"},
      {kGdn + "---\n" + kGdn, "found a second one"},
  };
  for (const auto& [text, message] : cases) {
    const ParseResult r = parseSpecString(text, "t.yaml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(firstError(r).find(message), std::string::npos) << firstError(r);
  }
}

// ---- 6. every input error at once ----

TEST(Regression, ReferenceReportsEveryInputErrorTogether) {
  Spec spec = *parseSpecString(kGdn).spec;
  ReferenceProblem shape;
  shape.batch = 1, shape.seq_len = 6, shape.heads_qk = 1, shape.heads_v = 1, shape.key_dim = 128,
  shape.value_dim = 128, shape.cu_seqlens = {0, 6};
  ReferenceInputs in = generateInputs(spec, shape, 11, ScalarType::F32);
  in.erase("beta");                          // missing
  in["g"].set(2, 0.5);                       // positive log-decay
  in["extra"] = Tensor(ScalarType::F32, {1});  // not an input of GDN
  try {
    runReference(spec, in);
    FAIL() << "accepted";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("3 input errors"), std::string::npos) << m;
    for (const char* part : {"'beta': missing required input", "'g': expected finite log-decay", "'extra': unexpected"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  }
}

}  // namespace
}  // namespace dgps
