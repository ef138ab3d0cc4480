#include "dgps/runtime/tune/RuntimeTrialBackend.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Validation.h"
#include "dgps/runtime/tune/ScratchForward.h"
#include "dgps/runtime/tune/TrialProcess.h"

namespace dgps {
namespace tune {

double defaultTolerance(ScalarType dtype) { return dtype == ScalarType::F16 ? 1e-2 : 2e-2; }

namespace {

using tuning::TrialStatus;

[[noreturn]] void invalid(const std::string& m) { throw RuntimeError(RuntimeErrorCode::InvalidArgument, m); }

std::string makeWorkDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/dgps-tune-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    throw RuntimeError(RuntimeErrorCode::Io, "cannot create a scratch folder for tuning trials from " + templ);
  }
  return std::string(buf.data());
}

/// CUDA events for `n` timed repetitions, destroyed with the object (in the current context).
class EventPairs {
 public:
  explicit EventPairs(int n) {
    const CudaDriver& d = cudaDriver();
    for (int i = 0; i < n; ++i) {
      CUevent a = nullptr, b = nullptr;
      checkCuda(d.cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
      start_.push_back(a);
      checkCuda(d.cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
      stop_.push_back(b);
    }
  }
  ~EventPairs() {
    const CudaDriver& d = cudaDriver();
    for (CUevent e : start_) d.cuEventDestroy(e);
    for (CUevent e : stop_) d.cuEventDestroy(e);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  CUevent start(int i) const { return start_[std::size_t(i)]; }
  CUevent stop(int i) const { return stop_[std::size_t(i)]; }

 private:
  std::vector<CUevent> start_, stop_;
};

}  // namespace

struct RuntimeTrialBackend::Impl {
  Runtime& rt;
  const Package& pkg;
  TrialBackendOptions opt;
  ReferenceProblem slice;

  // Lazily prepared on the driver's (single) calling thread; compile() never touches these.
  bool prepared = false;
  ReferenceInputs slice_inputs;
  ReferenceOutputs reference;
  std::string work_dir;
  bool own_work_dir = false;
  std::string slice_inputs_path;
  int trials = 0;

  std::unique_ptr<ScratchForward> slice_scratch;  // in-process screening only
  std::unique_ptr<ScratchForward> full_scratch;   // timing
  std::optional<TileConfig> last_config;
  TensorMap last_outputs;

  CUstream stream = nullptr;
  DeviceBuffer flush;
  DeviceBuffer workspace;
  bool suspect = false;  // an in-process CUDA call failed: the context may be dead

  Impl(Runtime& r, const Package& p, TrialBackendOptions o) : rt(r), pkg(p), opt(std::move(o)) {}

  ~Impl() {
    full_scratch.reset();
    slice_scratch.reset();
    if (stream) {
      try {
        DeviceContextGuard g(opt.device);
        cudaDriver().cuStreamDestroy(stream);
      } catch (...) {
        // a dead context cannot destroy the stream; the driver reclaims it at exit
      }
    }
    if (own_work_dir) {
      std::error_code ec;
      std::filesystem::remove_all(work_dir, ec);
    }
  }

  bool isFullSameAsSlice() const { return opt.full.batch == slice.batch && opt.full.seq_len == slice.seq_len; }

  void prepare() {
    if (prepared) return;
    try {
      slice_inputs = generateInputs(pkg.spec(), slice, opt.seed, opt.dtype);
      reference = runReference(pkg.spec(), slice_inputs);
    } catch (const DataError& e) {
      invalid(std::string("autotuning ") + pkg.name() + ": cannot build the validation slice: " + e.what());
    }
    if (opt.isolate) {
      if (opt.work_dir.empty()) {
        work_dir = makeWorkDir();
        own_work_dir = true;
      } else {
        work_dir = opt.work_dir;
      }
      slice_inputs_path = work_dir + "/slice_inputs.safetensors";
      SafetensorsFile f;
      f.metadata["package"] = pkg.name();
      f.metadata["seed"] = std::to_string(opt.seed);
      f.tensors = slice_inputs;
      try {
        writeSafetensors(slice_inputs_path, f);
      } catch (const DataError& e) {
        throw RuntimeError(RuntimeErrorCode::Io, std::string("autotuning: ") + e.what());
      }
    }
    prepared = true;
  }

  void ensureStream() {
    if (stream) return;
    checkCuda(cudaDriver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate (tuning stream)");
  }

  void ensureFull() {
    prepare();
    if (full_scratch) return;
    full_scratch = std::make_unique<ScratchForward>(
        pkg, isFullSameAsSlice() ? slice_inputs : tileInputs(slice_inputs, opt.full.batch, opt.full.seq_len),
        opt.device);
    DeviceContextGuard g(opt.device);
    const CudaDriver& d = cudaDriver();
    CUdevice dev = 0;
    checkCuda(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
    int l2 = 0;
    checkCuda(d.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute(L2_CACHE_SIZE)");
    // Writing twice the L2 evicts everything the previous repetition left there.
    std::size_t bytes = std::max<std::size_t>(2 * std::size_t(std::max(l2, 0)), std::size_t(32) << 20);
    bytes = (bytes + 3) / 4 * 4;
    flush = DeviceBuffer(opt.device, bytes);
  }

  ForwardTensors fullTensors(const TileConfig& config) {
    ForwardTensors t = full_scratch->tensors();
    const ForwardProblem p = validateForward(pkg, t);
    const std::size_t need = rt.forwardWorkspaceBytes(pkg, p, config);
    if (need > 0) {
      if (workspace.size() < need) {
        workspace = DeviceBuffer();
        workspace = DeviceBuffer(opt.device, (need + 255) / 256 * 256);
      }
      t.workspace = TensorView(workspace.data(), ScalarType::I32, {std::int64_t(workspace.size() / 4)}, opt.device);
    }
    return t;
  }
};

RuntimeTrialBackend::RuntimeTrialBackend(Runtime& runtime, const Package& package, TrialBackendOptions options)
    : impl_(std::make_unique<Impl>(runtime, package, std::move(options))) {
  const TrialBackendOptions& o = impl_->opt;
  if (!o.full.cu_seqlens.empty()) invalid("autotuning trials run dense shapes; cu_seqlens must be empty");
  if (o.dtype != ScalarType::BF16 && o.dtype != ScalarType::F16) {
    invalid(std::string("autotuning: input dtype must be bf16 or f16, got ") + toString(o.dtype));
  }
  if (o.isolate && o.trial_helper.empty()) {
    invalid("autotuning: isolated trials need the dgps-tune-trial helper's path (TrialBackendOptions::trial_helper)");
  }
  if (!package.manifest().has_forward) invalid("autotuning: package " + package.name() + " has no forward kernels");
  impl_->slice = tune::sliceShape(o.full);
  if (impl_->opt.cache_dir.empty()) impl_->opt.cache_dir = runtime.compiler().cache().directory();
}

RuntimeTrialBackend::~RuntimeTrialBackend() = default;

const ReferenceProblem& RuntimeTrialBackend::sliceShape() const { return impl_->slice; }

const ReferenceOutputs& RuntimeTrialBackend::reference() {
  impl_->prepare();
  return impl_->reference;
}

tuning::CompileResult RuntimeTrialBackend::compile(const tuning::TileConfig& config,
                                                   const tuning::CompileControl& control) {
  tuning::CompileResult r;
  if (control.cancelled()) {
    r.status = TrialStatus::Timeout;
    r.log = "cancelled before the compile started";
    return r;
  }
  const TrialBackendOptions& o = impl_->opt;
  try {
    const VariantInfo info =
        impl_->rt.prepare(impl_->pkg, o.full.key_dim, o.full.value_dim, o.dtype, config, o.device);
    for (const KernelInfo& k : info.kernels) {
      r.registers = std::max(r.registers, k.registers);
      r.local_bytes = std::max<long long>(r.local_bytes, k.local_bytes);
    }
    // ptxas' view counts spills the driver's LOCAL_SIZE may fold into the stack frame; keep the larger.
    for (const KernelResourceUsage& u : info.ptxas) {
      r.local_bytes = std::max<long long>(r.local_bytes, u.stack_frame_bytes + u.spill_store_bytes);
    }
    r.log = std::string(info.from_cache ? "binary cache hit" : "compiled") + " for " + info.target.arch;
  } catch (const std::exception& e) {
    r.status = TrialStatus::CompileError;
    r.log = e.what();
  }
  return r;
}

tuning::RunResult RuntimeTrialBackend::runOnce(const tuning::TileConfig& config) {
  tuning::RunResult r;
  Impl& m = *impl_;
  m.last_config.reset();
  try {
    m.prepare();
    if (!m.slice_scratch) m.slice_scratch = std::make_unique<ScratchForward>(m.pkg, m.slice_inputs, m.opt.device);
    DeviceContextGuard g(m.opt.device);
    m.ensureStream();
    m.slice_scratch->poisonOutputs();
    LaunchOptions lo;
    lo.stream = m.stream;
    lo.config = config;
    m.rt.forward(m.pkg, m.slice_scratch->tensors(), lo);
    checkCuda(cudaDriver().cuStreamSynchronize(m.stream), "cuStreamSynchronize after the candidate's forward");
    m.last_outputs = m.slice_scratch->downloadOutputs();
    m.last_config = config;
  } catch (const RuntimeError& e) {
    if (e.code() == RuntimeErrorCode::Cuda) m.suspect = true;
    r.status = TrialStatus::Fault;
    r.message = e.what();
  } catch (const std::exception& e) {
    r.status = TrialStatus::Fault;
    r.message = e.what();
  }
  return r;
}

tuning::Validation RuntimeTrialBackend::validate(const tuning::TileConfig& config) {
  tuning::Validation v;
  Impl& m = *impl_;
  if (!m.last_config || *m.last_config != config) {
    v.ok = false;
    v.max_rel_err = std::numeric_limits<double>::quiet_NaN();
    v.message = "no outputs of " + toString(config) + " to validate (runOnce failed or was not called)";
    return v;
  }
  std::string worst;
  v.max_rel_err = maxRelativeError(m.last_outputs, m.reference, &worst);
  v.ok = v.max_rel_err <= m.opt.tolerance;
  char buf[160];
  std::snprintf(buf, sizeof buf, "max relative error %.3g in '%s' (tolerance %.3g)", v.max_rel_err, worst.c_str(),
                m.opt.tolerance);
  v.message = v.ok ? std::string() : std::string(buf);
  return v;
}

tuning::ScreenResult RuntimeTrialBackend::screen(const tuning::TileConfig& config) {
  Impl& m = *impl_;
  if (!m.opt.isolate) {
    tuning::ScreenResult s = TrialBackend::screen(config);
    return s;
  }
  tuning::ScreenResult s;
  s.max_rel_err = std::numeric_limits<double>::quiet_NaN();
  try {
    m.prepare();
  } catch (const std::exception& e) {
    s.status = TrialStatus::Fault;
    s.message = std::string("could not prepare the trial inputs: ") + e.what();
    return s;
  }
  const int n = m.trials++;
  TrialRequest req;
  req.package = m.pkg.directory();
  req.inputs = m.slice_inputs_path;
  req.outputs = m.work_dir + "/outputs_" + std::to_string(n) + ".safetensors";
  req.report = m.work_dir + "/verdict_" + std::to_string(n) + ".txt";
  req.cache_dir = m.opt.cache_dir;
  req.device = m.opt.device;
  req.config = config;
  if (m.opt.full_shape_screen && !m.isFullSameAsSlice()) {
    req.full_batch = m.opt.full.batch;
    req.full_tokens = m.opt.full.seq_len;
  }
  const TrialOutcome out =
      runIsolatedTrial(m.opt.trial_helper, req, m.work_dir + "/log_" + std::to_string(n) + ".txt", m.opt.trial_timeout);
  using Kind = TrialOutcome::Kind;
  switch (out.kind) {
    case Kind::Timeout: s.status = TrialStatus::Timeout; s.message = out.message; return s;
    case Kind::NonFinite: s.status = TrialStatus::WrongResult; s.message = out.message; return s;
    case Kind::Fault:
    case Kind::Error: s.status = TrialStatus::Fault; s.message = "isolated trial: " + out.message; return s;
    case Kind::Ok: break;
  }
  try {
    const SafetensorsFile got = readSafetensors(req.outputs);
    std::string worst;
    s.max_rel_err = maxRelativeError(got.tensors, m.reference, &worst);
    const bool ok = s.max_rel_err <= m.opt.tolerance;
    s.status = ok ? TrialStatus::Ok : TrialStatus::WrongResult;
    if (!ok) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "max relative error %.3g in '%s' on the slice B=%lld T=%lld (tolerance %.3g)",
                    s.max_rel_err, worst.c_str(), static_cast<long long>(m.slice.batch),
                    static_cast<long long>(m.slice.seq_len), m.opt.tolerance);
      s.message = buf;
    }
  } catch (const std::exception& e) {
    s.status = TrialStatus::Fault;
    s.message = std::string("isolated trial wrote no readable outputs: ") + e.what();
  }
  std::remove(req.outputs.c_str());
  return s;
}

tuning::TimingResult RuntimeTrialBackend::time(const tuning::TileConfig& config, int warmup, int reps) {
  tuning::TimingResult r;
  Impl& m = *impl_;
  try {
    m.ensureFull();
    DeviceContextGuard g(m.opt.device);
    const CudaDriver& d = cudaDriver();
    m.ensureStream();
    const TileConfig rc = config;
    const ForwardTensors t = m.fullTensors(rc);
    LaunchOptions lo;
    lo.stream = m.stream;
    lo.config = rc;
    for (int i = 0; i < warmup; ++i) m.rt.forward(m.pkg, t, lo);
    EventPairs ev(reps);
    for (int i = 0; i < reps; ++i) {
      checkCuda(d.cuMemsetD32Async(m.flush.ptr(), unsigned(i + 1), m.flush.size() / 4, m.stream), "L2 flush memset");
      checkCuda(d.cuEventRecord(ev.start(i), m.stream), "cuEventRecord");
      m.rt.forward(m.pkg, t, lo);
      checkCuda(d.cuEventRecord(ev.stop(i), m.stream), "cuEventRecord");
    }
    checkCuda(d.cuStreamSynchronize(m.stream), "cuStreamSynchronize after timing " + toString(config));
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      checkCuda(d.cuEventElapsedTime(&ms, ev.start(i), ev.stop(i)), "cuEventElapsedTime");
      r.ms.push_back(ms);
    }
  } catch (const RuntimeError& e) {
    if (e.code() == RuntimeErrorCode::Cuda) m.suspect = true;
    r.status = TrialStatus::Fault;
    r.message = e.what();
    r.ms.clear();
  } catch (const std::exception& e) {
    r.status = TrialStatus::Fault;
    r.message = e.what();
    r.ms.clear();
  }
  return r;
}

bool RuntimeTrialBackend::contextHealthy() {
  Impl& m = *impl_;
  if (!m.suspect) return true;
  // Errors such as an illegal address are sticky: every later call in the context reports them.
  try {
    DeviceContextGuard g(m.opt.device);
    if (cudaDriver().cuCtxSynchronize() != CUDA_SUCCESS) return false;
  } catch (...) {
    return false;
  }
  m.suspect = false;
  return true;
}

}  // namespace tune
}  // namespace dgps
