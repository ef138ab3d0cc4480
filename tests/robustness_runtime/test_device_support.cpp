// Item: supported GPUs. The kernels are written for compute capability 9.0 (sm_90a: H100, H200); NVRTC
// compiles for sm_80 spill and sm_89/sm_100/sm_120 fail. The runtime now refuses other GPUs at the
// first load with one clear message; dgps-host-app exits 77 (documented) when it cannot run.
#include <gtest/gtest.h>

#include <string>

#include "RobustUtil.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

TEST(DeviceSupport, OnlyComputeCapability90IsSupported) {
  EXPECT_EQ(unsupportedDeviceMessage({9, 0}, "NVIDIA H200"), "");
  struct Case {
    ComputeCapability cc;
    const char* name;
  } cases[] = {{{8, 0}, "NVIDIA A100-SXM4-80GB"}, {{8, 9}, "NVIDIA L4"}, {{10, 0}, "NVIDIA B200"},
               {{12, 0}, "NVIDIA RTX PRO 6000"}, {{7, 0}, "Tesla V100"}, {{9, 1}, "hypothetical"}};
  for (const auto& c : cases) {
    const std::string m = unsupportedDeviceMessage(c.cc, c.name);
    const std::string want = std::string("DGPS kernels need compute capability 9.0 (Hopper: H100, H200); this GPU is ") +
                             c.name + ", compute capability " + std::to_string(c.cc.major) + "." +
                             std::to_string(c.cc.minor);
    EXPECT_EQ(m, want);
  }
}

// The fake driver (bench/tests/fake_cuda) under the real host app: a GPU of another capability is refused
// before anything is compiled, with the documented exit code.
TEST(DeviceSupport, HostAppRefusesAnUnsupportedGpu) {
  const std::string fake = DGPS_FAKE_CUDA_DIR;
  if (fake.empty()) GTEST_SKIP() << "the fake CUDA driver is built with the benchmarks (DGPS_ENABLE_BENCH=OFF here)";
  robust::TempDir tmp;
  const std::string env = "env LD_LIBRARY_PATH=" + fake + " DGPS_TUNING_DB=" + tmp.path() + "/db.jsonl DGPS_CACHE_DIR=" +
                          tmp.path() + "/cache ";
  for (const char* cc : {"8.0", "8.9", "10.0", "12.0"}) {
    std::string out;
    const int rc = robust::runCommand(env + "DGPS_FAKE_CUDA_CC=" + cc + " " + DGPS_HOST_APP_EXE + " " +
                                          robust::generatedPackage("gdn") + " --tokens 64 --heads 1",
                                      &out);
    EXPECT_EQ(rc, 77) << cc << "\n" << out;
    EXPECT_NE(out.find("DGPS kernels need compute capability 9.0 (Hopper: H100, H200); this GPU is Fake H200 "
                       "(dgps-bench test driver), compute capability " + std::string(cc)),
              std::string::npos)
        << out;
  }
}

TEST(DeviceSupport, HostAppWithoutAGpuExits77) {
  robust::TempDir tmp;
  std::string out;
  // No driver on the library path and every device hidden: means the same on a GPU machine.
  const int rc = robust::runCommand("env LD_LIBRARY_PATH=" + tmp.path() + " CUDA_VISIBLE_DEVICES=-1 DGPS_TUNING_DB=" +
                                        tmp.path() + "/db.jsonl " + DGPS_HOST_APP_EXE + " " +
                                        robust::generatedPackage("gdn"),
                                    &out);
  EXPECT_EQ(rc, 77) << out;
  EXPECT_NE(out.find("no usable GPU"), std::string::npos) << out;
}

}  // namespace
}  // namespace dgps
