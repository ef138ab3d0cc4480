// The isolated-trial protocol on the CPU, with fake helpers standing in for dgps-tune-trial: a
// helper that crashes, hangs, reports a CUDA fault, reports non-finite outputs or exits oddly is
// classified correctly and never takes the parent down; the deadline kills a hung helper. The real
// helper's own argument and package errors are checked too (they need no GPU).
#include <gtest/gtest.h>

#include <chrono>

#include "TuneTestUtil.h"
#include "dgps/runtime/tune/TrialProcess.h"

namespace dgps {
namespace {

using tune::TrialOutcome;
using Kind = tune::TrialOutcome::Kind;

const char* kFindReport =
    "R=''\n"
    "while [ $# -gt 0 ]; do if [ \"$1\" = \"--report\" ]; then R=\"$2\"; fi; shift; done\n";

class TrialProcess : public ::testing::Test {
 protected:
  tune::TrialRequest request() const {
    tune::TrialRequest r;
    r.package = tmp_ / "pkg";
    r.inputs = tmp_ / "in.safetensors";
    r.outputs = tmp_ / "out.safetensors";
    r.report = tmp_ / "verdict.txt";
    r.config = TileConfig{64, 32, 4, 1};  // every field explicit: not the defaults
    r.full_batch = 8;
    r.full_tokens = 4096;
    return r;
  }
  TrialOutcome runFake(const std::string& body, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const std::string helper = tmp_ / "fake-helper.sh";
    tunetest::writeScript(helper, std::string(kFindReport) + body);
    return tune::runIsolatedTrial(helper, request(), tmp_ / "log.txt", timeout);
  }
  tunetest::TempDir tmp_;
};

TEST_F(TrialProcess, ArgumentsCarryTheWholeRequest) {
  const auto args = tune::trialArguments(request());
  const std::string joined = [&] {
    std::string s;
    for (const auto& a : args) s += a + " ";
    return s;
  }();
  EXPECT_NE(joined.find("--config chunk=64,block_v=32,warps=4,stages=1"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--full-batch 8 --full-tokens 4096"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--report " + (tmp_ / "verdict.txt")), std::string::npos) << joined;
}

TEST_F(TrialProcess, OkVerdict) {
  const TrialOutcome o = runFake("printf 'ok\\n\\n' > \"$R\"; exit 0");
  EXPECT_EQ(o.kind, Kind::Ok) << o.message;
}

TEST_F(TrialProcess, CrashIsAFaultNamingTheSignal) {
  const TrialOutcome o = runFake("echo 'about to crash'; kill -SEGV $$");
  EXPECT_EQ(o.kind, Kind::Fault);
  EXPECT_NE(o.message.find("signal 11"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("about to crash"), std::string::npos) << "log tail: " << o.message;
}

TEST_F(TrialProcess, CudaFaultVerdictKeepsTheDriverMessage) {
  const TrialOutcome o = runFake(
      "printf 'fault\\ncuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
      "encountered)\\n' > \"$R\"; exit 3");
  EXPECT_EQ(o.kind, Kind::Fault);
  EXPECT_NE(o.message.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << o.message;
}

TEST_F(TrialProcess, NonFiniteVerdict) {
  const TrialOutcome o = runFake("printf 'nonfinite\\n3 non-finite output element(s)\\n' > \"$R\"; exit 4");
  EXPECT_EQ(o.kind, Kind::NonFinite);
  EXPECT_NE(o.message.find("3 non-finite"), std::string::npos) << o.message;
}

TEST_F(TrialProcess, OddExitIsAnErrorWithTheLogTail) {
  const TrialOutcome o = runFake("echo 'helper: something odd' >&2; exit 7");
  EXPECT_EQ(o.kind, Kind::Error);
  EXPECT_NE(o.message.find("status 7"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("something odd"), std::string::npos) << o.message;
}

TEST_F(TrialProcess, HungHelperIsKilledAtTheDeadline) {
  const auto t0 = std::chrono::steady_clock::now();
  const TrialOutcome o = runFake("sleep 30", std::chrono::milliseconds(300));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.kind, Kind::Timeout) << o.message;
  EXPECT_LT(s, 10.0);
}

TEST_F(TrialProcess, MissingHelperIsAnError) {
  const TrialOutcome o = tune::runIsolatedTrial(tmp_ / "no-such-helper", request(), tmp_ / "log.txt",
                                                std::chrono::seconds(5));
  EXPECT_EQ(o.kind, Kind::Error);
  EXPECT_NE(o.message.find("could not be started"), std::string::npos) << o.message;
}

TEST_F(TrialProcess, StaleVerdictIsNotReused) {
  tunetest::writeFile(tmp_ / "verdict.txt", "ok\n\n");
  const TrialOutcome o = runFake("kill -KILL $$");
  EXPECT_EQ(o.kind, Kind::Fault) << o.message;
}

TEST_F(TrialProcess, RealHelperRejectsABadCommandLine) {
  const std::string helper = tmp_ / "wrap.sh";
  tunetest::writeScript(helper, std::string("exec ") + DGPS_TUNE_TRIAL_EXE + " --package p --bogus 1");
  const TrialOutcome o = tune::runIsolatedTrial(helper, request(), tmp_ / "log.txt", std::chrono::seconds(20));
  EXPECT_EQ(o.kind, Kind::Error) << o.message;
  EXPECT_NE(o.message.find("status 2"), std::string::npos) << o.message;
}

TEST_F(TrialProcess, RealHelperReportsAnUnreadablePackage) {
  const TrialOutcome o =
      tune::runIsolatedTrial(DGPS_TUNE_TRIAL_EXE, request(), tmp_ / "log.txt", std::chrono::seconds(20));
  EXPECT_EQ(o.kind, Kind::Error) << o.message;
  EXPECT_NE(o.message.find(tmp_ / "pkg"), std::string::npos) << o.message;
}

TEST(TrialHelperSearch, ExplicitPathWinsOrFails) {
  tunetest::TempDir tmp;
  {
    tunetest::ScopedEnv env("DGPS_TUNE_TRIAL", (tmp / "missing").c_str());
    std::string searched;
    EXPECT_FALSE(tune::findTrialHelper(&searched));
    EXPECT_NE(searched.find(tmp / "missing"), std::string::npos) << searched;
  }
  tunetest::writeScript(tmp / "helper", "exit 0");
  {
    tunetest::ScopedEnv env("DGPS_TUNE_TRIAL", (tmp / "helper").c_str());
    auto found = tune::findTrialHelper();
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, tmp / "helper");
  }
}

TEST(TrialHelperSearch, FindsTheBuiltHelper) {
  tunetest::ScopedEnv env("DGPS_TUNE_TRIAL", nullptr);
  auto found = tune::findTrialHelper();
  ASSERT_TRUE(found);
  EXPECT_NE(found->find("dgps-tune-trial"), std::string::npos) << *found;
}

}  // namespace
}  // namespace dgps
