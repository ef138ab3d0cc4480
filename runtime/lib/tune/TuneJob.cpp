#include "dgps/runtime/tune/TuneJob.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "LaunchPlan.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/DefaultConfig.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tune/RuntimeTrialBackend.h"
#include "dgps/runtime/tune/TrialProcess.h"

namespace dgps {
namespace tune {
namespace {

[[noreturn]] void invalid(const std::string& m) { throw RuntimeError(RuntimeErrorCode::InvalidArgument, m); }

// FNV-1a, 64 bit: an identity, not a security boundary.
std::uint64_t fnv1a(std::uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

int attribute(CUdevice dev, CUdevice_attribute a, const char* name) {
  int v = 0;
  checkCuda(cudaDriver().cuDeviceGetAttribute(&v, a, dev), std::string("cuDeviceGetAttribute(") + name + ")");
  return v;
}

// The launch plan's problem for a tuning shape (host-side only; nothing is launched).
ForwardProblem planProblem(const Package& package, const tuning::TuneProblem& problem) {
  const launch::ProblemShape& s = problem.shape;
  ForwardProblem p;
  p.batch = s.varlen ? 1 : s.N;
  p.num_seqs = s.N;
  p.seq_len = s.T;
  p.row_steps = householderSteps(package.layer());  // tokens of T; the kernels' rows are its steps
  p.heads_qk = s.H;
  p.heads_v = s.HV;
  p.key_dim = s.K;
  p.value_dim = s.V;
  p.input_dtype = problem.dtype == tuning::InputDType::F16 ? ScalarType::F16 : ScalarType::BF16;
  p.varlen = s.varlen != 0;
  p.scale = package.spec().scale ? float(*package.spec().scale) : float(1.0 / std::sqrt(double(s.K)));
  return p;
}

// The tuner's element type of q, k, v: the runtime runs f16 or bf16 (anything else is keyed as bf16,
// as before, since the forward refuses it before tuning matters).
tuning::InputDType inputDType(ScalarType t) {
  return t == ScalarType::F16 ? tuning::InputDType::F16 : tuning::InputDType::BF16;
}

}  // namespace

std::string codegenIdentity(const Package& package) {
  std::uint64_t h = 1469598103934665603ull;
  h = fnv1a(h, package.source());
  h = fnv1a(h, std::string(1, '\0'));
  h = fnv1a(h, embeddedHeadersDigest());
  // a record tuned with two summaries per SM is not the one without (folded in only when on: with the switch off
  // the identity is what it would be without the switch)
  if (summaryPairsEnabled()) h = fnv1a(h, std::string("\0DGPS_SUMMARY_PAIRS=1", 21));
  char buf[64];
  std::snprintf(buf, sizeof buf, "cg%d-%016llx", package.manifest().codegen_version, static_cast<unsigned long long>(h));
  return buf;
}

tuning::DeviceFingerprint deviceFingerprint(const Package& package, int device) {
  const CudaDriver& d = cudaDriver();
  if (device < 0 || device >= cudaDeviceCount()) {
    throw RuntimeError(RuntimeErrorCode::NoDevice, "device " + std::to_string(device) + " does not exist (" +
                                                       std::to_string(cudaDeviceCount()) + " CUDA device(s))");
  }
  CUdevice dev = 0;
  checkCuda(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  tuning::DeviceFingerprint f;
  f.name = deviceName(device);
  const ComputeCapability cc = deviceComputeCapability(device);
  const NvrtcEnvironment& nv = nvrtcEnvironment();
  const JitTarget target = selectJitTarget(cc, nv.supported_archs);
  f.compute_capability = std::to_string(cc.major) + "." + std::to_string(cc.minor);
  if (!target.ptx && !target.arch.empty() && target.arch.back() == 'a') f.compute_capability += "a";
  f.sm_count = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT");
  f.driver_version = cudaVersionString(d.driver_version);
  f.nvrtc_version = std::to_string(nv.major) + "." + std::to_string(nv.minor);
  f.codegen_version = codegenIdentity(package);
  f.smem_per_block_optin =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  f.smem_per_sm =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR");
  f.regs_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "MAX_REGISTERS_PER_MULTIPROCESSOR");
  f.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK");
  f.l2_bytes = attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2_CACHE_SIZE");
  return f;
}

tuning::TuneProblem tuningShape(const ForwardProblem& p) {
  launch::ProblemShape s;
  s.B = p.batch;
  s.N = p.num_seqs;
  s.T = p.seq_len;  // total packed tokens for varlen
  s.H = p.heads_qk;
  s.HV = p.heads_v;
  s.K = p.key_dim;
  s.V = p.value_dim;
  s.varlen = p.varlen ? 1 : 0;
  return tuning::tuneProblem(s, inputDType(p.input_dtype), tuning::KernelFamily::Forward);
}

tuning::TuneProblem tuningShape(const ReferenceProblem& shape, ScalarType dtype) {
  launch::ProblemShape s;
  s.varlen = shape.cu_seqlens.empty() ? 0 : 1;
  s.N = shape.numSeqs();
  s.B = s.varlen ? 1 : s.N;
  s.T = shape.seq_len;
  s.H = shape.heads_qk;
  s.HV = shape.heads_v;
  s.K = shape.key_dim;
  s.V = shape.value_dim;
  return tuning::tuneProblem(s, inputDType(dtype), tuning::KernelFamily::Forward);
}

tuning::ProblemKey problemKey(const Package& package, const tuning::TuneProblem& shape, int sm_count) {
  // Every candidate of a package computes with the same precision policy (fp32 accumulation and
  // state, docs/math.md §7.5); precision is not searched, so one constant names it.
  return tuning::makeKey(package.manifest().spec_hash, shape, sm_count, "ieee");
}

tuning::CandidateSet forwardCandidates(const Package& package, const tuning::TuneProblem& shape,
                                       const tuning::DeviceFingerprint& device) {
  const TuningSpace& space = package.manifest().tunables;
  tuning::Tunables t;
  t.chunk = space.chunk;
  t.block_v = space.block_v;
  t.warps = space.warps;
  t.stages = space.stages;
  tuning::PruneOptions opt;
  const ForwardProblem problem = planProblem(package, shape);
  opt.smem_bytes = [&package, problem](const tuning::TileConfig& c, const tuning::TuneProblem&) -> std::int64_t {
    try {
      std::int64_t most = 0;
      for (const auto& k : detail::planForward(package, problem, c).kernels)
        most = std::max<std::int64_t>(most, std::int64_t(k.shared_bytes));
      return most;
    } catch (const std::exception&) {
      return 0;  // the capability check below reports why the plan refuses
    }
  };
  opt.capability = [&package, problem](const tuning::TileConfig& c,
                                       const tuning::TuneProblem&) -> std::optional<std::string> {
    try {
      package.checkConfig(c);
      detail::planForward(package, problem, c);
      return std::nullopt;
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  const tuning::CandidateSet set = tuning::generateCandidates(t, shape, device, opt);
  // long shapes: the segment length of the segmented state pass is searched too (Candidates.h)
  if (package.manifest().launch.forward_segmented.empty()) return set;
  // a segment length counts chunks of the kernels' rows: T·n_h with several Householder steps per token
  tuning::TuneProblem rows = shape;
  rows.shape.T *= householderSteps(package.layer());
  // centred on the length the runtime itself takes for each configuration (paired summaries included)
  const ForwardDefaultInputs in = forwardDefaultInputs(package, problem, device.sm_count);
  return tuning::withSegmentLengths(set, rows, device.sm_count,
                                    [in](const tuning::TileConfig& c) { return autoSegmentChunks(in, c); });
}

namespace {

void checkJob(const Package& package, const TuneJob& job) {
  const Manifest& m = package.manifest();
  if (!m.has_forward) invalid("package " + package.name() + " has no forward kernels to tune");
  if (!job.shape.cu_seqlens.empty()) invalid("tuning runs dense shapes; give B and T instead of cu_seqlens");
  bool dtype_ok = false;
  std::string dtypes;
  for (DType d : m.input_dtypes) {
    dtype_ok = dtype_ok || toScalarType(d) == job.dtype;
    dtypes += (dtypes.empty() ? "" : ", ") + std::string(toString(toScalarType(d)));
  }
  if (!dtype_ok) {
    invalid(std::string("dtype ") + toString(job.dtype) + " is not an input dtype of package " + package.name() +
            " (it takes " + dtypes + ")");
  }
  try {
    checkProblemShape(package.spec(), job.shape);
  } catch (const DataError& e) {
    invalid("shape B=" + std::to_string(job.shape.batch) + " T=" + std::to_string(job.shape.seq_len) +
            " H=" + std::to_string(job.shape.heads_qk) + " HV=" + std::to_string(job.shape.heads_v) +
            " K=" + std::to_string(job.shape.key_dim) + " V=" + std::to_string(job.shape.value_dim) +
            " does not fit package " + package.name() + ": " + e.what());
  }
  if (job.shape.batch < 1 || job.shape.seq_len < 1) invalid("tuning needs B >= 1 and T >= 1");
}

std::uint64_t freshSeed() {
  std::random_device rd;
  std::uint64_t s = (std::uint64_t(rd()) << 32) ^ rd();
  return s == 0 ? 1 : s;
}

}  // namespace

TuneOutcome tunePackage(const Package& package, const TuneJob& job, const tuning::ProgressFn& progress) {
  RuntimeOptions ro;
  ro.cache_dir = job.cache_dir;
  ro.check_pointers = false;  // scratch tensors only
  Runtime rt(ro);
  return tunePackage(rt, package, job, progress);
}

TuneOutcome tunePackage(Runtime& runtime, const Package& package, const TuneJob& job,
                        const tuning::ProgressFn& progress) {
  checkJob(package, job);
  std::string why;
  if (!cudaAvailable(&why)) {
    throw RuntimeError(RuntimeErrorCode::NoDevice, "no GPU to tune on: " + why);
  }
  TuneOutcome out;
  out.fingerprint = deviceFingerprint(package, job.device);
  const tuning::TuneProblem shape = tuningShape(job.shape, job.dtype);
  out.key = problemKey(package, job.key_shape ? *job.key_shape : shape, out.fingerprint.sm_count);

  out.db_path = job.db_path;
  if (out.db_path.empty()) {
    std::string err;
    auto p = tuning::resolveDbPath(&err);
    if (!p) invalid("no tuning database location: " + err + " (set DGPS_TUNING_DB)");
    out.db_path = *p;
  }
  tuning::TuningDb db(out.db_path);
  if (tuning::Status s = db.load(); !s) {
    out.result.status = s;
    return out;
  }

  TrialBackendOptions bo;
  bo.device = job.device;
  bo.dtype = job.dtype;
  bo.full = job.shape;
  bo.seed = job.seed ? job.seed : freshSeed();
  bo.tolerance = job.tuner.max_rel_err >= 0 ? job.tuner.max_rel_err : defaultTolerance(job.dtype);
  bo.isolate = job.isolate;
  bo.trial_timeout = job.trial_timeout;
  bo.cache_dir = job.cache_dir;
  if (job.isolate) {
    bo.trial_helper = job.trial_helper;
    if (bo.trial_helper.empty()) {
      std::string searched;
      auto helper = findTrialHelper(&searched);
      if (!helper) {
        invalid("cannot isolate candidate trials: the dgps-tune-trial helper was not found (looked at: " + searched +
                "); install it next to this program, set DGPS_TUNE_TRIAL, or run trials in-process (dgps-tune "
                "--in-process), accepting that a faulting candidate then ends the tuning run");
      }
      bo.trial_helper = *helper;
    }
  }
  RuntimeTrialBackend backend(runtime, package, bo);

  tuning::TunerOptions topt = job.tuner;
  topt.max_rel_err = bo.tolerance;
  tuning::Autotuner tuner(backend, topt);
  if (progress) tuner.setProgress(progress);
  const tuning::CandidateSet candidates = forwardCandidates(package, shape, out.fingerprint);
  if (job.force) {
    out.result = tuner.tune(out.fingerprint, out.key, candidates);
    if (out.result.status && out.result.record) {
      // The same toolchain-baseline comparison tuneOrReuse makes: against this hardware's record under another toolchain.
      if (auto base = db.findToolchainBaseline(out.fingerprint, out.key); base && base->median_ms > 0) {
        out.result.baseline = base;
        out.result.regression = out.result.record->median_ms / base->median_ms - 1.0;
        out.result.regressed = out.result.regression > topt.regression_threshold;
      }
      if (tuning::Status s = db.append(*out.result.record); !s) out.result.db_error = s.message;
    }
  } else {
    out.result = tuner.tuneOrReuse(db, out.fingerprint, out.key, candidates);
  }
  out.seed = out.result.reused ? 0 : bo.seed;
  out.db_warnings = db.warnings();
  return out;
}

}  // namespace tune
}  // namespace dgps
