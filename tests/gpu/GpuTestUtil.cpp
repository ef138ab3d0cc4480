#include "GpuTestUtil.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "dgps/dsl/Canonical.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace gputest {

std::string packageUnderTest() {
  const char* p = std::getenv("DGPS_GPU_PACKAGE");
  return p ? std::string(p) : std::string();
}

std::string ErrorStats::str() const {
  std::ostringstream os;
  os << "rel " << rel << " maxrel " << maxrel << (finite ? "" : " NON-FINITE");
  return os.str();
}

ErrorStats compare(const Tensor& got, const Tensor& ref) {
  ErrorStats e;
  if (got.shape() != ref.shape()) {
    e.finite = false;
    e.rel = e.maxrel = INFINITY;
    return e;
  }
  double num = 0, den = 0, mx = 0, mref = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), r = ref.get(i);
    if (!std::isfinite(g)) e.finite = false;
    num += (g - r) * (g - r);
    den += r * r;
    mx = std::max(mx, std::fabs(g - r));
    mref = std::max(mref, std::fabs(r));
  }
  e.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  e.maxrel = mref > 0 ? mx / mref : mx;
  if (!e.finite) e.rel = e.maxrel = INFINITY;
  return e;
}

namespace {

const Tensor* find(const ReferenceInputs& in, const std::string& name) {
  auto it = in.find(name);
  return it == in.end() ? nullptr : &it->second;
}

void sync(int device, void* stream) {
  DeviceContextGuard guard(device);
  checkCuda(cudaDriver().cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

}  // namespace

GpuOutputs gpuForward(Runtime& rt, const Package& pkg, const ReferenceInputs& in, void* stream,
                      const LaunchOptions* options, bool pass_workspace) {
  const Spec& spec = pkg.spec();
  const int dev = 0;
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : in) d.emplace(kv.first, DeviceTensor::upload(kv.second, dev));
  auto view = [&](const char* n) { return d.count(n) ? d.at(n).view() : TensorView(); };
  const Tensor& q = in.at("q");
  const Tensor& v = in.at("v");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), HV = v.dim(2), V = v.dim(3);
  const Tensor* cu = find(in, "cu_seqlens");
  const std::int64_t N = cu ? cu->dim(0) - 1 : B;
  ForwardTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  t.initial_state = view("initial_state"); t.initial_precond_state = view("initial_precond_state");
  t.cu_seqlens = view("cu_seqlens");
  DeviceTensor o(q.dtype(), {B, T, HV, V}, dev), fs, fps, ws;
  o.poison();
  t.o = o.view();
  GpuOutputs out;
  if (spec.final_state) {
    fs = DeviceTensor(ScalarType::F32, {N, HV, K, V}, dev);
    fs.poison();
    t.final_state = fs.view();
    out.has_final_state = true;
  }
  if (hasPrecond(spec) && spec.final_precond_state) {
    fps = DeviceTensor(ScalarType::F32, {N, H, K}, dev);
    fps.poison();
    t.final_precond_state = fps.view();
    out.has_final_precond_state = true;
  }
  LaunchOptions opts = options ? *options : LaunchOptions();
  opts.stream = stream;
  if (pass_workspace) {
    ForwardProblem p = validateForward(pkg, t);
    std::size_t bytes =
        rt.forwardWorkspaceBytes(pkg, p, opts.config ? *opts.config : rt.resolveForwardConfig(pkg, p, opts), opts);
    ws = DeviceTensor(ScalarType::I32, {std::int64_t(bytes / 4 + 4)}, dev);  // poisoned: kernels must not need zeros
    ws.poison();
    t.workspace = TensorView(ws.data(), ScalarType::I32, ws.shape(), dev);
  }
  rt.forward(pkg, t, opts);
  sync(dev, stream);
  out.o = o.download();
  if (out.has_final_state) out.final_state = fs.download();
  if (out.has_final_precond_state) out.final_precond_state = fps.download();
  return out;
}

GpuOutputs gpuDecode(Runtime& rt, const Package& pkg, const ReferenceInputs& in, void* stream) {
  const Spec& spec = pkg.spec();
  const int dev = 0;
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : in) {
    if (kv.first == "initial_state" || kv.first == "initial_precond_state") continue;
    d.emplace(kv.first, DeviceTensor::upload(kv.second, dev));
  }
  auto view = [&](const char* n) { return d.count(n) ? d.at(n).view() : TensorView(); };
  const Tensor& q = in.at("q");
  const Tensor& v = in.at("v");
  const std::int64_t B = q.dim(0), H = q.dim(2), K = q.dim(3), HV = v.dim(2), V = v.dim(3);
  DecodeTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  DeviceTensor o(q.dtype(), {B, 1, HV, V}, dev);
  o.poison();
  t.o = o.view();
  DeviceTensor state = find(in, "initial_state") ? DeviceTensor::upload(in.at("initial_state"), dev)
                                                 : DeviceTensor(ScalarType::F32, {B, HV, K, V}, dev);
  if (!find(in, "initial_state")) state.zero();
  t.state = state.view();
  DeviceTensor pstate;
  if (hasPrecond(spec)) {
    if (find(in, "initial_precond_state")) {
      pstate = DeviceTensor::upload(in.at("initial_precond_state"), dev);
    } else {
      Tensor init(ScalarType::F32, {B, H, K});
      const double v0 = usesHypergrad(spec) ? spec.precond.hypergrad.init : 0.0;
      for (std::int64_t i = 0; i < init.numel(); ++i) init.set(i, v0);
      pstate = DeviceTensor::upload(init, dev);
    }
    t.precond_state = pstate.view();
  }
  LaunchOptions opts;
  opts.stream = stream;
  rt.decode(pkg, t, opts);
  sync(dev, stream);
  GpuOutputs out;
  out.o = o.download();
  out.has_final_state = true;
  out.final_state = state.download();
  if (hasPrecond(spec)) {
    out.has_final_precond_state = true;
    out.final_precond_state = pstate.download();
  }
  return out;
}

ReferenceInputs sliceTokens(const ReferenceInputs& in, std::int64_t t0_tokens, std::int64_t t1_tokens,
                            std::int64_t steps) {
  ReferenceInputs out;
  for (const auto& kv : in) {
    const Tensor& x = kv.second;
    const bool perStep = kv.first == "k" || kv.first == "v" || kv.first == "beta";
    const std::int64_t t0 = perStep ? t0_tokens * steps : t0_tokens, t1 = perStep ? t1_tokens * steps : t1_tokens;
    const bool per_token = kv.first != "precond_center" && kv.first != "initial_state" &&
                           kv.first != "initial_precond_state" && kv.first != "cu_seqlens";
    if (!per_token) {
      out.emplace(kv.first, x);
      continue;
    }
    std::vector<std::int64_t> shape = x.shape();
    const std::int64_t B = shape[0], T = shape[1];
    std::int64_t inner = 1;
    for (std::size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
    shape[1] = t1 - t0;
    Tensor y(x.dtype(), shape);
    const std::size_t es = elementSize(x.dtype());
    for (std::int64_t b = 0; b < B; ++b) {
      const std::uint8_t* src = x.data() + std::size_t((b * T + t0) * inner) * es;
      std::uint8_t* dst = y.data() + std::size_t(b * (t1 - t0) * inner) * es;
      std::copy(src, src + std::size_t((t1 - t0) * inner) * es, dst);
    }
    out.emplace(kv.first, std::move(y));
  }
  return out;
}

std::string tempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dgps-gpu-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  return buf.data();
}

std::string writeGvaVariant(const Package& pkg, int ratio, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  Spec spec = pkg.spec();
  spec.gva_ratio = ratio;
  std::string yaml = canonicalYaml(spec);
  std::string manifest = read(pkg.directory() + "/manifest.yaml");
  const std::string old_hash = pkg.manifest().spec_hash;
  auto at = manifest.find(old_hash);
  if (at == std::string::npos) throw std::runtime_error("manifest lacks its spec_hash text");
  manifest.replace(at, old_hash.size(), specHash(spec));
  // the manifest's layer line carries the ratio too (the runtime reads it, not spec.yaml)
  const std::string old_ratio = "gva_ratio: " + std::to_string(pkg.spec().gva_ratio);
  at = manifest.find(old_ratio, manifest.find("\nlayer:"));
  if (at == std::string::npos) throw std::runtime_error("manifest lacks layer.gva_ratio");
  manifest.replace(at, old_ratio.size(), "gva_ratio: " + std::to_string(ratio));
  std::ofstream(dir + "/" + pkg.manifest().spec, std::ios::binary) << yaml;
  std::ofstream(dir + "/manifest.yaml", std::ios::binary) << manifest;
  std::ofstream(dir + "/" + pkg.manifest().source, std::ios::binary) << pkg.source();
  return dir;
}

}  // namespace gputest
}  // namespace dgps
