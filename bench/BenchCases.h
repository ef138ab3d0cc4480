// Registration of the benchmark cases with Google Benchmark, and the body every case runs:
//
//   1. skip at once (with the error) when the package did not open, its variant did not compile, or
//      the CUDA context was lost by an earlier fault;
//   2. the correctness guard (CorrectnessGuard.h) for this package, kind and configuration: a wrong
//      result is reported with SkipWithError and never timed;
//   3. upload the inputs (BenchInputs.h), poison the outputs, run the warm-up launches;
//   4. per Google Benchmark iteration (one, unless --benchmark_min_time=Nx asks for more): time
//      --dgps_reps launches with CUDA events (GpuSession.h timeLaunches) and report their median with
//      SetIterationTime (UseManualTime), so Google Benchmark's Time column is the median;
//   5. after timing, put in-place state back, poison the outputs, run once more and require every
//      output element finite at the full shape (catches unwritten tiles and overflow at scale);
//   6. counters: ms (median), p20_us, p80_us, GBps, TFLOPs, floor_pct, vs_FLA (FLA ms / ours), check_err,
//      host_us (host time of one launch call: the runtime's per-call overhead, kept out of the events).
// Each case runs its body twice (Google Benchmark's warm-up pass, set to one iteration, then the
// measured pass); the expensive preparation is cached, so the second pass costs only the timing.
#pragma once

#include <string>
#include <vector>

#include "BenchContext.h"

namespace dgps {
namespace bench {

/// Registers ctx.cases with Google Benchmark, in order.
void registerCases(BenchContext& ctx);

/// The cases Google Benchmark's --benchmark_filter=`filter` will run (empty, "all" or an unparsable
/// regex: all; a leading '-' negates), so the up-front preparation skips the others.
std::vector<const BenchCase*> filterCases(const std::vector<BenchCase>& cases, const std::string& filter);

/// A result row with everything but the timing: spec, shape, config, floors, FLA anchor.
ResultRow baseRow(const BenchCase& c);

/// The dry-run listing: every case with its bytes floor, FLOP count, floor time at `copy_bytes_per_s`
/// (bench/Anchors.cpp's 4.25 TB/s when 0) and FLA anchor; then what is not registered.
std::string formatPlan(const BenchContext& ctx, double copy_bytes_per_s);

}  // namespace bench
}  // namespace dgps
