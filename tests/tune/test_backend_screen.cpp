// The parent side of RuntimeTrialBackend::screen on the CPU: the backend draws the slice inputs and
// computes the float64 reference itself (no GPU), spawns the trial helper, and judges what comes back.
// A fake helper stands in for dgps-tune-trial and writes prepared outputs (correct, scaled, poisoned) or
// crashes, so every verdict path of the real backend is exercised without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "TuneTestUtil.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/runtime/tune/RuntimeTrialBackend.h"

namespace dgps {
namespace {

using tuning::TrialStatus;

class BackendScreen : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = tunetest::shippedPackage("pgdn");
    if (dir.empty()) GTEST_SKIP() << "generated/pgdn is absent";
    pkg_ = std::make_unique<Package>(Package::open(dir));
    std::random_device rd;
    seed_ = rd();
  }

  // A backend whose helper copies `outputs` (a prepared safetensors file) to --out and exits 0, or runs
  // `body` instead ($A holds the helper's arguments, $O and $R the output and verdict paths).
  std::unique_ptr<tune::RuntimeTrialBackend> backend(const std::string& body) {
    const std::string helper = tmp_ / "fake-trial.sh";
    tunetest::writeScript(helper,
                          "A=\"$*\"; O=''; R=''\n"
                          "while [ $# -gt 0 ]; do case \"$1\" in --out) O=\"$2\";; --report) R=\"$2\";; esac; shift; done\n" +
                              body);
    tune::TrialBackendOptions o;
    o.full.batch = 4;
    o.full.seq_len = 700;
    o.full.heads_qk = o.full.heads_v = 2;
    o.full.key_dim = o.full.value_dim = 64;
    o.seed = seed_;
    o.trial_helper = helper;
    o.work_dir = tmp_.path();
    o.trial_timeout = std::chrono::seconds(30);
    return std::make_unique<tune::RuntimeTrialBackend>(rt_, *pkg_, o);
  }

  // The reference outputs in the dtypes the GPU writes, optionally changed by `edit`.
  void prepare(tune::RuntimeTrialBackend& b, const std::function<void(TensorMap&)>& edit) {
    TensorMap out;
    for (const auto& kv : b.reference().toMap())
      out.emplace(kv.first, kv.second.to(kv.first == "o" ? ScalarType::BF16 : ScalarType::F32));
    if (edit) edit(out);
    SafetensorsFile f;
    f.tensors = out;
    writeSafetensors(tmp_ / "prepared.safetensors", f);
  }

  tunetest::TempDir tmp_;
  std::unique_ptr<Package> pkg_;
  Runtime rt_;
  std::uint64_t seed_ = 0;
};

std::string copyBody(const std::string& prepared) {
  return "cp '" + prepared + "' \"$O\" && printf 'ok\\n\\n' > \"$R\"; exit 0";
}

TEST_F(BackendScreen, SliceIsTheRaggedSmallProblem) {
  auto b = backend("exit 0");
  EXPECT_EQ(b->sliceShape().batch, 2);
  EXPECT_EQ(b->sliceShape().seq_len, 250);
}

TEST_F(BackendScreen, CorrectOutputsPass) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto b = backend(copyBody(tmp_ / "prepared.safetensors"));
  prepare(*b, nullptr);
  const tuning::ScreenResult s = b->screen(tuning::TileConfig{});
  EXPECT_EQ(s.status, TrialStatus::Ok) << s.message;
  EXPECT_LT(s.max_rel_err, 1e-2);
}

TEST_F(BackendScreen, WrongOutputsAreRejected) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto b = backend(copyBody(tmp_ / "prepared.safetensors"));
  prepare(*b, [](TensorMap& m) {
    Tensor& o = m.at("o");
    for (std::int64_t i = 0; i < o.numel(); ++i) o.set(i, 2.0 * o.get(i));
  });
  const tuning::ScreenResult s = b->screen(tuning::TileConfig{});
  EXPECT_EQ(s.status, TrialStatus::WrongResult) << s.message;
  EXPECT_GT(s.max_rel_err, 0.3);
  EXPECT_NE(s.message.find("'o'"), std::string::npos) << s.message;
}

TEST_F(BackendScreen, PoisonLeftInAnOutputIsRejected) {
  auto b = backend(copyBody(tmp_ / "prepared.safetensors"));
  prepare(*b, [](TensorMap& m) {
    Tensor& s = m.at("final_state");
    s.set(s.numel() - 1, std::nan(""));
  });
  const tuning::ScreenResult s = b->screen(tuning::TileConfig{});
  EXPECT_EQ(s.status, TrialStatus::WrongResult) << s.message;
  EXPECT_NE(s.message.find("final_state"), std::string::npos) << s.message;
}

TEST_F(BackendScreen, CrashIsAFaultAndTheNextCandidateStillRuns) {
  auto b = backend("case \"$A\" in *block_v=32*) kill -SEGV $$;; esac\n" + copyBody(tmp_ / "prepared.safetensors"));
  prepare(*b, nullptr);
  tuning::TileConfig bad;
  bad.block_v = 32;
  const tuning::ScreenResult s1 = b->screen(bad);
  EXPECT_EQ(s1.status, TrialStatus::Fault) << s1.message;
  EXPECT_NE(s1.message.find("signal 11"), std::string::npos) << s1.message;
  EXPECT_TRUE(b->contextHealthy());
  const tuning::ScreenResult s2 = b->screen(tuning::TileConfig{});
  EXPECT_EQ(s2.status, TrialStatus::Ok) << s2.message;
}

TEST_F(BackendScreen, NonFiniteAtFullShapeIsWrong) {
  auto b = backend("case \"$A\" in *--full-batch\\ 4\\ --full-tokens\\ 700*) "
                   "printf 'nonfinite\\n12 non-finite output element(s)\\n' > \"$R\"; exit 4;; esac; exit 9");
  const tuning::ScreenResult s = b->screen(tuning::TileConfig{});
  EXPECT_EQ(s.status, TrialStatus::WrongResult) << s.message;
  EXPECT_NE(s.message.find("12 non-finite"), std::string::npos) << s.message;
}

}  // namespace
}  // namespace dgps
