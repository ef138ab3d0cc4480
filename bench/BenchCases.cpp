#include "BenchCases.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <regex>
#include <sstream>

#include "Anchors.h"
#include "Floors.h"
#include "Watchdog.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/tuning/Stats.h"

namespace dgps {
namespace bench {
namespace {

constexpr double kAnchorCopyBytesPerS = 4.25e12;  // measured on our H200 through PyTorch, beside the FLA times of Anchors.cpp

std::string configText(const TileConfig& c) { return shortConfig(c.chunk, c.block_v, c.warps, c.stages); }

// Records the row and marks the benchmark as failed with the same message.
void fail(benchmark::State& state, ResultRow& row, const std::string& status, const std::string& message) {
  row.status = status;
  row.message = message;
  benchContext().results.record(row);
  state.SkipWithError(message.c_str());
}

// A CUDA fault that kills the context stops every later benchmark (they would all fail confusingly).
std::string noteFailure(BenchContext& ctx, const BenchCase& c, const std::exception& e) {
  std::string msg = e.what();
  if (ctx.context_lost.empty() && isStickyCudaError(msg)) {
    ctx.context_lost = msg;
    ctx.context_lost_by = c.name;
  }
  return msg;
}

void warmUp(BenchContext& ctx, PreparedCase& p, const BenchCase& c) {
  for (const std::string& name : p.outputs) {
    if (name == "o") p.set.at(name).poison();
  }
  // The host cost of one call (validation, pointer checks, module lookup) decides how long the GPU
  // must be kept busy before each start event (timeLaunches' spin).
  std::vector<double> host_us;
  for (int i = 0; i < ctx.options.warmup; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    p.launch();
    host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  ctx.session->synchronize("the warm-up of " + c.name);
  p.host_launch_us = tuning::quantile(host_us, 0.5);
}

// Long enough that the host has enqueued the timed call before the GPU reaches the start event.
double spinFor(const BenchContext& ctx, const PreparedCase& p) {
  return std::max(ctx.options.spin_us, 3.0 * p.host_launch_us + 20.0);
}

// A slow kernel (tens of ms at T=32768) must not eat the device session: one timed launch estimates
// the cost of a repetition, and the count is cut to fit --dgps_budget_s (never below 10).
int repsWithinBudget(BenchContext& ctx, PreparedCase& p, const BenchCase& c, int reps) {
  const double spin_ms = spinFor(ctx, p) * 1e-3;
  const double one_ms = timeLaunches(*ctx.session, p.launch, 1, spinFor(ctx, p), c.name).front();
  const double per_rep_ms = one_ms + spin_ms + 0.05;  // + the L2 flush
  const int fit = int(ctx.options.budget_s * 1e3 / per_rep_ms);
  return std::max(std::min(reps, fit), std::min(reps, 10));
}

// Step 5 of the header: one more launch from pristine state, every output element must be finite.
std::string finalCheck(BenchContext& ctx, PreparedCase& p, const BenchCase& c) {
  p.restore();
  p.set.at("o").poison();
  p.launch();
  ctx.session->synchronize("the output check of " + c.name);
  for (const std::string& name : p.outputs) {
    const Tensor t = p.set.at(name).download();
    const std::int64_t bad = countNonFinite(t);
    if (bad > 0) {
      return "at the full shape, " + std::to_string(bad) + " of " + std::to_string(t.numel()) + " elements of '" +
             name + "' are NaN/inf after a launch (unwritten poison or overflow)";
    }
  }
  return "";
}

void setCounters(benchmark::State& state, const ResultRow& row, double copy_bps) {
  state.counters["ms"] = benchmark::Counter(row.ms);
  state.counters["p20_us"] = benchmark::Counter(row.p20_ms * 1e3);
  state.counters["p80_us"] = benchmark::Counter(row.p80_ms * 1e3);
  state.counters["GBps"] = benchmark::Counter(row.gbps());
  state.counters["TFLOPs"] = benchmark::Counter(row.tflops());
  if (copy_bps > 0) state.counters["floor_pct"] = benchmark::Counter(row.floorPercent(copy_bps));
  if (std::isfinite(row.fla_ms)) state.counters["vs_FLA"] = benchmark::Counter(row.vsFla());
  if (std::isfinite(row.check_err)) state.counters["check_err"] = benchmark::Counter(row.check_err);
}

void runCase(benchmark::State& state, const BenchCase& c) {
  Watchdog::Scope scope("benchmark " + c.name);
  BenchContext& ctx = benchContext();
  ResultRow row = baseRow(c);
  if (!c.entry->package) return fail(state, row, "error", "package " + c.entry->dir + " did not open: " + c.entry->error);
  if (!ctx.context_lost.empty()) {
    // The pass after Google Benchmark's warm-up pass keeps the original error of the benchmark that faulted.
    if (ctx.context_lost_by == c.name) return fail(state, row, "error", ctx.context_lost);
    return fail(state, row, "error",
                "not run: " + ctx.context_lost_by + " lost the CUDA context earlier (" + ctx.context_lost + ")");
  }
  PreparedCase* prepared = nullptr;
  try {
    ctx.variant(c);
    if (ctx.options.check) {
      auto g = ctx.guard(c);
      row.check_err = g->rel_err;
      row.message = g->message;
      if (!g->ok) return fail(state, row, "wrong", g->message);
      row.status = "ok";
    } else {
      row.status = "unchecked";
      row.message = "float64 check skipped (--dgps_no_check)";
    }
    prepared = &ctx.prepareCase(c);
    warmUp(ctx, *prepared, c);
  } catch (const std::exception& e) {
    return fail(state, row, "error", noteFailure(ctx, c, e));
  }

  const int asked = c.shape.kind == Kind::Forward ? ctx.options.reps : ctx.options.decode_reps;
  int reps = asked;
  try {
    reps = repsWithinBudget(ctx, *prepared, c, asked);
    row.reps_cut = reps < asked;
  } catch (const std::exception& e) {
    return fail(state, row, "error", noteFailure(ctx, c, e));
  }
  std::vector<double> all;
  for (auto _ : state) {
    try {
      std::vector<double> ms = timeLaunches(*ctx.session, prepared->launch, reps, spinFor(ctx, *prepared), c.name);
      all.insert(all.end(), ms.begin(), ms.end());
      state.SetIterationTime(tuning::quantile(ms, 0.5) * 1e-3);
    } catch (const std::exception& e) {
      fail(state, row, "error", noteFailure(ctx, c, e));
      break;
    }
  }
  if (state.error_occurred()) return;
  try {
    const std::string bad = finalCheck(ctx, *prepared, c);
    if (!bad.empty()) return fail(state, row, "wrong", bad);
  } catch (const std::exception& e) {
    return fail(state, row, "error", noteFailure(ctx, c, e));
  }
  const tuning::SampleSummary s = tuning::summarize(all);
  row.ms = s.median;
  row.p20_ms = s.p20;
  row.p80_ms = s.p80;
  row.samples = s.count;
  setCounters(state, row, ctx.copy_bytes_per_s);
  state.counters["host_us"] = benchmark::Counter(prepared->host_launch_us);
  state.counters["roofline_pct"] = benchmark::Counter(row.rooflinePercent());
  row.host_us = prepared->host_launch_us;
  ctx.results.record(row);
}

}  // namespace

ResultRow baseRow(const BenchCase& c) {
  ResultRow r;
  r.benchmark = c.name;
  r.spec = c.entry->name;
  r.shape = c.shape;
  r.variant = c.variant;
  r.config = configText(c.config);
  r.status = "error";
  if (!c.entry->package) return r;
  const Package& pkg = *c.entry->package;
  r.heads_v = valueHeads(pkg.spec(), c.shape);
  const Floors f = computeFloors(pkg, c.shape, c.config);
  r.bytes = f.bytes;
  r.flops = f.flops;
  r.flops_source = f.flops_source;
  r.roofline_bytes = rooflineBytes(pkg, c.shape, &r.roofline_bytes_source);
  if (auto a = flaAnchor(pkg.name(), c.shape, r.heads_v)) r.fla_ms = a->ms;
  if (c.variant == "tuned") r.recorded_ms = c.recorded_ms;
  return r;
}

void registerCases(BenchContext& ctx) {
  for (const BenchCase& c : ctx.cases) {
    benchmark::RegisterBenchmark(c.name.c_str(), [c](benchmark::State& state) { runCase(state, c); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        // One iteration per pass (the repetitions are inside), and a warm-up pass of one iteration
        // whatever --benchmark_min_warmup_time says: with manual time a longer warm-up would repeat
        // the whole body hundreds of times.
        ->MinTime(1e-9)
        ->MinWarmUpTime(1e-9);
  }
}

std::vector<const BenchCase*> filterCases(const std::vector<BenchCase>& cases, const std::string& filter) {
  std::vector<const BenchCase*> out;
  std::string pattern = filter;
  bool negate = false;
  if (!pattern.empty() && pattern[0] == '-') {
    negate = true;
    pattern = pattern.substr(1);
  }
  bool all = pattern.empty() || pattern == "all" || pattern == ".";
  std::regex re;
  if (!all) {
    try {
      re = std::regex(pattern, std::regex::extended);
    } catch (const std::regex_error&) {
      all = true;
      negate = false;
    }
  }
  for (const BenchCase& c : cases) {
    bool match = all || std::regex_search(c.name, re);
    if (negate) match = !match;
    if (match) out.push_back(&c);
  }
  return out;
}

std::string formatPlan(const BenchContext& ctx, double copy_bps) {
  if (copy_bps <= 0) copy_bps = kAnchorCopyBytesPerS;
  std::ostringstream os;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-62s %10s %10s %11s %9s %15s %s\n", "benchmark", "bytes MB", "GFLOP", "floor ms",
                "FLA ms", "roofline ms", "flops from");
  os << buf;
  for (const BenchCase& c : ctx.cases) {
    if (!c.entry->package) {
      os << c.name << ": package did not open: " << c.entry->error << "\n";
      continue;
    }
    const ResultRow r = baseRow(c);
    const Roofline roof = r.rooflineAt();
    const std::string roof_text = std::to_string(roof.ms()).substr(0, 7) + " " + roof.bound();
    std::snprintf(buf, sizeof buf, "%-62s %10.1f %10.2f %11.4f %9s %15s %s\n", c.name.c_str(), r.bytes / 1e6,
                  r.flops / 1e9, r.bytes / copy_bps * 1e3,
                  std::isfinite(r.fla_ms) ? std::to_string(r.fla_ms).substr(0, 5).c_str() : "-", roof_text.c_str(),
                  r.flops_source.c_str());
    os << buf;
  }
  for (const NotTimed& n : ctx.results.notTimedRows()) {
    os << "not registered: " << n.spec << " " << n.shape << ": " << n.reason << "\n";
  }
  return os.str();
}

}  // namespace bench
}  // namespace dgps
