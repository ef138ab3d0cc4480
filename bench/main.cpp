// dgps-bench: times every generated package on the GPU at the anchor shapes of bench/Anchors.cpp, after a
// float64 correctness check, and prints a summary table last (docs/performance.md).
//
//   dgps-bench [--dgps_* flags] [Google Benchmark flags]      (dgps-bench --dgps_help lists them)
//
// Exit codes: 0 all timed (or no GPU: nothing to time), 1 a benchmark failed or was wrong, or the run
// could not start; 2 bad flags; 3 a GPU wait hung (the partial table is printed first).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>

#include "Anchors.h"
#include "BenchCases.h"
#include "BenchContext.h"
#include "Watchdog.h"
#include "dgps/runtime/CudaDriver.h"

namespace {

using namespace dgps;
using namespace dgps::bench;

// The value of --benchmark_filter (read before Google Benchmark consumes the flag).
std::string filterFlag(int argc, char** argv) {
  const char* prefix = "--benchmark_filter=";
  std::string value;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) value = argv[i] + std::strlen(prefix);
  }
  return value;
}

void printSummary(BenchContext& ctx) {
  const std::string table = formatSummary(ctx.results.rows(), ctx.results.notTimedRows(), ctx.summaryInfo());
  std::fflush(stdout);
  std::fputs(table.c_str(), stdout);
  std::fflush(stdout);
  if (!ctx.options.table_path.empty()) {
    std::ofstream out(ctx.options.table_path);
    out << table;
    if (!out) std::fprintf(stderr, "dgps-bench: cannot write the table to %s\n", ctx.options.table_path.c_str());
  }
}

int run(int argc, char** argv) {
  BenchContext& ctx = benchContext();
  ctx.options = defaultBenchOptions(defaultGeneratedDir());
  std::string error;
  if (!parseBenchOptions(&argc, argv, &ctx.options, &error)) {
    std::fprintf(stderr, "dgps-bench: %s\n", error.c_str());
    return 2;
  }
  if (ctx.options.help) {
    std::fputs(benchUsage().c_str(), stdout);
    return 0;
  }
  if (!ctx.options.fla_path.empty()) {
    FlaTimes fla;
    if (!loadFlaTimes(ctx.options.fla_path, &fla, &error)) {
      std::fprintf(stderr, "dgps-bench: --dgps_fla: %s\n", error.c_str());
      return 2;
    }
    std::printf("dgps-bench: %zu FLA times from %s (same run)\n", fla.rows.size(), ctx.options.fla_path.c_str());
    setFlaTimes(std::move(fla));
  }
  const std::string filter = filterFlag(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  std::string why;
  const bool gpu = !ctx.options.dry_run && cudaAvailable(&why);
  if (!gpu && !ctx.options.dry_run) {
    // CI and CPU machines: building and starting is all that can be checked here.
    std::printf("dgps-bench: no CUDA device (%s); nothing timed\n", why.c_str());
    return 0;
  }
  if (!ctx.discoverPackages(&error)) {
    std::fprintf(stderr, "dgps-bench: %s\n", error.c_str());
    return 1;
  }
  if (ctx.packages.empty()) {
    std::fprintf(stderr, "dgps-bench: no packages (folders with manifest.yaml) in %s%s; nothing timed\n",
                 ctx.options.generated_dir.c_str(), ctx.options.packages.empty() ? "" : " matching --dgps_packages");
    return 1;
  }
  if (ctx.options.dry_run) {
    ctx.buildCases(nullptr);
    std::printf("dgps-bench: dry run over %s (floors at bench/Anchors.cpp's 4.25 TB/s copy bandwidth)\n",
                ctx.options.generated_dir.c_str());
    std::fputs(formatPlan(ctx, 0).c_str(), stdout);
    return 0;
  }

  ctx.runtime = std::make_unique<Runtime>();
  ctx.session = std::make_unique<GpuSession>(ctx.options.device, ctx.runtime->compiler());
  Watchdog::start(ctx.options.hang_s, [&ctx](const std::string&) { printSummary(ctx); });
  const GpuInfo& g = ctx.session->info();
  ctx.copy_bytes_per_s = ctx.session->measureCopyBandwidth(std::size_t(1) << 30, 30);
  std::printf("dgps-bench: %s, %s, %d SMs, %lld MiB L2; copy bandwidth %.2f TB/s (read + write, 1 GiB copy kernel)\n",
              g.name.c_str(), g.target.arch.c_str(), g.sm_count, static_cast<long long>(g.l2_bytes >> 20),
              ctx.copy_bytes_per_s / 1e12);
  benchmark::AddCustomContext("dgps_gpu", ctx.summaryInfo().gpu);
  benchmark::AddCustomContext("dgps_copy_TBps", std::to_string(ctx.copy_bytes_per_s / 1e12));
  benchmark::AddCustomContext("dgps_commit", buildCommit());

  ctx.buildCases(&g);
  registerCases(ctx);
  ctx.prepareAhead(filterCases(ctx.cases, filter));
  benchmark::RunSpecifiedBenchmarks();
  Watchdog::stop();
  printSummary(ctx);
  benchmark::Shutdown();
  return ctx.results.anyFailed() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rc = 1;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dgps-bench: error: %s\n", e.what());
    rc = 1;
  } catch (...) {
    std::fprintf(stderr, "dgps-bench: error: unknown exception\n");
    rc = 1;
  }
  Watchdog::stop();
  dgps::bench::benchContext().shutdown();
  return rc;
}
