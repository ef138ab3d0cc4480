// Without a GPU or driver, the same binaries start and every GPU path fails with one clear error;
// validation still runs first (nothing about the driver is needed to reject a bad tensor).
#include <gtest/gtest.h>

#include "RuntimeTestUtil.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

using test::fakePtr;
using test::TempDir;

ForwardTensors tinyTensors() {
  ForwardTensors t;
  const std::int64_t B = 1, T = 5, H = 2, K = 64, V = 64;
  t.q = TensorView(fakePtr(1), ScalarType::BF16, {B, T, H, K});
  t.k = TensorView(fakePtr(2), ScalarType::BF16, {B, T, H, K});
  t.v = TensorView(fakePtr(3), ScalarType::BF16, {B, T, H, V});
  t.g = TensorView(fakePtr(4), ScalarType::F32, {B, T, H});
  t.beta = TensorView(fakePtr(5), ScalarType::F32, {B, T, H});
  t.o = TensorView(fakePtr(6), ScalarType::BF16, {B, T, H, V});
  return t;
}

TEST(Driver, MissingDriverIsOneClearError) {
  std::string why;
  if (cudaAvailable(&why)) GTEST_SKIP() << "a CUDA device is present; this test covers machines without one";
  EXPECT_FALSE(why.empty());
  try {
    cudaDriver();
    // The driver loaded but there is no device: cudaAvailable said why.
    EXPECT_NE(why.find("no CUDA device"), std::string::npos) << why;
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(e.code() == RuntimeErrorCode::NoDriver || e.code() == RuntimeErrorCode::NoDevice);
    EXPECT_EQ(std::string(e.what()), why);
    if (e.code() == RuntimeErrorCode::NoDriver) {
      EXPECT_NE(why.find("no CUDA driver found: libcuda.so.1 could not be loaded"), std::string::npos) << why;
    }
  }
}

TEST(Driver, RuntimeValidatesBeforeNeedingTheDriver) {
  std::string why;
  if (cudaAvailable(&why)) GTEST_SKIP() << "a CUDA device is present; this test covers machines without one";
  TempDir tmp;
  Package p = Package::open(test::writeTinyPackage(tmp / "tiny"));
  RuntimeOptions options;
  options.cache_dir = tmp / "cache";
  Runtime rt(options);
  ForwardTensors bad = tinyTensors();
  bad.g.shape.push_back(64);
  try {
    rt.forward(p, bad);
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument) << e.what();
  }
  try {
    rt.prepare(p, 64, 64, ScalarType::BF16, p.manifest().default_config, 0);
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(e.code() == RuntimeErrorCode::NoDriver || e.code() == RuntimeErrorCode::NoDevice) << e.what();
    EXPECT_EQ(std::string(e.what()), why);
  }
  EXPECT_THROW(DeviceBuffer(0, 16), RuntimeError);
}

}  // namespace
}  // namespace dgps
