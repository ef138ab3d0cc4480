// Item: dgps-jit-check had no compile timeout (a macro bomb ran for minutes), and NVRTC followed
// `#include "/etc/passwd"` and echoed the file into its log. Compiles now run in a child under a
// limit; a package's source may include only the embedded device library.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "IncludeScan.h"
#include "RobustUtil.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

using robust::TempDir;

// The line number of the first refused include in `src`, or 0.
int refusedLine(const std::string& src) {
  JitRequest r;
  r.source = src;
  r.source_name = "pkg/kernels.cu";
  try {
    checkSourceIncludes(r);
    return 0;
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("pkg/kernels.cu:", 0), 0u) << msg;
    EXPECT_NE(msg.find("dgps/device/"), std::string::npos) << msg;
    return std::stoi(msg.substr(15));
  }
}

TEST(Includes, TheShippedPackagesPass) {
  for (const char* p : {"gdn", "pgdn", "kda", "pkda", "osdn", "deltanet", "mamba2"}) {
    EXPECT_EQ(refusedLine(robust::readFile(robust::generatedPackage(p) + "/kernels.cu")), 0) << p;
  }
}

TEST(Includes, EveryWayOfReachingTheFileSystemIsRefused) {
  const std::string ok = "#include \"dgps/tile/tile.cuh\"\n";
  struct Case {
    std::string src;
    int line;
  } cases[] = {
      {ok + "#include \"/etc/passwd\"\n", 2},
      {ok + "  #  include <stdio.h>\n", 2},
      {ok + "#include <cuda_bf16.h>\n", 2},
      {ok + "#include \"dgps/device/../../../etc/passwd\"\n", 2},
      {ok + "#include \"dgps/device/not_a_header.cuh\"\n", 2},
      {ok + "#include \"abi.h\"\n", 2},  // the short alias is for device headers among themselves
      {ok + "%:include \"/etc/passwd\"\n", 2},
      {ok + "?\?=include \"/etc/passwd\"\n", 2},
      {ok + "#inc\\\nlude \"/etc/passwd\"\n", 2},
      {ok + "#include \\\n\"/etc/passwd\"\n", 2},
      {ok + "/* note */ # /* x */ include \"/etc/passwd\"\n", 2},
      {ok + "/* a comment\n   over lines */ #include \"/etc/passwd\"\n", 3},
      {ok + "#define P \"/etc/passwd\"\n#include P\n", 3},
      {ok + "#include_next <stdio.h>\n", 2},
      {ok + "#import \"/etc/passwd\"\n", 2},
      {ok + "#embed \"/etc/passwd\"\n", 2},
      {ok + "#if __has_include(\"/etc/shadow\")\n#endif\n", 2},
      {ok + "const char* s = R\"x(\n/*\n)x\";\n#include \"/etc/passwd\"\n", 5},
      {ok + "int a = 1'0; const char* s = \"x'/*\";\n#include \"/etc/passwd\"\n", 3},
      {"\n\n\n#include\"/etc/passwd\"", 4},
  };
  for (const auto& c : cases) EXPECT_EQ(refusedLine(c.src), c.line) << c.src;
  // Allowed: the embedded device headers, however spelled around them.
  EXPECT_EQ(refusedLine(ok + "# include <dgps/device/abi.h>  // comment\n#pragma once\n"), 0);
  // Not a directive: '#' not first on the line, include in a string.
  EXPECT_EQ(refusedLine(ok + "int x; // #include \"/etc/passwd\"\nconst char* s = \"#include <x>\";\n"), 0);
}

TEST(Includes, TheJitPathRefusesBeforeCompiling) {
  TempDir tmp;
  JitRequest r;
  r.source = "#include \"/etc/passwd\"\nextern \"C\" __global__ void k() {}\n";
  r.source_name = "evil/kernels.cu";
  r.target.arch = "sm_90a";
  r.target.sm = 90;
  JitCompiler jit{BinaryCache(tmp / "cache")};
  try {
    jit.compile(r);
    FAIL() << "compiled";
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("evil/kernels.cu:1:"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("root:"), std::string::npos) << "the file's contents leaked: " << msg;
  }
}

TEST(Includes, JitCheckNamesTheLine) {
  TempDir tmp;
  const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
  std::string src = robust::readFile(dir + "/kernels.cu");
  src.insert(src.find('\n') + 1, "#include \"/etc/passwd\"\n");
  robust::writeFile(dir + "/kernels.cu", src);
  std::string out;
  const int rc = robust::runCommand(std::string(DGPS_JIT_CHECK_EXE) + " " + dir + " --square --cache-dir " +
                                        tmp.path() + "/cache",
                                    &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("gdn/kernels.cu:2: includes \"/etc/passwd\""), std::string::npos) << out;
  EXPECT_EQ(out.find("root:"), std::string::npos) << out;
}

TEST(CompileTimeout, MacroBombIsKilledAndNamed) {
  TempDir tmp;
  const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
  // 2^40 tokens: the preprocessor alone would run for hours.
  std::string bomb = "#define B0 x\n";
  for (int i = 1; i <= 40; ++i) bomb += "#define B" + std::to_string(i) + " B" + std::to_string(i - 1) + " B" + std::to_string(i - 1) + "\n";
  bomb += "B40\n";
  robust::writeFile(dir + "/kernels.cu", robust::readFile(dir + "/kernels.cu") + bomb);
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = robust::runCommand(std::string(DGPS_JIT_CHECK_EXE) + " " + dir +
                                        " --config chunk=64 --square --jobs 2 --compile-timeout 2 --cache-dir " +
                                        tmp.path() + "/cache",
                                    &out, 40);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("compile of gdn bf16 K="), std::string::npos) << out;
  EXPECT_NE(out.find("exceeded 2 s"), std::string::npos) << out;
  EXPECT_LT(s, 30.0) << out;
}

TEST(CompileTimeout, BadLimitIsRefused) {
  std::string out;
  const int rc = robust::runCommand(std::string(DGPS_JIT_CHECK_EXE) + " " + robust::generatedPackage("gdn") +
                                        " --compile-timeout 0",
                                    &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--compile-timeout"), std::string::npos) << out;
}

}  // namespace
}  // namespace dgps
