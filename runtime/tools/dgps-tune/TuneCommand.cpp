#include "TuneCommand.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/tune/RuntimeTrialBackend.h"
#include "dgps/runtime/tune/TuneCli.h"
#include "dgps/runtime/tune/TuneJob.h"

namespace dgps {
namespace tune {
namespace {

struct CliOptions {
  std::string package, shape, dtype = "bf16", db, cache_dir;
  int device = 0;
  bool force = false, in_process = false, quiet = false;
  int warmup = 3, reps = 20;
  std::uint64_t seed = 0;
  double compile_timeout_s = 120, trial_timeout_s = 180;
};

std::string fmtMs(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", ms);
  return b;
}

int report(const TuneOutcome& o, std::ostream& out, std::ostream& err) {
  for (const tuning::DbWarning& w : o.db_warnings) {
    err << "dgps-tune: " << tuning::format(w) << "\n";
  }
  const tuning::TuneResult& r = o.result;
  out << tuning::formatTable(r);
  if (!r.status || !r.record) {
    err << "dgps-tune: error: " << (r.status.message.empty() ? "no configuration chosen" : r.status.message) << "\n";
    return 1;
  }
  const tuning::TuningRecord& rec = *r.record;
  const std::string cfg = toString(rec.config);
  if (r.reused) {
    out << "reused recorded winner " << cfg << " (median " << fmtMs(rec.median_ms) << " ms, recorded " << rec.date
        << " on " << rec.host << ") for key " << o.key.str() << " in DB " << o.db_path
        << "; nothing was re-tuned (pass --force to measure again)\n";
    return 0;
  }
  if (!r.db_error.empty()) {
    err << "dgps-tune: error: winner " << cfg << " could not be recorded: " << r.db_error << "\n";
    return 1;
  }
  out << "recorded winner " << cfg << " (median " << fmtMs(rec.median_ms) << " ms, p20 " << fmtMs(rec.p20_ms)
      << ", p80 " << fmtMs(rec.p80_ms) << ", " << rec.candidates_tried << " candidates tried, input seed " << o.seed
      << ") for key " << o.key.str() << " in DB " << o.db_path << "\n";
  if (r.regressed) {
    err << "dgps-tune: warning: the winner is " << fmtMs(100.0 * r.regression)
        << "% slower than this GPU's record under the previous toolchain; see the baseline line above\n";
  }
  return 0;
}

}  // namespace

int runTuneCommand(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CliOptions o;
  CLI::App app{"dgps-tune: autotune a generated DGPS package's chunked forward on this GPU and record the winner "
               "in the tuning database (no MLIR needed)"};
  app.add_option("package", o.package, "generated package folder (e.g. generated/pgdn)")->required();
  app.add_option("--shape", o.shape, "problem shape, e.g. B=8,T=4096,H=16,K=128,V=128 (keys B T H HV K V)")->required();
  app.add_option("--dtype", o.dtype, "q/k/v/o dtype")->check(CLI::IsMember({"bf16", "f16"}));
  app.add_option("--db", o.db, "tuning database file (default $DGPS_TUNING_DB, else ~/.cache/dgps/tuning.jsonl)");
  app.add_option("--device", o.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app.add_option("--cache-dir", o.cache_dir, "binary cache folder (default $DGPS_CACHE_DIR, else ~/.cache/dgps)");
  app.add_flag("--force", o.force, "tune even when the database already has a record for this GPU and key");
  app.add_flag("--in-process", o.in_process,
               "screen candidates in this process instead of isolated dgps-tune-trial processes (a faulting "
               "candidate then ends the run)");
  app.add_option("--warmup", o.warmup, "untimed launches before timing each candidate")->check(CLI::NonNegativeNumber);
  app.add_option("--reps", o.reps, "timed launches per candidate")->check(CLI::Range(1, 100000));
  app.add_option("--seed", o.seed, "input seed (default: fresh)");
  app.add_option("--compile-timeout", o.compile_timeout_s, "seconds per candidate compile")->check(CLI::PositiveNumber);
  app.add_option("--trial-timeout", o.trial_timeout_s, "seconds per isolated trial process")->check(CLI::PositiveNumber);
  app.add_flag("-q,--quiet", o.quiet, "no progress bar");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // `dgps-tune specs/pgdn.yaml` (no --shape yet): the spec is the first thing to point out.
    if (e.get_exit_code() != 0 && !o.package.empty()) {
      try {
        Package::open(o.package);
      } catch (const RuntimeError& pe) {
        if (std::string(pe.what()).find("this is a spec") != std::string::npos) {
          err << "dgps-tune: error: " << pe.what() << "\n";
          return 2;
        }
      }
    }
    const int rc = app.exit(e, out, err);
    return rc == 0 ? 0 : 2;
  }

  TuneJob job;
  Package pkg;
  try {
    const ShapeArg arg = parseShapeArg(o.shape);
    pkg = Package::open(o.package);
    job.shape = resolveShapeArg(arg, pkg.spec());
  } catch (const std::exception& e) {
    err << "dgps-tune: error: " << e.what() << "\n";
    return 2;
  }
  job.dtype = o.dtype == "f16" ? ScalarType::F16 : ScalarType::BF16;
  job.device = o.device;
  job.db_path = o.db;
  job.cache_dir = o.cache_dir;
  job.force = o.force;
  job.isolate = !o.in_process;
  job.seed = o.seed;
  job.trial_timeout = std::chrono::milliseconds(static_cast<long long>(o.trial_timeout_s * 1000));
  job.tuner.warmup = o.warmup;
  job.tuner.reps = o.reps;
  job.tuner.compile_timeout = std::chrono::milliseconds(static_cast<long long>(o.compile_timeout_s * 1000));

  try {
    ProgressPrinter printer(err, isatty(2) != 0);
    tuning::ProgressFn progress;
    if (!o.quiet) progress = [&printer](const tuning::TuneProgress& p) { printer(p); };
    TuneOutcome outcome = tunePackage(pkg, job, progress);
    const tuning::DeviceFingerprint& f = outcome.fingerprint;
    out << "dgps-tune: " << pkg.name() << " B=" << job.shape.batch << " T=" << job.shape.seq_len
        << " H=" << job.shape.heads_qk << " HV=" << job.shape.heads_v << " K=" << job.shape.key_dim
        << " V=" << job.shape.value_dim << " " << o.dtype << " on device " << job.device << ": " << f.name << " (cc "
        << f.compute_capability << ", " << f.sm_count << " SMs, driver " << f.driver_version << ", NVRTC "
        << f.nvrtc_version << ", " << f.codegen_version << ")\n";
    return report(outcome, out, err);
  } catch (const RuntimeError& e) {
    err << "dgps-tune: error: " << e.what() << "\n";
    if (e.code() == RuntimeErrorCode::NoDriver || e.code() == RuntimeErrorCode::NoDevice) {
      err << "dgps-tune: tuning measures the GPU it runs on; run it on the deployment machine\n";
      return 1;
    }
    return e.code() == RuntimeErrorCode::InvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    err << "dgps-tune: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tune
}  // namespace dgps
