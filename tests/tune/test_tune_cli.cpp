// The dgps-tune command's errors: a bad command line or arguments that do not fit the package give one
// clear error and exit 2; without a GPU the command says so and exits 1. Runs the real binary too.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "TuneTestUtil.h"
#include "dgps/runtime/CudaDriver.h"
#include "TuneCommand.h"

namespace dgps {
namespace {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

CliRun tuneCommand(std::vector<std::string> args) {
  args.insert(args.begin(), "dgps-tune");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  CliRun r;
  r.rc = tune::runTuneCommand(int(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

int countLines(const std::string& s, const std::string& needle) {
  int n = 0;
  for (std::size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    pkg_ = tunetest::shippedPackage("pgdn");
    if (pkg_.empty()) GTEST_SKIP() << "generated/pgdn is absent";
  }
  std::string pkg_;
};

TEST_F(TuneCli, BadShapeIsOneErrorAndExit2) {
  for (const char* shape : {"B=8,T=4k,H=16,K=128,V=128", "B=8,T=4096,H=16,K=128", "Q=1", "B=8,,T=1"}) {
    const CliRun r = tuneCommand({pkg_, "--shape", shape});
    EXPECT_EQ(r.rc, 2) << shape << ": " << r.err;
    EXPECT_EQ(countLines(r.err, "error:"), 1) << shape << ": " << r.err;
    EXPECT_NE(r.err.find("--shape"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST_F(TuneCli, ShapeOutsideThePackageIsExit2) {
  const CliRun r = tuneCommand({pkg_, "--shape", "B=1,T=64,H=2,K=96,V=128"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("K in [64, 128]"), std::string::npos) << r.err;
  EXPECT_EQ(countLines(r.err, "error:"), 1) << r.err;
}

TEST_F(TuneCli, MissingPackageAndBadOptionsAreExit2) {
  CliRun r = tuneCommand({"/nonexistent/pkg", "--shape", "T=64,H=2,K=64,V=64"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("/nonexistent/pkg"), std::string::npos) << r.err;
  r = tuneCommand({pkg_});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--shape"), std::string::npos) << r.err;
  r = tuneCommand({pkg_, "--shape", "T=64,H=2,K=64,V=64", "--dtype", "f32"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--dtype"), std::string::npos) << r.err;
  r = tuneCommand({pkg_, "--shape", "T=64,H=2,K=64,V=64", "--reps", "0"});
  EXPECT_EQ(r.rc, 2);
}

TEST_F(TuneCli, HelpIsExit0) {
  const CliRun r = tuneCommand({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("--shape"), std::string::npos);
}

TEST_F(TuneCli, WithoutAGpuSaysSoAndExits1) {
  std::string why;
  if (cudaAvailable(&why)) GTEST_SKIP() << "this machine has a GPU";
  tunetest::TempDir tmp;
  const CliRun r = tuneCommand({pkg_, "--shape", "B=8,T=4096,H=16,K=128,V=128", "--db", tmp / "db.jsonl"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("no GPU"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(tmp / "db.jsonl").good()) << "nothing may be recorded without a GPU";
}

TEST_F(TuneCli, TheBinaryExitsNonZeroWithOneError) {
  const std::string cmd = std::string(DGPS_TUNE_EXE) + " " + pkg_ + " --shape B=8,T=x 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2) << out;
  EXPECT_EQ(countLines(out, "error:"), 1) << out;
  EXPECT_NE(out.find("'T=x'"), std::string::npos) << out;
}

}  // namespace
}  // namespace dgps
