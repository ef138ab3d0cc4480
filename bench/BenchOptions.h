// dgps-bench's own command-line flags (--dgps_*); every other flag goes to Google Benchmark
// (--benchmark_filter, --benchmark_out, ...). parseBenchOptions removes the --dgps_* flags from argv.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "Shapes.h"

namespace dgps {
namespace bench {

struct BenchOptions {
  std::string generated_dir;          ///< $DGPS_GENERATED_DIR, else the configure-time generated/.
  std::vector<std::string> packages;  ///< --dgps_packages=a,b: only these (folder names); empty = all.
  bool sweep_all = false;             ///< --dgps_sweep: time every tunable configuration of every package.
  std::vector<std::string> sweep;     ///< --dgps_sweep=a,b: ... of these packages only.
  int reps = 100;                     ///< --dgps_reps: timed launches per forward benchmark.
  int decode_reps = 300;              ///< --dgps_decode_reps: timed decode steps.
  int warmup = 10;                    ///< --dgps_warmup: untimed launches after the JIT compile.
  double budget_s = 2.0;              ///< --dgps_budget_s: fewer reps (>= 10) when one pass would take longer.
  double spin_us = 100;               ///< --dgps_spin_us: minimum GPU busy-wait before each start event
                                      ///< (raised to 3x the measured host time of one call + 20 us).
  double tolerance = 1e-2;            ///< --dgps_tol: max ‖out − ref‖/‖ref‖ for bf16 outputs.
  bool check = true;                  ///< --dgps_no_check: skip the float64 guard (rows say UNCHECKED).
  bool dry_run = false;               ///< --dgps_dry_run: list what would be timed, with floors; no GPU use.
  std::int64_t tile_tokens = 4096;    ///< --dgps_tile_tokens: host inputs drawn per this many tokens, then repeated.
  int jobs = 0;                       ///< --dgps_jobs: threads for JIT compiles and CPU references; 0 = auto.
  double hang_s = 300;                ///< --dgps_hang_s: a GPU wait longer than this aborts with the partial table.
  std::string table_path;             ///< --dgps_table=FILE: also write the summary table there.
  int device = 0;                     ///< --dgps_device: CUDA ordinal.
  std::uint64_t seed = 20261129;      ///< --dgps_seed: input generator seed.
  std::vector<BenchShape> shapes;     ///< --dgps_shapes=...: time these instead of standardShapes()
  std::string fla_path;               ///< --dgps_fla=FILE: FLA's same-run times (scripts/fla_bench.py)
  bool help = false;                  ///< --dgps_help
};

/// The defaults, with generated_dir from $DGPS_GENERATED_DIR or `default_generated_dir`.
BenchOptions defaultBenchOptions(const std::string& default_generated_dir);

/// Parses and removes every --dgps_* argument of argv (argv[0] stays). Returns false with *error naming
/// the flag, the value and what was expected on a bad one; unknown --dgps_ flags are errors too.
bool parseBenchOptions(int* argc, char** argv, BenchOptions* options, std::string* error);

/// One paragraph per flag, for --dgps_help.
std::string benchUsage();

/// True when `name` is selected by `list` (empty list selects everything).
bool selected(const std::vector<std::string>& list, const std::string& name);

}  // namespace bench
}  // namespace dgps
