// Item: std::regex on untrusted text. libstdc++'s regex recursed per character and overflowed the stack
// on a long manifest entry; std::stoi aborted on a forged "Used 99999999999999999999 registers" line.
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include "RobustUtil.h"
#include "TextParse.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"

namespace dgps {
namespace {

using robust::TempDir;

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("fixture lacks " + from);
  return s.replace(at, from.size(), to);
}

// Opens the package and returns the RuntimeError message ("" when it opened).
std::string openError(const std::string& dir) {
  try {
    (void)Package::open(dir).spec();  // open reads manifest and source; spec() reads spec.yaml
    return "";
  } catch (const RuntimeError& e) {
    return e.what();
  }
}

TEST(RegexFree, NoStdRegexInTheRuntimeSources) {
  // The rule, checked: hand-written checks only, everywhere in runtime/ and its tools.
  int files = 0;
  for (const char* sub : {"runtime/lib", "runtime/tools", "runtime/include", "examples/host_app"}) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(DGPS_SOURCE_DIR) + "/" + sub)) {
      const std::string p = e.path().string();
      if (!e.is_regular_file() || (e.path().extension() != ".cpp" && e.path().extension() != ".h")) continue;
      ++files;
      const std::string text = robust::readFile(p);
      EXPECT_EQ(text.find("<regex>"), std::string::npos) << p;
      for (const char* f : {"std::stoi(", "std::stol(", "std::stoll(", "std::stoul(", "std::stoull(", "std::stod(",
                            "std::stof("}) {
        EXPECT_EQ(text.find(f), std::string::npos) << p << " uses the throwing " << f;
      }
    }
  }
  EXPECT_GT(files, 20);
}

TEST(RegexFree, LongManifestEntriesAreOneBoundedError) {
  const std::string huge(2 << 20, 'a');  // 2 MiB: overflowed the stack through std::regex
  const std::string manifest = robust::readFile(robust::generatedPackage("gdn") + "/manifest.yaml");
  struct Case {
    std::string from, to, key;
  } cases[] = {
      {"symbol: dgps_gdn_decode", "symbol: " + huge, "decode.symbol"},
      {"name: gdn", "name: " + huge, "name"},
      {"source: kernels.cu", "source: " + huge, "source"},
      {"spec_hash: \"", "spec_hash: \"" + huge, "spec_hash"},
      {"symbol: dgps_gdn_fwd_chunk_local", "symbol: " + huge + "dgps_gdn_fwd", "launch.forward[0].symbol"},
      {"smem: \"KP * 16", "smem: \"" + huge + "KP * 16", "launch.decode.smem"},
      {"chunk: [", "chunk: [" + std::string(5000, '9') + ", ", "tunables.chunk[0]"},
  };
  for (const auto& c : cases) {
    TempDir tmp;
    const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
    robust::writeFile(dir + "/manifest.yaml", replaced(manifest, c.from, c.to));
    const std::string msg = openError(dir);
    EXPECT_NE(msg.find(c.key + ":"), std::string::npos) << c.key << ": " << msg.substr(0, 300);
    EXPECT_NE(msg.find("expected"), std::string::npos) << msg.substr(0, 300);
    EXPECT_LT(msg.size(), 1000u) << "the message must not echo the whole entry";
  }
}

TEST(RegexFree, LongManifestEntryThroughTheTools) {
  TempDir tmp;
  const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
  const std::string manifest = robust::readFile(dir + "/manifest.yaml");
  robust::writeFile(dir + "/manifest.yaml", replaced(manifest, "symbol: dgps_gdn_decode",
                                                     "symbol: " + std::string(1 << 20, 'x')));
  const std::string cmds[] = {
      std::string(DGPS_RUN_EXE) + " " + dir + " --inputs " + tmp.path() + "/none --out " + tmp.path() + "/o",
      std::string(DGPS_TUNE_EXE) + " " + dir + " --shape B=1,T=64,H=1,K=64,V=64",
      std::string(DGPS_JIT_CHECK_EXE) + " " + dir,
  };
  for (const auto& cmd : cmds) {
    std::string out;
    const int rc = robust::runCommand(cmd, &out);
    EXPECT_NE(rc, 0) << cmd;
    EXPECT_LT(rc, 124) << "crashed or hung: " << cmd << "\n" << out.substr(0, 500);
    EXPECT_NE(out.find("decode.symbol"), std::string::npos) << cmd << "\n" << out.substr(0, 500);
  }
}

TEST(RegexFree, ForgedPtxasNumbersDoNotAbort) {
  const std::string log =
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "    99999999999999999999 bytes stack frame, 7 bytes spill stores, 18446744073709551616 bytes spill loads\n"
      "ptxas info    : Used 99999999999999999999 registers, used 99999999999999999999 barriers, 12 bytes smem\n"
      "ptxas info    : Compiling entry function '" + std::string(1 << 20, 'n') + "' for 'sm_90a'\n"
      "ptxas info    : Used 80 registers\n";
  std::vector<KernelResourceUsage> u;
  ASSERT_NO_THROW(u = parsePtxasInfo(log));
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].name, "k");
  EXPECT_EQ(u[0].registers, -1) << "an out-of-range count is not read";
  EXPECT_EQ(u[0].stack_frame_bytes, 0);
  EXPECT_EQ(u[0].spill_store_bytes, 7);
  EXPECT_EQ(u[0].shared_bytes, 12);
  EXPECT_EQ(u[1].registers, 80);
}

TEST(RegexFree, PtxasReportStillReadsRealLines) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'dgps_a' for 'sm_90a'\n"
      "ptxas info    : Function properties for dgps_a\n"
      "    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 2048 bytes smem, 904 bytes cmem[0]\n";
  const auto u = parsePtxasInfo(log);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].arch, "sm_90a");
  EXPECT_EQ(u[0].registers, 168);
  EXPECT_EQ(u[0].barriers, 1);
  EXPECT_EQ(u[0].shared_bytes, 2048);
  EXPECT_EQ(u[0].stack_frame_bytes, 16);
  EXPECT_EQ(u[0].spill_store_bytes, 4);
  EXPECT_EQ(u[0].spill_load_bytes, 8);
}

TEST(RegexFree, TileConfigAndArchTextAreChecked) {
  for (const std::string& bad : std::vector<std::string>{"chunk=99999999999999999999", "chunk=-1", "chunk=0x40", "chunk", "=4",
                                std::string(100000, ','), "warps=" + std::string(1 << 20, '4')}) {
    try {
      parseTileConfig(bad, TileConfig{64, 64, 4, 2});
      if (bad.find_first_not_of(',') != std::string::npos) ADD_FAILURE() << "accepted " << bad.substr(0, 40);
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
      EXPECT_LT(std::string(e.what()).size(), 1000u);
    }
  }
  const TileConfig c = parseTileConfig(" chunk = 32 , block_v=128", TileConfig{64, 64, 4, 2});
  EXPECT_EQ(c.chunk, 32);
  EXPECT_EQ(c.block_v, 128);
  for (const std::string& bad : std::vector<std::string>{"sm_", "sm_9", "sm_1000", "sm_90b", "compute_90a", std::string(1 << 20, '9'),
                                "sm_99999999999999999999"}) {
    try {
      parseJitTarget(bad);
      ADD_FAILURE() << "accepted " << bad.substr(0, 40);
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
      EXPECT_LT(std::string(e.what()).size(), 1000u);
    }
  }
}

TEST(RegexFree, CheckedIntegerParsing) {
  long long v = 0;
  EXPECT_TRUE(text::parseInt("9223372036854775807", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(v, LLONG_MAX);
  EXPECT_TRUE(text::parseInt("-9223372036854775808", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(v, LLONG_MIN);
  EXPECT_FALSE(text::parseInt("9223372036854775808", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_FALSE(text::parseInt("-9223372036854775809", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_FALSE(text::parseInt("", 0, 10, &v));
  EXPECT_FALSE(text::parseInt("-", 0, 10, &v));
  EXPECT_FALSE(text::parseInt("1 ", 0, 10, &v));
  EXPECT_FALSE(text::parseInt("11", 0, 10, &v));
  EXPECT_TRUE(text::parseInt("+7", 0, 10, &v));
  EXPECT_EQ(v, 7);
}

}  // namespace
}  // namespace dgps
