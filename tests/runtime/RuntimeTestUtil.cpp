#include "RuntimeTestUtil.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/LaunchManifest.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dgps-rt-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::string cmd = "rm -rf '" + path_ + "'";
  if (std::system(cmd.c_str()) != 0) {
    // best effort
  }
}

void writeFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool fileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string tinySpecYaml() {
  return R"(name: tiny
description: runtime test fixture (GDN-like)
decay:
  kind: scalar
gain:
  kind: scalar
  range: [0, 1]
precond:
  kind: none
solve:
  kind: delta
normalize:
  qk_l2norm: true
  eps: 1e-6
scale: auto
heads:
  qk: any
  gva_ratio: 1
dims:
  key: [64]
  value: [64]
dtypes:
  inputs: [bf16, f16]
  state: f32
io:
  initial_state: true
  final_state: true
  varlen: true
kernels: [chunk_forward, decode]
tuning:
  chunk: [64]
  block_v: [32, 64]
  warps: [4]
  stages: [1]
)";
}

namespace {
template <typename T>
std::string flow(const std::vector<T>& v) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}
const char* b(bool x) { return x ? "true" : "false"; }
}  // namespace

std::string manifestFor(const Spec& s) {
  std::ostringstream m;
  std::vector<std::string> dts;
  for (DType d : s.input_dtypes) dts.push_back(toString(d));
  m << "dgps_package: " << kPackageFormatVersion << "\n"
    << "codegen_version: 1\n"
    << "name: " << s.name << "\n"
    << "spec_hash: \"" << specHash(s) << "\"\n"
    << "source: kernels.cu\n"
    << "spec: spec.yaml\n"
    << "features: {decay: " << toString(s.decay.kind) << ", gain: " << toString(s.gain.kind)
    << ", precond: " << toString(s.precond.kind) << ", precond_side: " << toString(s.precond.side)
    << ", precond_source: " << toString(s.precond.source) << ", solve: " << toString(s.solve.kind) << "}\n"
    << "dims: {key: " << flow(s.key_dims) << ", value: " << flow(s.value_dims) << "}\n"
    << "dtypes: {inputs: " << flow(dts) << ", state: f32}\n"
    << "io: {initial_state: " << b(s.initial_state) << ", final_state: " << b(s.final_state)
    << ", initial_precond_state: " << b(s.initial_precond_state) << ", final_precond_state: "
    << b(s.final_precond_state) << ", varlen: " << b(s.varlen) << "}\n";
  // The launch section dgpsc writes, for the roles the launch contract runs for a spec without a preconditioner.
  LaunchSectionRequest launch;
  launch.name = s.name;
  launch.features = deviceFeatures(s);
  if (hasKernel(s, KernelKind::ChunkForward)) launch.forward_roles = {"chunk_local", "state_output"};
  launch.decode = hasKernel(s, KernelKind::Decode);
  // The workspace regions dgpsc declares for such a forward (compiler Dialect/Tile/IR/Workspace.h), as formulas.
  const std::string cc = "slots * HV * chunk * chunk * 2", ck = "slots * HV * chunk * KP * 2";
  if (s.solve.kind == SolveKind::Delta) launch.workspace.push_back({"tb", cc});
  launch.workspace.push_back({"aqk", cc});
  launch.workspace.push_back({"tok", "slots * HV * (chunk + 1) * 8 * 4"});
  if (s.decay.kind == DecayKind::Diagonal) {
    launch.workspace.push_back({"opq", ck});
    if (s.solve.kind == SolveKind::Delta) launch.workspace.push_back({"opk", ck});
    launch.workspace.push_back({"opw", ck});
    launch.workspace.push_back({"pdec", "slots * HV * K * 4"});
  }
  std::string launchYaml, error;
  if (!launchSectionYaml(launch, &launchYaml, &error)) throw std::runtime_error(error);
  m << layerSectionYaml(s) << launchYaml;
  m << "tunables: {chunk: " << flow(s.tuning.chunk) << ", block_v: " << flow(s.tuning.block_v)
    << ", warps: " << flow(s.tuning.warps) << ", stages: " << flow(s.tuning.stages) << "}\n"
    << "default_config: {chunk: " << s.tuning.chunk.back() << ", block_v: " << s.tuning.block_v.back()
    << ", warps: " << s.tuning.warps.front() << ", stages: " << s.tuning.stages.front() << "}\n"
    << "plan: {bytes_per_token_head: 1024, flops_per_token_head: 65536.5}\n";
  return m.str();
}

std::string tinyKernelsCu() {
  return R"CU(// Runtime test fixture: not a recurrence, just enough code to exercise the JIT path.
#include "dgps/device/platform.cuh"  // NVRTC integer typedefs, abi.h, bf16/f16 conversions

#if !defined(DGPS_K) || !defined(DGPS_V) || !defined(DGPS_CHUNK) || !defined(DGPS_BLOCK_V) || \
    !defined(DGPS_WARPS) || !defined(DGPS_STAGES)
#error "the runtime must define DGPS_K, DGPS_V, DGPS_CHUNK, DGPS_BLOCK_V, DGPS_WARPS, DGPS_STAGES"
#endif
#if defined(DGPS_INPUT_BF16)
typedef uint16_t in_t;  // bf16 bits (a package includes only the embedded device headers, not cuda_bf16.h)
__device__ inline float toF(in_t x) { return dgps::dev::bf16_to_f32(x); }
__device__ inline in_t fromF(float x) { return dgps::dev::f32_to_bf16(x); }
#elif defined(DGPS_INPUT_F16)
typedef uint16_t in_t;  // f16 bits
__device__ inline float toF(in_t x) { return dgps::dev::f16_to_f32(x); }
__device__ inline in_t fromF(float x) { return dgps::dev::f32_to_f16(x); }
#else
#error "the runtime must define DGPS_INPUT_BF16 or DGPS_INPUT_F16"
#endif

// o[b,t,hv,:] = scale * q[b,t,h,:V]: one block per (token, value head).
extern "C" __global__ void __launch_bounds__(DGPS_WARPS * 32)
dgps_tiny_fwd_chunk_local(DGPS_GRID_CONST dgps::ForwardArgs a) {
  const int64_t row = blockIdx.x;  // b*T*HV + t*HV + hv
  const int64_t hv = row % a.heads_v;
  const int64_t bt = row / a.heads_v;
  const int64_t h = hv / (a.heads_v / a.heads_qk);
  const in_t* q = static_cast<const in_t*>(a.q) + (bt * a.heads_qk + h) * DGPS_K;
  in_t* o = static_cast<in_t*>(a.o) + row * DGPS_V;
  for (int i = threadIdx.x; i < DGPS_V; i += blockDim.x) o[i] = fromF(a.scale * toF(q[i % DGPS_K]));
}

// Copies o into the final state's first row: a second forward role.
extern "C" __global__ void dgps_tiny_fwd_state_output(dgps::ForwardArgs a) {
  if (a.final_state && threadIdx.x < DGPS_V) a.final_state[threadIdx.x] = toF(static_cast<const in_t*>(a.o)[threadIdx.x]);
}

extern "C" __global__ void __launch_bounds__(DGPS_WARPS * 32)
dgps_tiny_decode(dgps::DecodeArgs a) {
  const int64_t row = blockIdx.x;
  const int64_t h = (row % a.heads_v) / (a.heads_v / a.heads_qk);
  const in_t* q = static_cast<const in_t*>(a.q) + ((row / a.heads_v) * a.heads_qk + h) * DGPS_K;
  in_t* o = static_cast<in_t*>(a.o) + row * DGPS_V;
  for (int i = threadIdx.x; i < DGPS_V; i += blockDim.x) o[i] = fromF(toF(q[i % DGPS_K]));
}
)CU";
}

Spec parseSpecOrDie(const std::string& yaml) {
  ParseResult r = parseSpecString(yaml, "test.yaml");
  if (!r.ok()) {
    std::string all;
    for (const auto& d : r.diagnostics) all += formatDiagnostic(d) + "\n";
    throw std::runtime_error("fixture spec does not parse:\n" + all);
  }
  return *r.spec;
}

std::string writeTinyPackage(const std::string& dir, const std::string& kernels_cu) {
  ::mkdir(dir.c_str(), 0755);
  Spec s = parseSpecOrDie(tinySpecYaml());
  // A package's spec.yaml is the canonical form, as dgpsc writes it (Package::open checks that).
  writeFile(dir + "/spec.yaml", canonicalYaml(s));
  writeFile(dir + "/manifest.yaml", manifestFor(s));
  writeFile(dir + "/kernels.cu", kernels_cu);
  return dir;
}

std::string writePackageWithoutSegmentKernels(const std::string& from, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  for (const char* f : {"/kernels.cu", "/spec.yaml"}) writeFile(dir + f, readFile(from + f));
  std::istringstream in(readFile(from + "/manifest.yaml"));
  std::ostringstream out;
  bool inBlock = false;
  for (std::string line; std::getline(in, line);) {
    // the block: "  forward_segmented:" and the deeper-indented lines after it, up to launch's next key
    if (line.rfind("  forward_segmented:", 0) == 0) inBlock = true;
    else if (inBlock && line.rfind("    ", 0) != 0) inBlock = false;
    if (!inBlock) out << line << "\n";
  }
  writeFile(dir + "/manifest.yaml", out.str());
  return dir;
}

struct WarningCapture::Sink {
  std::mutex mu;
  std::vector<std::string> messages;
};

WarningCapture::WarningCapture() : sink_(std::make_shared<Sink>()) {
  auto sink = sink_;
  previous_ = setWarningHandler([sink](const std::string& m) {
    std::lock_guard<std::mutex> lock(sink->mu);
    sink->messages.push_back(m);
  });
}

WarningCapture::~WarningCapture() { setWarningHandler(previous_); }

std::vector<std::string> WarningCapture::messages() const {
  std::lock_guard<std::mutex> lock(sink_->mu);
  return sink_->messages;
}

bool WarningCapture::contains(const std::string& needle) const {
  for (const auto& m : messages()) {
    if (m.find(needle) != std::string::npos) return true;
  }
  return false;
}

void* fakePtr(int index) { return reinterpret_cast<void*>(std::uintptr_t(0x7f0000000000ull + 0x100000ull * index)); }

}  // namespace test
}  // namespace dgps
