#include "BenchContext.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <thread>

#include "Anchors.h"
#include "TuningHook.h"
#include "dgps/runtime/DefaultConfig.h"
#include "dgps/runtime/Error.h"

#ifndef DGPS_BENCH_GENERATED_DIR
#define DGPS_BENCH_GENERATED_DIR "generated"
#endif
#ifndef DGPS_BENCH_COMMIT
#define DGPS_BENCH_COMMIT "unknown"
#endif

namespace dgps {
namespace bench {
namespace {

std::string configKey(const TileConfig& c) { return toString(c); }

std::string variantKey(const BenchCase& c) {
  return c.entry->name + "|K" + std::to_string(c.shape.key_dim) + "|V" + std::to_string(c.shape.value_dim) + "|" +
         configKey(c.config);
}

std::string referenceKey(const BenchCase& c) { return c.entry->name + "|" + toString(c.shape.kind); }

std::string guardKey(const BenchCase& c) { return referenceKey(c) + "|" + configKey(c.config); }

std::string inputsKey(const BenchCase& c) { return c.entry->name + "|" + toString(c.shape.kind) + "|" + c.shape.label(); }

/// What Runtime::forward's default reads off a call of this shape (one dense batch) on `gpu`.
std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Every configuration of the manifest's tunables, in list order.
std::vector<TileConfig> allConfigs(const TuningSpace& t) {
  std::vector<TileConfig> out;
  for (int c : t.chunk)
    for (int b : t.block_v)
      for (int w : t.warps)
        for (int s : t.stages) out.push_back(TileConfig{c, b, w, s});
  return out;
}

std::string sweepLabel(const TileConfig& c) {
  return "C" + std::to_string(c.chunk) + "_BV" + std::to_string(c.block_v) + "_W" + std::to_string(c.warps) + "_S" +
         std::to_string(c.stages);
}

// Writes `tile` repeatedly over `t` (as uploadInputs does).
void refill(DeviceTensor& t, const Tensor& tile) {
  const CudaDriver& d = cudaDriver();
  const std::size_t repeats = t.nbytes() / tile.nbytes();
  const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(t.data());
  for (std::size_t r = 0; r < repeats; ++r) {
    checkCuda(d.cuMemcpyHtoD(base + CUdeviceptr(r * tile.nbytes()), tile.data(), tile.nbytes()), "cuMemcpyHtoD(restore)");
  }
}

}  // namespace

BenchContext& benchContext() {
  static BenchContext ctx;
  return ctx;
}

std::string defaultGeneratedDir() { return DGPS_BENCH_GENERATED_DIR; }

std::string buildCommit() {
  const char* env = std::getenv("DGPS_COMMIT");
  return env && *env ? std::string(env) : std::string(DGPS_BENCH_COMMIT);
}

bool BenchContext::discoverPackages(std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root(options.generated_dir);
  if (!fs::is_directory(root, ec)) {
    *error = "package folder " + options.generated_dir + " does not exist (set DGPS_GENERATED_DIR or --dgps_generated_dir)";
    return false;
  }
  std::vector<std::string> dirs;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && fs::exists(it->path() / "manifest.yaml", ec)) dirs.push_back(it->path().string());
  }
  if (ec) {
    *error = "cannot list " + options.generated_dir + ": " + ec.message();
    return false;
  }
  std::sort(dirs.begin(), dirs.end());
  for (const std::string& dir : dirs) {
    PackageEntry e;
    e.dir = dir;
    e.name = fs::path(dir).filename().string();
    if (!selected(options.packages, e.name)) continue;
    try {
      e.package = std::make_shared<const Package>(Package::open(dir));
    } catch (const std::exception& ex) {
      e.error = ex.what();
    }
    packages.push_back(std::move(e));
  }
  return true;
}

void BenchContext::buildCases(const GpuInfo* gpu) {
  const bool sweep_any = options.sweep_all || !options.sweep.empty();
  int looked_up = 0, tuned_found = 0;
  std::string tuning_note;
  for (const PackageEntry& e : packages) {
    if (e.package) continue;
    BenchCase c;
    c.name = "BM_package/" + e.name + "/open";
    c.entry = &e;
    c.variant = "open";
    cases.push_back(c);
  }
  const std::vector<BenchShape> shapes = options.shapes.empty() ? standardShapes() : options.shapes;
  for (const BenchShape& shape : shapes) {
    for (const PackageEntry& e : packages) {
      if (!e.package) continue;
      const Package& pkg = *e.package;
      if (auto why = unsupportedReason(pkg, shape)) {
        results.notTimed(NotTimed{e.name, std::string(toString(shape.kind)) + " " + shape.label(), *why});
        continue;
      }
      const std::string base = std::string("BM_") + toString(shape.kind) + "/" + e.name + "/" + shape.label() + "/";
      BenchCase def;
      def.name = base + "default";
      def.entry = &e;
      def.shape = shape;
      def.variant = "default";
      // what Runtime::forward picks when nobody tuned the call (shape-aware; decode keeps the manifest's)
      // the runtime's own default for a forward call at this shape (as Runtime::forward resolves it untuned)
      const int sm_count = gpu ? gpu->sm_count : 0;
      def.config = shape.kind == Kind::Forward
                       ? forwardDefaultConfig(pkg.manifest(),
                                              forwardDefaultInputs(pkg, forwardProblemOf(pkg.spec(), shape), sm_count))
                       : pkg.manifest().default_config;
      cases.push_back(def);

      std::set<std::string> timed = {configKey(def.config)};
      if (gpu) {
        TunedLookup t = lookupTuned(pkg, shape, *gpu);
        ++looked_up;
        if (t.config) ++tuned_found;
        if (tuning_note.empty() && !t.config) tuning_note = t.note;
        if (t.config && *t.config != def.config) {
          BenchCase tuned = def;
          tuned.name = base + "tuned";
          tuned.variant = "tuned";
          tuned.config = *t.config;
          tuned.recorded_ms = t.recorded_ms;
          tuned.note = "tuning database (" + t.source + ")";
          cases.push_back(tuned);
          timed.insert(configKey(tuned.config));
        } else if (t.config) {
          cases.back().note = "the tuning database's record is the default configuration";
        }
      }
      const bool sweep_this = sweep_any && shape.kind == Kind::Forward &&
                              (options.sweep_all || selected(options.sweep, e.name));
      if (sweep_this) {
        for (const TileConfig& cfg : allConfigs(pkg.manifest().tunables)) {
          if (!timed.insert(configKey(cfg)).second) continue;
          BenchCase s = def;
          s.name = base + "sweep/" + sweepLabel(cfg);
          s.variant = "sweep";
          s.config = cfg;
          cases.push_back(s);
        }
      }
    }
  }
  if (gpu) {
    std::printf("dgps-bench: tuning database: records for %d of %d package/shape pairs%s%s\n", tuned_found, looked_up,
                tuning_note.empty() ? "" : "; e.g. ", tuning_note.c_str());
  }
}

std::shared_ptr<const VariantInfo> BenchContext::variant(const BenchCase& c) {
  return variants_.get(variantKey(c), [&] {
    return runtime->prepare(*c.entry->package, c.shape.key_dim, c.shape.value_dim, ScalarType::BF16, c.config,
                            options.device);
  });
}

std::shared_ptr<const GuardReference> BenchContext::reference(const BenchCase& c) {
  return references_.get(referenceKey(c),
                         [&] { return makeGuardReference(*c.entry->package, c.shape.kind, options.seed + 1); });
}

std::shared_ptr<const GuardResult> BenchContext::guard(const BenchCase& c) {
  return guards_.get(guardKey(c), [&] {
    auto ref = reference(c);
    return runGuard(*runtime, *session, *c.entry->package, c.config, *ref, options.tolerance);
  });
}

std::shared_ptr<const HostInputs> BenchContext::hostInputs(const BenchCase& c) {
  return host_inputs_.get(inputsKey(c), [&] {
    const Spec& spec = c.entry->package->spec();
    const ReferenceProblem p = toProblemShape(spec, c.shape);
    if (c.shape.kind == Kind::Forward) return forwardHostInputs(spec, p, options.tile_tokens, options.seed);
    return decodeHostInputs(spec, p, options.tile_tokens > 0 ? 32 : 0, options.seed);
  });
}

void BenchContext::prepareAhead(const std::vector<const BenchCase*>& selected_cases) {
  std::vector<std::function<void()>> tasks;
  std::set<std::string> seen;
  int n_variants = 0, n_refs = 0, n_inputs = 0;
  // Longest first: NVRTC compiles, then the float64 references, then the input draws.
  for (const BenchCase* c : selected_cases) {
    if (!c->entry->package || !seen.insert("v" + variantKey(*c)).second) continue;
    ++n_variants;
    tasks.push_back([this, c] { variant(*c); });
  }
  if (options.check) {
    for (const BenchCase* c : selected_cases) {
      if (!c->entry->package || !seen.insert("r" + referenceKey(*c)).second) continue;
      ++n_refs;
      tasks.push_back([this, c] { reference(*c); });
    }
  }
  for (const BenchCase* c : selected_cases) {
    if (!c->entry->package || !seen.insert("i" + inputsKey(*c)).second) continue;
    ++n_inputs;
    tasks.push_back([this, c] { hostInputs(*c); });
  }
  int jobs = options.jobs;
  if (jobs <= 0) jobs = int(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  std::printf("dgps-bench: preparing %d variant compiles, %d float64 references, %d input sets on %d threads...\n",
              n_variants, n_refs, n_inputs, jobs);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < tasks.size(); i = next++) {
      try {
        tasks[i]();
      } catch (...) {
        // Kept in the cache; the benchmark that needs it reports it.
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < jobs; ++i) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int failed = 0;
  std::set<std::string> reported;
  for (const BenchCase* c : selected_cases) {
    if (!c->entry->package) continue;
    try {
      variant(*c);
    } catch (const std::exception& e) {
      if (reported.insert(variantKey(*c)).second) {
        ++failed;
        std::printf("dgps-bench: cannot compile %s %s: %s\n", c->entry->name.c_str(), toString(c->config).c_str(),
                    firstLine(e.what()).c_str());
      }
    }
  }
  std::printf("dgps-bench: prepared in %.1f s (%d variant%s failed to compile)\n", secs, failed,
              failed == 1 ? "" : "s");
  std::fflush(stdout);
}

PreparedCase& BenchContext::prepareCase(const BenchCase& c) {
  if (current_ && current_->name == c.name) return *current_;
  current_.reset();  // free the previous case's device memory before allocating this one's
  auto p = std::make_unique<PreparedCase>();
  p->name = c.name;
  p->host = hostInputs(c);
  const int device = options.device;
  p->set = uploadInputs(*p->host, device);
  std::shared_ptr<const Package> pkg = c.entry->package;
  const std::int64_t HV = valueHeads(pkg->spec(), c.shape);
  LaunchOptions opts;
  opts.stream = session->stream();
  opts.config = c.config;
  Runtime* rt = runtime.get();
  if (c.shape.kind == Kind::Forward) {
    addOutput(p->set, "o", ScalarType::BF16, {c.shape.batch, c.shape.seq_len, HV, c.shape.value_dim}, device);
    const ForwardProblem fp = validateForward(*pkg, forwardTensors(p->set));
    addWorkspace(p->set, rt->forwardWorkspaceBytes(*pkg, fp, c.config), device);
    const ForwardTensors t = forwardTensors(p->set);
    p->launch = [rt, pkg, t, opts] { rt->forward(*pkg, t, opts); };
    p->restore = [] {};
    p->outputs = {"o"};
  } else {
    addOutput(p->set, "o", ScalarType::BF16, {c.shape.batch, 1, HV, c.shape.value_dim}, device);
    const DecodeTensors t = decodeTensors(p->set);
    p->launch = [rt, pkg, t, opts] { rt->decode(*pkg, t, opts); };
    PreparedCase* raw = p.get();
    p->restore = [raw] {
      for (const char* name : {"state", "precond_state"}) {
        if (raw->set.has(name)) refill(raw->set.at(name), raw->host->tiles.at(name));
      }
    };
    p->outputs = {"o", "state"};
    if (p->set.has("precond_state")) p->outputs.push_back("precond_state");
  }
  current_ = std::move(p);
  return *current_;
}

SummaryInfo BenchContext::summaryInfo() const {
  SummaryInfo s;
  if (session) {
    const GpuInfo& g = session->info();
    s.gpu = g.name + " (" + g.target.arch + ", " + std::to_string(g.sm_count) + " SMs, " +
            std::to_string(g.l2_bytes >> 20) + " MiB L2, driver " + g.driver_version + ", NVRTC " + g.nvrtc_version + ")";
  } else {
    s.gpu = "no GPU";
  }
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  s.date = buf;
  s.commit = buildCommit();
  s.copy_bytes_per_s = copy_bytes_per_s;
  s.timing = "median of " + std::to_string(options.reps) + " forward launches / " + std::to_string(options.decode_reps) +
             " decode steps after " + std::to_string(options.warmup) +
             " warm-up launches, L2 flushed and a GPU spin of >= " + std::to_string(int(options.spin_us)) +
             " us (3x the host time of one call) before each start event";
  return s;
}

void BenchContext::shutdown() {
  current_.reset();
  runtime.reset();
  session.reset();
}

}  // namespace bench
}  // namespace dgps
