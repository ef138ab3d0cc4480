// dgps-run on a machine without a GPU: a malformed input file is reported (validation runs on the host
// first), a valid one fails with the no-driver message; never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "RuntimeTestUtil.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Package.h"

namespace dgps {
namespace {

int runTool(const std::string& exe, const std::string& args, std::string& output) {
  std::string cmd = exe + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  output.clear();
  while (std::size_t n = fread(buf, 1, sizeof(buf), f)) output.append(buf, n);
  int status = pclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class DgpsRunTool : public ::testing::Test {
 protected:
  void SetUp() override {
    pkg_dir_ = test::writeTinyPackage(tmp_ / "tiny");
    Package p = Package::open(pkg_dir_);
    ReferenceProblem s;
    s.batch = 1;
    s.seq_len = 5;
    s.heads_qk = s.heads_v = 2;
    s.key_dim = s.value_dim = 64;
    inputs_ = generateInputs(p.spec(), s, 5, ScalarType::BF16);
  }
  std::string write(const TensorMap& m) {
    SafetensorsFile f;
    f.tensors = m;
    std::string path = tmp_ / ("in" + std::to_string(counter_++) + ".safetensors");
    writeSafetensors(path, f);
    return path;
  }
  std::string run(const std::string& extra, int& rc) {
    std::string out;
    rc = runTool(DGPS_RUN_EXE, pkg_dir_ + " --out " + tmp_.path() + "/out.safetensors " + extra, out);
    return out;
  }
  test::TempDir tmp_;
  std::string pkg_dir_;
  TensorMap inputs_;
  int counter_ = 0;
};

TEST_F(DgpsRunTool, ShapeErrorsAreReportedBeforeAnyGpuWork) {
  TensorMap bad = inputs_;
  bad["g"] = Tensor(ScalarType::F32, {1, 5, 2, 64});  // GDN-like spec: g must be [B,T,HV]
  int rc = 0;
  std::string out = run("--inputs " + write(bad), rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("dgps-run: forward: tensor 'g': expected shape [B,T,HV] = [1, 5, 2]"), std::string::npos) << out;
  EXPECT_NE(out.find("got [1, 5, 2, 64]"), std::string::npos) << out;

  bad = inputs_;
  bad["bogus"] = Tensor(ScalarType::F32, {1});
  out = run("--inputs " + write(bad), rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("unknown tensor 'bogus'"), std::string::npos) << out;

  out = run("--inputs " + tmp_.path() + "/missing.safetensors", rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("missing.safetensors"), std::string::npos) << out;

  out = run("--inputs " + write(inputs_) + " --config block_v=48", rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("block_v=48 is not in the package's tunables.block_v [32, 64]"), std::string::npos) << out;
}

TEST_F(DgpsRunTool, ValidInputsNeedTheDriver) {
  std::string why;
  if (cudaAvailable(&why)) GTEST_SKIP() << "a GPU is present; the GPU suite runs dgps-run's path";
  int rc = 0;
  std::string out = run("--inputs " + write(inputs_), rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("dgps-run: " + why), std::string::npos) << out;
}

}  // namespace
}  // namespace dgps
