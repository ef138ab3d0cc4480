// The warm Runtime::forward / decode path under the fake CUDA driver (bench/tests/fake_cuda: host memory, kernels
// not run, every entry point counted; ctest puts it first on LD_LIBRARY_PATH). Variants come from a binary cache
// seeded with a stand-in image, so nothing is compiled. Checked:
//   - which driver calls a warm call makes: per call one cuCtxGetCurrent (plus push/pop only when the primary
//     context is not current), one cuStreamGetCtx, one cuStreamIsCapturing and one cuPointerGetAttribute per given
//     tensor (none of either without pointer checks), and the launches; no device query, no module load, no
//     allocation (docs/performance.md "Host time per call");
//   - a warm call still rejects every bad argument with validation's own message (the memo of CallMemo.h never
//     skips a check), and the next good call runs;
//   - a new tile configuration, a ForwardConfigResolver that changes its answer and a second Runtime each get
//     their own variant.
#include <gtest/gtest.h>
#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "LaunchPlan.h"
#include "RuntimeTestUtil.h"
#include "dgps/device/abi.h"
#include "dgps/dsl/Reference.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

using CallCounter = long long (*)(const char*);

// The fake driver's call counter, or null when the loaded libcuda.so.1 is not the fake.
CallCounter fakeCounter() {
  static const CallCounter f = []() -> CallCounter {
    try {
      cudaDriver();
    } catch (const std::exception&) {
      return nullptr;
    }
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? reinterpret_cast<CallCounter>(dlsym(h, "dgpsFakeCudaCalls")) : nullptr;
  }();
  return f;
}

// Driver calls per entry point since construction (a diff of the fake's counters).
class CallDiff {
 public:
  CallDiff() : start_(snapshot()) {}
  long long operator()(const char* name) const { return fakeCounter()(name) - start_.at(name); }
  long long total() const { return fakeCounter()(nullptr) - start_.at(""); }

 private:
  static std::map<std::string, long long> snapshot() {
    std::map<std::string, long long> m;
    for (const char* n : {"cuCtxGetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuStreamGetCtx",
                          "cuStreamIsCapturing", "cuPointerGetAttribute", "cuLaunchKernel", "cuModuleLoadData",
                          "cuMemAlloc", "cuDeviceGetCount", "cuDeviceGet", "cuTensorMapEncodeTiled"})
      m[n] = fakeCounter()(n);
    m[""] = fakeCounter()(nullptr);
    return m;
  }
  std::map<std::string, long long> start_;
};

// Device buffers (fake: host memory) behind the views of one call.
class Buffers {
 public:
  TensorView make(ScalarType dt, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    buffers_.push_back(std::make_unique<DeviceBuffer>(0, std::size_t(n) * elementSize(dt)));
    ++given_;
    return TensorView(buffers_.back()->data(), dt, std::move(shape), 0);
  }
  int given() const { return given_; }

 private:
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  int given_ = 0;
};

struct Fixture {
  test::TempDir cache;
  std::shared_ptr<const Package> pkg;
  CUstream stream = nullptr;
  explicit Fixture(const std::string& name)
      : pkg(std::make_shared<const Package>(
            Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/" + name))) {
    checkCuda(cudaDriver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~Fixture() { cudaDriver().cuStreamDestroy(stream); }
  RuntimeOptions options() const {
    RuntimeOptions o;
    o.cache_dir = cache.path();
    return o;
  }
  // A stand-in binary in the cache under the key the runtime will ask for: no NVRTC compile.
  void seed(const Runtime& rt, const TileConfig& config, std::int64_t K = 128, std::int64_t V = 128) const {
    const JitTarget target = selectJitTarget(deviceComputeCapability(0), nvrtcEnvironment().supported_archs);
    const JitRequest req = variantRequest(*pkg, K, V, ScalarType::BF16, config, target);
    CachedImage image;
    image.image = "stand-in image: the fake driver never reads it";
    ASSERT_TRUE(rt.compiler().cache().store(rt.compiler().cacheKey(req), image));
  }
  LaunchOptions launch() const {
    LaunchOptions o;
    o.stream = stream;
    return o;
  }
};

// The decode tensors of `spec` for B rows, H = 16, K = V = 128, bf16, each in its own allocation.
DecodeTensors decodeTensors(const Spec& spec, Buffers& b, std::int64_t B = 8) {
  const std::int64_t H = spec.heads_qk > 0 ? spec.heads_qk : 16, HV = H * spec.gva_ratio, K = 128, V = 128;
  const ScalarType act = ScalarType::BF16, f32 = ScalarType::F32;
  DecodeTensors t;
  t.q = b.make(act, {B, 1, H, K});
  t.k = b.make(act, {B, 1, H, K});
  t.v = b.make(act, {B, 1, HV, V});
  t.o = b.make(act, {B, 1, HV, V});
  if (spec.decay.kind == DecayKind::Scalar) t.g = b.make(f32, {B, 1, HV});
  if (spec.decay.kind == DecayKind::Diagonal) t.g = b.make(f32, {B, 1, HV, K});
  if (spec.gain.kind == GainKind::Scalar) t.beta = b.make(f32, {B, 1, HV});
  if (specTakesPrecondGate(spec)) t.precond_g = b.make(f32, {B, 1, H});
  if (specTakesPrecondGain(spec)) t.precond_beta = b.make(f32, {B, 1, H});
  if (specTakesPrecondCenter(spec)) t.precond_center = b.make(f32, {H});
  t.state = b.make(f32, {B, HV, K, V});
  if (hasPrecond(spec)) t.precond_state = b.make(f32, {B, H, K});
  return t;
}

TensorView* forwardField(ForwardTensors& t, const std::string& name) {
  static const std::map<std::string, TensorView ForwardTensors::*> fields = {
      {"q", &ForwardTensors::q}, {"k", &ForwardTensors::k}, {"v", &ForwardTensors::v}, {"g", &ForwardTensors::g},
      {"beta", &ForwardTensors::beta}, {"precond_g", &ForwardTensors::precond_g},
      {"precond_beta", &ForwardTensors::precond_beta}, {"precond_center", &ForwardTensors::precond_center},
      {"initial_state", &ForwardTensors::initial_state},
      {"initial_precond_state", &ForwardTensors::initial_precond_state}, {"cu_seqlens", &ForwardTensors::cu_seqlens},
      {"o", &ForwardTensors::o}, {"final_state", &ForwardTensors::final_state},
      {"final_precond_state", &ForwardTensors::final_precond_state}};
  return &(t.*(fields.at(name)));
}

// Forward tensors B=1, T=64, H=16, K=V=128 from the float64 reference's slot list (no cu_seqlens).
ForwardTensors forwardTensors(const Spec& spec, Buffers& b) {
  ReferenceProblem s;
  s.batch = 1;
  s.seq_len = 64;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 16;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = 128;
  s.value_dim = 128;
  ForwardTensors t;
  for (const auto& slot : referenceInputSlots(spec, s)) {
    if (slot.name == "cu_seqlens") continue;
    *forwardField(t, slot.name) =
        b.make(slot.type == SlotType::Activation ? ScalarType::BF16 : ScalarType::F32, slot.shape);
  }
  for (const auto& slot : referenceOutputSlots(spec, s))
    *forwardField(t, slot.name) = b.make(slot.name == "o" ? ScalarType::BF16 : ScalarType::F32, slot.shape);
  return t;
}

// forwardTensors with a workspace, and the default configuration's variant seeded into rt's cache.
ForwardTensors seededForward(const Fixture& f, Buffers& b, const Runtime& rt) {
  ForwardTensors t = forwardTensors(f.pkg->spec(), b);
  const ForwardProblem p = validateForward(*f.pkg, t);
  const TileConfig config = rt.resolveForwardConfig(*f.pkg, p);
  f.seed(rt, config);
  t.workspace = b.make(ScalarType::F32, {std::int64_t(rt.forwardWorkspaceBytes(*f.pkg, p, config) / 4 + 64)});
  return t;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "(no error)";
}

#define REQUIRE_FAKE_DRIVER()                                                                                  \
  ASSERT_NE(fakeCounter(), nullptr) << "this test runs under the fake driver: LD_LIBRARY_PATH must start with " \
                                       "the folder of bench/tests/fake_cuda's libcuda.so.1 (ctest sets it)"

constexpr int kCalls = 20;

TEST(WarmPath, DecodeCallsTheDriverOnlyToCheckAndLaunch) {
  REQUIRE_FAKE_DRIVER();
  for (const char* name : {"gdn", "pgdn"}) {
    SCOPED_TRACE(name);
    Fixture f(name);
    Buffers b;
    const DecodeTensors t = decodeTensors(f.pkg->spec(), b);
    for (bool checks : {true, false}) {
      for (bool current : {true, false}) {
        SCOPED_TRACE(std::string(checks ? "checks on" : "checks off") + (current ? ", context current" : ""));
        RuntimeOptions o = f.options();
        o.check_pointers = checks;
        Runtime rt(o);
        f.seed(rt, f.pkg->manifest().default_config);
        // Frameworks keep the primary context current; the guard object makes it so here.
        std::unique_ptr<DeviceContextGuard> keep = current ? std::make_unique<DeviceContextGuard>(0) : nullptr;
        rt.decode(*f.pkg, t, f.launch());  // loads the variant
        rt.decode(*f.pkg, t, f.launch());
        const CallDiff d;
        for (int i = 0; i < kCalls; ++i) rt.decode(*f.pkg, t, f.launch());
        const long long pointers = checks ? b.given() : 0, capture = checks ? 1 : 0, push = current ? 0 : 1;
        EXPECT_EQ(d("cuLaunchKernel"), kCalls);
        EXPECT_EQ(d("cuPointerGetAttribute"), kCalls * pointers);
        EXPECT_EQ(d("cuStreamIsCapturing"), kCalls * capture);
        EXPECT_EQ(d("cuStreamGetCtx"), kCalls);
        EXPECT_EQ(d("cuCtxGetCurrent"), kCalls);
        EXPECT_EQ(d("cuCtxPushCurrent"), kCalls * push);
        EXPECT_EQ(d("cuCtxPopCurrent"), kCalls * push);
        EXPECT_EQ(d.total(), kCalls * (pointers + capture + 2 * push + 3)) << "no other driver call on the warm path";
        if (!current) {
          CUcontext now = reinterpret_cast<CUcontext>(1);
          cudaDriver().cuCtxGetCurrent(&now);
          EXPECT_EQ(now, nullptr) << "the caller's (empty) context stack is restored";
        }
      }
    }
  }
}

TEST(WarmPath, ForwardLaunchesEachRoleAndAllocatesNothing) {
  REQUIRE_FAKE_DRIVER();
  for (const char* name : {"gdn", "pgdn"}) {
    SCOPED_TRACE(name);
    Fixture f(name);
    Buffers b;
    Runtime rt(f.options());
    ForwardTensors t = seededForward(f, b, rt);
    DeviceContextGuard keep(0);
    rt.forward(*f.pkg, t, f.launch());
    const CallDiff d;
    for (int i = 0; i < kCalls; ++i) rt.forward(*f.pkg, t, f.launch());
    const long long kernels = static_cast<long long>(f.pkg->manifest().forward_symbols.size());
    EXPECT_EQ(d("cuLaunchKernel"), kCalls * kernels);
    EXPECT_EQ(d("cuPointerGetAttribute"), kCalls * b.given());
    EXPECT_EQ(d("cuMemAlloc"), 0);
    EXPECT_EQ(d.total(), kCalls * (kernels + b.given() + 3)) << "cuCtxGetCurrent, cuStreamGetCtx, cuStreamIsCapturing";
  }
}

// The fake driver's record of the last forward launch's ForwardArgs::row_maps.
long long lastRowMaps() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<long long (*)()>(dlsym(h, "dgpsFakeLastRowMaps")) : nullptr;
  return f ? f() : -2;
}

// The tensor maps of q and k (and of the workspace operand rows) reach the kernels on a device with tensor copies
// (the fake is CC 9.0), are encoded once for a set of pointers, and again only when a pointer changes.
TEST(WarmPath, TensorMapsAreEncodedOncePerPointers) {
  REQUIRE_FAKE_DRIVER();
  // gdn: q/k maps for chunk_local and the walks (bits 0, 1; bit 5 lets precond_summary use k_rows); pgdn also the
  // stored write-key rows pwk (bit 2); kda the workspace's opq, opk, opw and its per-channel gates (bit 4); at
  // chunks of up to 32 rows also the value tiles' map (bit 3)
  for (auto [name, base, baseMaps, chunks] :
       {std::tuple<const char*, long long, long long, std::vector<int>>{"gdn", 35, 4, {64, 32}},
        {"pgdn", 39, 5, {64, 32}},
        {"kda", 55, 8, {64, 32}}}) {
    for (int chunk : chunks) {
      SCOPED_TRACE(std::string(name) + " chunk " + std::to_string(chunk));
      Fixture f(name);
      Buffers b;
      Runtime rt(f.options());
      ForwardTensors t = seededForward(f, b, rt);
      LaunchOptions o = f.launch();
      o.config = rt.resolveForwardConfig(*f.pkg, validateForward(*f.pkg, t));
      o.config->chunk = chunk;
      f.seed(rt, *o.config);
      const long long bits = base | (chunk <= 32 ? 8 : 0), maps = baseMaps + (chunk <= 32 ? 1 : 0);
      DeviceContextGuard keep(0);
      ForwardTensors other = t;  // first a call with another q: the per-thread memo then holds other pointers
      other.q = b.make(ScalarType::BF16, t.q.shape);
      rt.forward(*f.pkg, other, o);
      const CallDiff first;
      rt.forward(*f.pkg, t, o);
      EXPECT_EQ(first("cuTensorMapEncodeTiled"), maps);
      EXPECT_EQ(lastRowMaps(), bits);
      const CallDiff warm;
      for (int i = 0; i < kCalls; ++i) rt.forward(*f.pkg, t, o);
      EXPECT_EQ(warm("cuTensorMapEncodeTiled"), 0) << "the same pointers reuse their maps";
      t.q = b.make(ScalarType::BF16, t.q.shape);
      const CallDiff moved;
      rt.forward(*f.pkg, t, o);
      EXPECT_EQ(moved("cuTensorMapEncodeTiled"), maps) << "a new q pointer needs new maps";
      EXPECT_EQ(lastRowMaps(), bits);
    }
  }
}

// The fake driver's copy of the last forward launch's ForwardArgs; false before any.
bool lastForwardArgs(ForwardArgs& out) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<bool (*)(ForwardArgs*)>(dlsym(h, "dgpsFakeLastForwardArgs")) : nullptr;
  return f && f(&out);
}

// What the kernels index by instead of recomputing it per CTA: the launch plan's workspace offsets in layout order
// (segment regions included with a segment length, zeros after the last region) and the block-index divisors, on
// a cold and on a warm call.
TEST(WarmPath, KernelsGetThePlansWorkspaceOffsetsAndDivisors) {
  REQUIRE_FAKE_DRIVER();
  for (auto [name, segment] : {std::pair<const char*, std::int64_t>{"pgdn", 0}, {"pgdn", 1}, {"gdn_gva", 1}}) {
    SCOPED_TRACE(std::string(name) + " segment_chunks " + std::to_string(segment));
    Fixture f(name);
    Buffers b;
    Runtime rt(f.options());
    ForwardTensors t = seededForward(f, b, rt);
    const ForwardProblem p = validateForward(*f.pkg, t);
    LaunchOptions o = f.launch();
    o.config = rt.resolveForwardConfig(*f.pkg, p);
    o.segment_chunks = segment;
    const detail::ForwardGeometry plan = segment > 0 ? detail::forwardGeometrySegmented(*f.pkg, p, *o.config, segment)
                                                     : detail::forwardGeometry(*f.pkg, p, *o.config);
    ASSERT_GT(plan.buffers, 3);
    if (segment > 0) ASSERT_GT(plan.buffers, int(f.pkg->manifest().launch.workspace.size()));
    t.workspace = b.make(ScalarType::F32, {std::int64_t(plan.workspace_bytes / 4 + 64)});  // the segment regions
    DeviceContextGuard keep(0);
    for (int call = 0; call < 2; ++call) {  // cold, then warm (the call memo)
      SCOPED_TRACE(call ? "warm" : "cold");
      rt.forward(*f.pkg, t, o);
      ForwardArgs a{};
      ASSERT_TRUE(lastForwardArgs(a));
      for (int i = 0; i < kMaxWorkspaceRegions; ++i)
        EXPECT_EQ(a.workspace_offsets[i], i < plan.buffers ? std::int64_t(plan.buffer_offsets[std::size_t(i)]) : 0)
            << "region " << i;
      const std::int64_t chunk = o.config->chunk, chunks = (p.seq_len + chunk - 1) / chunk;
      for (auto [d, n] : {std::pair<FastDiv, std::int64_t>{a.div_heads_qk, p.heads_qk}, {a.div_heads_v, p.heads_v},
                          {a.div_gva, p.heads_v / p.heads_qk}, {a.div_chunks, chunks}}) {
        const FastDiv want = fast_div(std::uint64_t(n));
        EXPECT_EQ(d.mul, want.mul) << "divisor " << n;
        EXPECT_EQ(d.shift, want.shift) << "divisor " << n;
      }
      EXPECT_EQ(a.segment_chunks, segment);
    }
  }
}

TEST(WarmPath, AWarmCallStillRejectsEveryBadArgument) {
  REQUIRE_FAKE_DRIVER();
  Fixture f("pgdn");
  Buffers b;
  const DecodeTensors good = decodeTensors(f.pkg->spec(), b);
  Runtime rt(f.options());
  f.seed(rt, f.pkg->manifest().default_config);
  rt.decode(*f.pkg, good, f.launch());
  rt.decode(*f.pkg, good, f.launch());
  void* host = std::aligned_alloc(256, 1 << 16);  // memory the driver does not know
  struct Case {
    const char* what;
    std::function<void(DecodeTensors&)> change;
    bool validation;  ///< validateDecode rejects it (else the driver's pointer check does)
  };
  const Case cases[] = {
      {"q misaligned", [](DecodeTensors& t) { t.q.data = static_cast<char*>(t.q.data) + 8; }, true},
      {"state bf16", [](DecodeTensors& t) { t.state.dtype = ScalarType::BF16; }, true},
      {"v one head short", [](DecodeTensors& t) { t.v.shape[2] -= 1; }, true},
      {"precond_state missing", [](DecodeTensors& t) { t.precond_state = TensorView(); }, true},
      {"o strided", [](DecodeTensors& t) { t.o.strides = {1, 1, 1, 16}; }, true},
      {"beta on device 1", [](DecodeTensors& t) { t.beta.device = 1; }, true},
      {"q in host memory", [&](DecodeTensors& t) { t.q.data = host; }, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    DecodeTensors bad = good;
    c.change(bad);
    const std::string got = errorOf([&] { rt.decode(*f.pkg, bad, f.launch()); });
    if (c.validation) {
      EXPECT_EQ(got, errorOf([&] { validateDecode(*f.pkg, bad); })) << "validation's own message";
    } else {
      EXPECT_NE(got.find("decode: tensor 'q'"), std::string::npos) << got;
      EXPECT_NE(got.find("is not CUDA device memory known to the driver"), std::string::npos) << got;
    }
    const CallDiff d;
    rt.decode(*f.pkg, good, f.launch());
    EXPECT_EQ(d("cuLaunchKernel"), 1) << "a good call after the error runs";
  }
  std::free(host);
}

TEST(WarmPath, ConfigsResolversAndRuntimesGetTheirOwnVariant) {
  REQUIRE_FAKE_DRIVER();
  Fixture f("gdn");
  Buffers b;
  ForwardTensors t = forwardTensors(f.pkg->spec(), b);
  const ForwardProblem p = validateForward(*f.pkg, t);
  TileConfig a = f.pkg->manifest().default_config, c = a;
  c.block_v = 32;
  int asked = 0;
  RuntimeOptions o = f.options();
  o.forward_config = [&](const Package&, const ForwardProblem&, int) -> std::optional<TileConfig> {
    return ++asked % 2 ? a : c;  // a resolver whose answer changes between calls (a tuning database update)
  };
  Runtime rt(o);
  f.seed(rt, a);
  f.seed(rt, c);
  t.workspace = b.make(ScalarType::F32, {std::int64_t(std::max(rt.forwardWorkspaceBytes(*f.pkg, p, a),
                                                               rt.forwardWorkspaceBytes(*f.pkg, p, c)) / 4 + 64)});
  DeviceContextGuard keep(0);
  {
    const CallDiff d;
    for (int i = 0; i < 6; ++i) rt.forward(*f.pkg, t, f.launch());
    EXPECT_EQ(asked, 6) << "the resolver is asked on every call";
    EXPECT_EQ(d("cuModuleLoadData"), 2) << "one variant per configuration";
    EXPECT_EQ(d("cuLaunchKernel"), 6 * static_cast<long long>(f.pkg->manifest().forward_symbols.size()));
  }
  {
    Runtime other(f.options());
    const CallDiff d;
    LaunchOptions lo = f.launch();
    lo.config = a;
    other.forward(*f.pkg, t, lo);
    other.forward(*f.pkg, t, lo);
    EXPECT_EQ(d("cuModuleLoadData"), 1) << "a second Runtime loads its own module, never the first one's memo";
    lo.config = c;
    other.forward(*f.pkg, t, lo);
    EXPECT_EQ(d("cuModuleLoadData"), 2) << "LaunchOptions::config selects the variant";
  }
}

}  // namespace
}  // namespace dgps
