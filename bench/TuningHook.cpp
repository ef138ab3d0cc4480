#include "TuningHook.h"

#include <exception>

#include "dgps/runtime/tune/TuneJob.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps {
namespace bench {

tuning::DeviceFingerprint currentFingerprint(const GpuInfo& gpu, const Package& package) {
  tuning::DeviceFingerprint f;
  f.name = gpu.name;
  f.compute_capability = std::to_string(gpu.cc.major) + "." + std::to_string(gpu.cc.minor);
  if (!gpu.target.ptx && !gpu.target.arch.empty() && gpu.target.arch.back() == 'a') f.compute_capability += "a";
  f.sm_count = gpu.sm_count;
  f.driver_version = gpu.driver_version;
  f.nvrtc_version = gpu.nvrtc_version;
  f.codegen_version = tune::codegenIdentity(package);
  f.smem_per_block_optin = gpu.smem_per_block_optin;
  f.smem_per_sm = gpu.smem_per_sm;
  f.regs_per_sm = gpu.regs_per_sm;
  f.max_threads_per_block = gpu.max_threads_per_block;
  f.l2_bytes = gpu.l2_bytes;
  return f;
}

tuning::ProblemKey problemKey(const Package& package, const BenchShape& shape, int sm_count) {
  launch::ProblemShape s;
  s.B = shape.batch;
  s.N = shape.batch;
  s.T = shape.kind == Kind::Forward ? shape.seq_len : 1;
  s.H = shape.heads_qk;
  s.HV = valueHeads(package.spec(), shape);
  s.K = shape.key_dim;
  s.V = shape.value_dim;
  const tuning::KernelFamily kind =
      shape.kind == Kind::Forward ? tuning::KernelFamily::Forward : tuning::KernelFamily::Decode;
  return tuning::makeKey(package.manifest().spec_hash, tuning::tuneProblem(s, tuning::InputDType::BF16, kind),
                         sm_count);
}

TunedLookup lookupTuned(const Package& package, const BenchShape& shape, const GpuInfo& gpu) {
  TunedLookup out;
  try {
    std::string error;
    auto path = tuning::resolveDbPath(&error);
    if (!path) {
      out.note = "no tuning database path: " + error;
      return out;
    }
    tuning::TuningDb db(*path);
    tuning::Status st = db.load();
    if (!st) {
      out.note = "tuning database unreadable: " + st.message;
      return out;
    }
    const TileConfig& fallback = package.manifest().default_config;
    const tuning::ProblemKey key = problemKey(package, shape, gpu.sm_count);
    const tuning::LookupResult r = db.lookup(currentFingerprint(gpu, package), key, fallback, /*collectForeign=*/true);
    if (r.source == tuning::LookupSource::Default || !r.record) {
      out.note = "no record in " + *path + " for " + key.str();
      if (!r.foreign.empty()) {
        out.note += " (" + std::to_string(r.foreign.size()) + " foreign: " + r.foreign.front().reason + ")";
      }
      return out;
    }
    out.config = r.config;
    out.source = r.source == tuning::LookupSource::Exact ? "exact" : "nearest T bucket";
    out.recorded_ms = r.record->median_ms;
  } catch (const std::exception& e) {
    out.note = std::string("tuning database lookup failed: ") + e.what();
  }
  return out;
}

}  // namespace bench
}  // namespace dgps
