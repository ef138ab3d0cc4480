// Runtime plumbing on a real GPU with the package under test: the caller's stream and CUDA graph
// capture, device ordinals, pointer checks, cu_seqlens value checks, caches.
#include <gtest/gtest.h>

#include "GpuTestUtil.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

using gputest::compare;

class RuntimeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DGPS_REQUIRE_GPU();
    std::string dir = gputest::packageUnderTest();
    if (dir.empty()) GTEST_SKIP() << "no package: generated/ held no package when the build was configured";
    pkg_ = std::make_unique<Package>(Package::open(dir));
    if (!pkg_->manifest().has_forward) GTEST_SKIP() << pkg_->name() << " has no forward kernels";
    RuntimeOptions o;
    o.cache_dir = std::string(DGPS_GPU_CACHE_DIR);
    rt_ = std::make_unique<Runtime>(o);
    shape_.batch = 2;
    shape_.seq_len = 150;
    shape_.heads_qk = pkg_->spec().heads_qk > 0 ? pkg_->spec().heads_qk : 2;
    shape_.heads_v = shape_.heads_qk * pkg_->spec().gva_ratio;
    shape_.key_dim = pkg_->spec().key_dims.front();
    shape_.value_dim = pkg_->spec().value_dims.front();
    act_ = toScalarType(pkg_->spec().input_dtypes.front());
    inputs_ = generateInputs(pkg_->spec(), shape_, 31337, act_);
  }

  std::unique_ptr<Package> pkg_;
  std::unique_ptr<Runtime> rt_;
  ReferenceProblem shape_;
  ScalarType act_ = ScalarType::BF16;
  ReferenceInputs inputs_;
};

struct Stream {
  CUstream s = nullptr;
  Stream() {
    DeviceContextGuard g(0);
    checkCuda(cudaDriver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~Stream() {
    DeviceContextGuard g(0);
    cudaDriver().cuStreamDestroy(s);
  }
};

TEST_F(RuntimeGpuTest, C29_LaunchesGoToTheCallersStream) {
  gputest::GpuOutputs base = gputest::gpuForward(*rt_, *pkg_, inputs_);
  Stream side;
  for (int i = 0; i < 3; ++i) {
    gputest::GpuOutputs got = gputest::gpuForward(*rt_, *pkg_, inputs_, side.s);
    EXPECT_LE(compare(got.o, base.o).rel, 1e-6) << "run " << i << " on a non-blocking stream differs";
  }
}

TEST_F(RuntimeGpuTest, C29_GraphCaptureAndReplay) {
  const int dev = 0;
  Stream st;
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : inputs_) d.emplace(kv.first, DeviceTensor::upload(kv.second, dev));
  auto view = [&](const char* n) { return d.count(n) ? d.at(n).view() : TensorView(); };
  ForwardTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  t.initial_state = view("initial_state"); t.initial_precond_state = view("initial_precond_state");
  DeviceTensor o(act_, {shape_.batch, shape_.seq_len, shape_.heads_v, shape_.value_dim}, dev);
  t.o = o.view();
  ForwardProblem p = validateForward(*pkg_, t);
  std::size_t ws_bytes = rt_->forwardWorkspaceBytes(*pkg_, p, rt_->resolveForwardConfig(*pkg_, p));
  DeviceTensor ws(ScalarType::I32, {std::int64_t(ws_bytes / 4 + 4)}, dev);
  t.workspace = TensorView(ws.data(), ScalarType::I32, ws.shape(), dev);
  LaunchOptions opts;
  opts.stream = st.s;
  rt_->forward(*pkg_, t, opts);  // warm-up: JIT and module load happen outside the capture
  const CudaDriver& drv = cudaDriver();
  DeviceContextGuard g(dev);
  checkCuda(drv.cuStreamSynchronize(st.s), "sync");
  Tensor want = o.download();
  o.poison();
  CUgraph graph = nullptr;
  checkCuda(drv.cuStreamBeginCapture(st.s, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  rt_->forward(*pkg_, t, opts);
  checkCuda(drv.cuStreamEndCapture(st.s, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  checkCuda(drv.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  checkCuda(drv.cuGraphLaunch(exec, st.s), "cuGraphLaunch");
  checkCuda(drv.cuStreamSynchronize(st.s), "sync");
  EXPECT_LE(compare(o.download(), want).rel, 1e-6);
  drv.cuGraphExecDestroy(exec);
  drv.cuGraphDestroy(graph);

  // Without a workspace the runtime would have to allocate during capture: one clear error.
  ForwardTensors u = t;
  u.workspace = TensorView();
  Stream fresh;  // a stream with no cached workspace yet
  opts.stream = fresh.s;
  if (ws_bytes > 0) {
    checkCuda(drv.cuStreamBeginCapture(fresh.s, CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture");
    try {
      rt_->forward(*pkg_, u, opts);
      ADD_FAILURE() << "allocation during capture was not refused";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("pass ForwardTensors::workspace"), std::string::npos) << e.what();
    }
    CUgraph g2 = nullptr;
    drv.cuStreamEndCapture(fresh.s, &g2);
    if (g2) drv.cuGraphDestroy(g2);
  }
}

TEST_F(RuntimeGpuTest, C30_DeviceOrdinalsAreChecked) {
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : inputs_) d.emplace(kv.first, DeviceTensor::upload(kv.second, 0));
  auto view = [&](const char* n) { return d.count(n) ? d.at(n).view() : TensorView(); };
  ForwardTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  DeviceTensor o(act_, {shape_.batch, shape_.seq_len, shape_.heads_v, shape_.value_dim}, 0);
  t.o = o.view();
  const int n = cudaDeviceCount();
  // Declared on a device that does not own the memory (or does not exist).
  ForwardTensors all1 = t;
  for (TensorView* v : {&all1.q, &all1.k, &all1.v, &all1.g, &all1.beta, &all1.precond_g, &all1.precond_beta,
                        &all1.precond_center, &all1.o}) {
    if (v->given()) v->device = 1;
  }
  try {
    rt_->forward(*pkg_, all1);
    FAIL() << "memory of device 0 declared as device 1 was accepted";
  } catch (const RuntimeError& e) {
    std::string msg = e.what();
    if (n == 1) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::NoDevice) << msg;
      EXPECT_NE(msg.find("CUDA device 1 does not exist"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("declared on device 1 but its memory is on device 0"), std::string::npos) << msg;
    }
  }
  // Host memory is not device memory.
  std::vector<std::uint8_t> host(t.q.nbytes() + 256);
  ForwardTensors bad = t;
  bad.q.data = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(host.data()) + 255) & ~std::uintptr_t(255));
  try {
    rt_->forward(*pkg_, bad);
    FAIL() << "a host pointer was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'q': pointer"), std::string::npos) << e.what();
  }
}

TEST_F(RuntimeGpuTest, C30_TensorsOnASecondGpu) {
  if (cudaDeviceCount() < 2) GTEST_SKIP() << "needs two GPUs (this machine has " << cudaDeviceCount() << ")";
  gputest::GpuOutputs base = gputest::gpuForward(*rt_, *pkg_, inputs_);
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : inputs_) d.emplace(kv.first, DeviceTensor::upload(kv.second, 1));
  auto view = [&](const char* n) { return d.count(n) ? d.at(n).view() : TensorView(); };
  ForwardTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  t.initial_state = view("initial_state"); t.initial_precond_state = view("initial_precond_state");
  DeviceTensor o(act_, {shape_.batch, shape_.seq_len, shape_.heads_v, shape_.value_dim}, 1);
  o.poison();
  t.o = o.view();
  {
    DeviceContextGuard current(0);  // the caller's current device is 0
    rt_->forward(*pkg_, t);
  }
  {
    DeviceContextGuard g(1);
    checkCuda(cudaDriver().cuCtxSynchronize(), "sync");
  }
  EXPECT_LE(compare(o.download(), base.o).rel, 1e-6);
}

TEST_F(RuntimeGpuTest, CuSeqlensValuesAreCheckedOnRequest) {
  if (!pkg_->spec().varlen) GTEST_SKIP() << pkg_->name() << " takes no cu_seqlens";
  ReferenceProblem s = shape_;
  s.batch = 1;
  s.cu_seqlens = {0, 10, 100, 150};
  ReferenceInputs in = generateInputs(pkg_->spec(), s, 99, act_);
  Tensor bad(ScalarType::I64, {4});
  bad.setInt(0, 0);
  bad.setInt(1, 50);
  bad.setInt(2, 40);
  bad.setInt(3, 150);
  in["cu_seqlens"] = bad;
  LaunchOptions opts;
  opts.check_cu_seqlens = true;
  try {
    gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opts);
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("must be non-decreasing"), std::string::npos) << e.what();
  }
  // Past the token buffer: refused. Short of it (a padded buffer): accepted, the padding rows of o are 0.
  bad.setInt(1, 10);
  bad.setInt(2, 100);
  bad.setInt(3, 151);
  in["cu_seqlens"] = bad;
  try {
    gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opts);
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("must end at most at T = 150, got 151"), std::string::npos) << e.what();
  }
  bad.setInt(3, 120);
  in["cu_seqlens"] = bad;
  const gputest::GpuOutputs got = gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opts);
  const std::int64_t row = s.heads_v * s.value_dim;
  std::int64_t nonZero = 0;
  for (std::int64_t i = 120 * row; i < got.o.numel(); ++i) nonZero += got.o.get(i) != 0.0;
  EXPECT_EQ(nonZero, 0) << "rows 120..149 of o must be 0";
}

TEST_F(RuntimeGpuTest, VariantInfoAndCaches) {
  const int kv = int(shape_.key_dim);
  VariantInfo a = rt_->prepare(*pkg_, kv, kv, act_, pkg_->manifest().default_config, 0);
  EXPECT_EQ(a.target.arch, deviceComputeCapability(0).major == 9 && deviceComputeCapability(0).minor == 0
                               ? std::string("sm_90a")
                               : a.target.arch);
  // every kernel the variant loads: launch.forward's, launch.forward_segmented's (its chunk_local is listed
  // again) and decode
  EXPECT_EQ(a.kernels.size(), pkg_->manifest().forward_symbols.size() + pkg_->manifest().launch.forward_segmented.size() +
                                  (pkg_->manifest().has_decode ? 1 : 0));
  for (const auto& k : a.kernels) {
    EXPECT_GT(k.registers, 0) << k.symbol;
    EXPECT_EQ(k.local_bytes, 0) << k.symbol << " spills to local memory (docs/math.md §7.5)";
  }
  RuntimeOptions o;
  o.cache_dir = std::string(DGPS_GPU_CACHE_DIR);
  Runtime second(o);  // a new process would see the same: the disk cache serves the image
  VariantInfo b = second.prepare(*pkg_, kv, kv, act_, pkg_->manifest().default_config, 0);
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(b.cache_key, a.cache_key);
}

}  // namespace
}  // namespace dgps
