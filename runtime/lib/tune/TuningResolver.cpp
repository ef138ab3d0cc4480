#include "dgps/runtime/tune/TuningResolver.h"

#include "dgps/runtime/DefaultConfig.h"

#include <cstdlib>
#include <map>

#include "LaunchPlan.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Log.h"
#include "dgps/runtime/tune/RuntimeTrialBackend.h"

namespace dgps {
namespace tune {

const char* toString(TuneMode m) {
  switch (m) {
    case TuneMode::Tune: return "tune";
    case TuneMode::Recorded: return "recorded";
    case TuneMode::Default: return "default";
  }
  return "?";
}

std::optional<TuneMode> parseTuneMode(const std::string& text) {
  if (text == "tune") return TuneMode::Tune;
  if (text == "recorded") return TuneMode::Recorded;
  if (text == "default") return TuneMode::Default;
  return std::nullopt;
}

TuneMode tuneModeFromEnv(TuneMode fallback) {
  const char* v = std::getenv("DGPS_TUNE_MODE");
  if (!v || !*v) return fallback;
  if (auto m = parseTuneMode(v)) return *m;
  throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                     std::string("DGPS_TUNE_MODE='") + v + "' is not a tuning mode; expected tune, recorded or default");
}

const char* toString(ConfigSource s) {
  switch (s) {
    case ConfigSource::Tuned: return "tuned now";
    case ConfigSource::RecordExact: return "database (exact key)";
    case ConfigSource::RecordNearestBucket: return "database (nearest T bucket)";
    case ConfigSource::DefaultForced: return "manifest default (mode default)";
    case ConfigSource::DefaultNoRecord: return "manifest default (no record for this GPU and key)";
    case ConfigSource::DefaultAfterFailure: return "manifest default (tuning failed)";
  }
  return "?";
}

std::string ResolverDecision::str() const {
  std::string s = package + " on device " + std::to_string(device) + " [" + key.str() + "]: " + toString(config) +
                  " from " + toString(source);
  if (!db_path.empty() && source != ConfigSource::DefaultForced) s += " (" + db_path + ")";
  if (!note.empty()) s += "; " + note;
  return s;
}

struct TuningResolver::State {
  std::map<std::string, tuning::DeviceFingerprint> fingerprints;  // by package dir|hash|device
  std::map<std::string, ResolverDecision> decided;                // by fingerprint key|problem key
  std::vector<ResolverDecision> history;
  std::optional<std::string> db_path;
  std::unique_ptr<tuning::TuningDb> db;
  std::unique_ptr<Runtime> runtime;  // for tuning runs: scratch tensors only, no pointer checks
  std::optional<TuneOutcome> last_tuning;
  int tuning_runs = 0;
};

TuningResolver::TuningResolver(ResolverOptions options)
    : options_(std::move(options)),
      mode_(options_.mode ? *options_.mode : tuneModeFromEnv()),
      state_(std::make_unique<State>()) {}

TuningResolver::~TuningResolver() = default;

int TuningResolver::tuningRuns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_->tuning_runs;
}

std::vector<ResolverDecision> TuningResolver::decisions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_->history;
}

std::optional<TuneOutcome> TuningResolver::lastTuning() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_->last_tuning;
}

std::string TuningResolver::dbPath() {
  if (state_->db_path) return *state_->db_path;
  std::string path = options_.db_path;
  if (path.empty()) {
    std::string err;
    auto p = tuning::resolveDbPath(&err);
    if (!p) throw RuntimeError(RuntimeErrorCode::InvalidArgument, "no tuning database location: " + err);
    path = *p;
  }
  state_->db_path = path;
  return path;
}

namespace {

// Is `config` still launchable for this package and problem? (A record may predate a manifest change.)
std::optional<std::string> unusable(const Package& package, const ForwardProblem& problem, const TileConfig& config) {
  try {
    package.checkConfig(config);
    dgps::detail::planForward(package, problem, config);
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
}

}  // namespace

ResolverDecision TuningResolver::fromDatabase(const Package& package, const tuning::DeviceFingerprint& fp,
                                              const tuning::ProblemKey& key, ResolverDecision d,
                                              const TileConfig& fallback) {
  if (!state_->db) {
    state_->db = std::make_unique<tuning::TuningDb>(d.db_path);
    if (tuning::Status s = state_->db->load(); !s) warn("tuning database: " + s.message);
    // Line 0: about the file as a whole (e.g. refused because others can write it); said once here.
    for (const tuning::DbWarning& w : state_->db->warnings())
      if (w.line == 0) warn("tuning database " + w.path + ": " + w.message);
  } else if (!state_->db->findExact(fp, key)) {
    state_->db->load();  // another process may have tuned this key since we read the file
  }
  const tuning::LookupResult r =
      state_->db->lookup(fp, key, fallback, /*collectForeign=*/true);
  d.config = r.config;
  d.record = r.record;
  switch (r.source) {
    case tuning::LookupSource::Exact: d.source = ConfigSource::RecordExact; break;
    case tuning::LookupSource::NearestBucket:
      d.source = ConfigSource::RecordNearestBucket;
      d.note = std::string("recorded for T bucket ") + tuning::toString(r.record->key.t_bucket);
      break;
    case tuning::LookupSource::Default: d.source = ConfigSource::DefaultNoRecord; break;
  }
  if (d.source == ConfigSource::DefaultNoRecord && !r.foreign.empty()) {
    // Never silently: say which records exist and why they do not apply here.
    d.note = std::to_string(r.foreign.size()) + " record(s) for this key were measured elsewhere and ignored (" +
             r.foreign.front().reason + ")";
    warn("tuning: " + package.name() + " [" + key.str() + "]: " + d.note + "; using the default configuration");
  }
  return d;
}

ResolverDecision TuningResolver::tuneNow(const Package& package, const ForwardProblem& problem,
                                         const tuning::ProblemKey& key, ResolverDecision d) {
  TuneJob job = options_.job;
  job.device = problem.device;
  job.dtype = problem.input_dtype;
  job.db_path = d.db_path;
  job.force = false;
  // The timed stand-in is dense: a varlen call of N sequences and `total` tokens is timed as N x
  // ceil(total / N) and recorded under the varlen call's own key.
  job.shape = ReferenceProblem();
  job.shape.batch = problem.num_seqs;
  job.shape.seq_len = problem.varlen ? (problem.seq_len + problem.num_seqs - 1) / std::max<std::int64_t>(problem.num_seqs, 1)
                                     : problem.seq_len;
  job.shape.heads_qk = problem.heads_qk;
  job.shape.heads_v = problem.heads_v;
  job.shape.key_dim = problem.key_dim;
  job.shape.value_dim = problem.value_dim;
  job.key_shape = tuningShape(problem);
  if (!state_->runtime) {
    RuntimeOptions ro;
    ro.cache_dir = job.cache_dir;
    ro.check_pointers = false;
    state_->runtime = std::make_unique<Runtime>(ro);
  }
  TuneOutcome out = tunePackage(*state_->runtime, package, job, options_.progress);
  if (!out.result.reused) ++state_->tuning_runs;
  state_->last_tuning = out;
  if (!out.result.status || !out.result.record) {
    d.source = ConfigSource::DefaultAfterFailure;
    d.config = package.manifest().default_config;
    d.note = out.result.status.message;
    warn("tuning: " + package.name() + " [" + key.str() + "]: " + d.note + "; using the manifest default");
    return d;
  }
  d.source = out.result.reused ? ConfigSource::RecordExact : ConfigSource::Tuned;
  d.config = out.result.record->config;
  d.record = out.result.record;
  if (!out.result.db_error.empty()) {
    d.note = "the winner could not be recorded: " + out.result.db_error;
    warn("tuning: " + d.note);
  }
  if (state_->db) state_->db->load();  // pick up the new record for later keys
  return d;
}

ResolverDecision TuningResolver::decide(const Package& package, const ForwardProblem& problem, int device) {
  ResolverDecision d;
  d.package = package.name();
  d.device = device;
  d.config = package.manifest().default_config;
  if (mode_ == TuneMode::Default) {
    d.source = ConfigSource::DefaultForced;
    d.key = problemKey(package, tuningShape(problem), 1);
    return d;
  }
  const std::string fp_id = package.directory() + "|" + package.manifest().spec_hash + "|" + std::to_string(device);
  auto fit = state_->fingerprints.find(fp_id);
  if (fit == state_->fingerprints.end()) {
    tuning::DeviceFingerprint fp =
        options_.fingerprint ? options_.fingerprint(package, device) : deviceFingerprint(package, device);
    fit = state_->fingerprints.emplace(fp_id, std::move(fp)).first;
  }
  const tuning::DeviceFingerprint& fp = fit->second;
  d.key = problemKey(package, tuningShape(problem), fp.sm_count);
  d.db_path = dbPath();
  d = fromDatabase(package, fp, d.key, d,
                   forwardDefaultConfig(package.manifest(), forwardDefaultInputs(package, problem, fp.sm_count)));
  if (mode_ == TuneMode::Tune && d.source != ConfigSource::RecordExact) d = tuneNow(package, problem, d.key, d);
  if (d.source != ConfigSource::DefaultForced && d.source != ConfigSource::DefaultNoRecord &&
      d.source != ConfigSource::DefaultAfterFailure) {
    if (auto why = unusable(package, problem, d.config)) {
      d.note = "recorded " + toString(d.config) + " cannot launch here (" + *why + ")";
      warn("tuning: " + package.name() + ": " + d.note + "; using the manifest default");
      d.config = package.manifest().default_config;
      d.source = ConfigSource::DefaultAfterFailure;
    }
  }
  return d;
}

std::string TuningResolver::memoKey(const Package& package, const ForwardProblem& problem, int device) const {
  const std::string fp_id = package.directory() + "|" + package.manifest().spec_hash + "|" + std::to_string(device);
  // The key's wave bucket needs the SM count; before the first fingerprint (or without a GPU) the memo
  // uses 1, consistently for lookups and stores, so a failing device is not retried on every call.
  auto it = state_->fingerprints.find(fp_id);
  const int sm = mode_ != TuneMode::Default && it != state_->fingerprints.end() ? it->second.sm_count : 1;
  return fp_id + "|" + problemKey(package, tuningShape(problem), sm).str();
}

std::optional<TileConfig> TuningResolver::resolve(const Package& package, const ForwardProblem& problem, int device) {
  return decideOnce(package, problem, device).config;
}

std::optional<TileConfig> TuningResolver::resolveRecorded(const Package& package, const ForwardProblem& problem,
                                                          int device) {
  const Choice c = decideOnce(package, problem, device);
  if (c.source == ConfigSource::DefaultNoRecord) return std::nullopt;
  return c.config;
}

TuningResolver::Choice TuningResolver::decideOnce(const Package& package, const ForwardProblem& problem, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  ResolverDecision d;
  try {
    auto hit = state_->decided.find(memoKey(package, problem, device));
    if (hit != state_->decided.end()) return {hit->second.config, hit->second.source};
    d = decide(package, problem, device);
  } catch (const std::exception& e) {
    d = ResolverDecision();
    d.package = package.name();
    d.device = device;
    d.config = package.manifest().default_config;
    d.source = ConfigSource::DefaultAfterFailure;
    d.note = e.what();
    warn("tuning: " + package.name() + ": " + d.note + "; using the manifest default");
  }
  try {
    state_->decided[memoKey(package, problem, device)] = d;
  } catch (...) {
    // memo is an optimisation only
  }
  state_->history.push_back(d);
  if (options_.on_decision) {
    try {
      options_.on_decision(d);
    } catch (...) {
      // a failing logger must not fail the launch
    }
  }
  return {d.config, d.source};
}

ForwardConfigResolver forwardConfigResolver(std::shared_ptr<TuningResolver> resolver) {
  return [resolver](const Package& package, const ForwardProblem& problem, int device) {
    return resolver->resolveRecorded(package, problem, device);
  };
}

}  // namespace tune
}  // namespace dgps
