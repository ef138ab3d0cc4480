#include "BenchOptions.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

namespace dgps {
namespace bench {
namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool parseInt(const std::string& text, long long lo, long long hi, long long* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parseDouble(const std::string& text, double lo, double hi, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

BenchOptions defaultBenchOptions(const std::string& default_generated_dir) {
  BenchOptions o;
  const char* env = std::getenv("DGPS_GENERATED_DIR");
  o.generated_dir = env && *env ? std::string(env) : default_generated_dir;
  return o;
}

bool selected(const std::vector<std::string>& list, const std::string& name) {
  return list.empty() || std::find(list.begin(), list.end(), name) != list.end();
}

bool parseBenchOptions(int* argc, char** argv, BenchOptions* o, std::string* error) {
  using Setter = std::function<bool(const std::string& value, bool has_value)>;
  auto intFlag = [](int* dst, long long lo, long long hi) -> Setter {
    return [=](const std::string& v, bool has) {
      long long x = 0;
      if (!has || !parseInt(v, lo, hi, &x)) return false;
      *dst = int(x);
      return true;
    };
  };
  auto doubleFlag = [](double* dst, double lo, double hi) -> Setter {
    return [=](const std::string& v, bool has) { return has && parseDouble(v, lo, hi, dst); };
  };
  auto boolFlag = [](bool* dst, bool value) -> Setter {
    return [=](const std::string&, bool has) {
      if (has) return false;
      *dst = value;
      return true;
    };
  };
  auto stringFlag = [](std::string* dst) -> Setter {
    return [=](const std::string& v, bool has) {
      if (!has || v.empty()) return false;
      *dst = v;
      return true;
    };
  };
  struct Flag {
    Setter set;
    const char* expected;
  };
  const std::map<std::string, Flag> flags = {
      {"--dgps_generated_dir", {stringFlag(&o->generated_dir), "a folder"}},
      {"--dgps_packages",
       {[=](const std::string& v, bool has) {
          o->packages = splitList(v);
          return has && !o->packages.empty();
        },
        "a comma-separated list of package names"}},
      {"--dgps_sweep",
       {[=](const std::string& v, bool has) {
          if (!has) {
            o->sweep_all = true;
            return true;
          }
          o->sweep = splitList(v);
          return !o->sweep.empty();
        },
        "nothing, or a comma-separated list of package names"}},
      {"--dgps_reps", {intFlag(&o->reps, 3, 100000), "an integer in [3, 100000]"}},
      {"--dgps_decode_reps", {intFlag(&o->decode_reps, 3, 100000), "an integer in [3, 100000]"}},
      {"--dgps_warmup", {intFlag(&o->warmup, 1, 100000), "an integer in [1, 100000]"}},
      {"--dgps_budget_s", {doubleFlag(&o->budget_s, 0.01, 3600), "seconds in [0.01, 3600]"}},
      {"--dgps_spin_us", {doubleFlag(&o->spin_us, 0, 1e6), "microseconds in [0, 1e6]"}},
      {"--dgps_tol", {doubleFlag(&o->tolerance, 1e-9, 1), "a relative error in (0, 1]"}},
      {"--dgps_no_check", {boolFlag(&o->check, false), "no value"}},
      {"--dgps_dry_run", {boolFlag(&o->dry_run, true), "no value"}},
      {"--dgps_tile_tokens",
       {[=](const std::string& v, bool has) {
          long long x = 0;
          if (!has || !parseInt(v, 0, 1LL << 40, &x)) return false;
          o->tile_tokens = x;
          return true;
        },
        "a token count >= 0 (0: draw every token)"}},
      {"--dgps_jobs", {intFlag(&o->jobs, 0, 256), "an integer in [0, 256]"}},
      {"--dgps_hang_s", {doubleFlag(&o->hang_s, 1, 86400), "seconds in [1, 86400]"}},
      {"--dgps_table", {stringFlag(&o->table_path), "a file path"}},
      {"--dgps_device", {intFlag(&o->device, 0, 1023), "a device ordinal"}},
      {"--dgps_seed",
       {[=](const std::string& v, bool has) {
          long long x = 0;
          if (!has || !parseInt(v, 0, (1LL << 62), &x)) return false;
          o->seed = std::uint64_t(x);
          return true;
        },
        "a non-negative integer"}},
      {"--dgps_shapes",
       {[=](const std::string& v, bool has) {
          std::string why;
          return has && parseShapes(v, &o->shapes, &why);
        },
        "shapes separated by ';', e.g. forward:B=1,T=32768,H=16,HV=64,K=128,V=128;decode:B=8,H=16,K=128,V=128"}},
      {"--dgps_fla", {stringFlag(&o->fla_path), "a JSON file written by scripts/fla_bench.py"}},
      {"--dgps_help", {boolFlag(&o->help, true), "no value"}},
  };

  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--dgps_", 0) != 0) {
      argv[kept++] = argv[i];
      continue;
    }
    const auto eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? arg.substr(eq + 1) : std::string();
    auto it = flags.find(name);
    if (it == flags.end()) {
      *error = "unknown flag " + name + " (dgps-bench --dgps_help lists its flags)";
      return false;
    }
    if (!it->second.set(value, has_value)) {
      *error = "flag " + name + ": expected " + it->second.expected + ", got " +
               (has_value ? "'" + value + "'" : std::string("no value"));
      return false;
    }
  }
  *argc = kept;
  argv[kept] = nullptr;
  return true;
}

std::string benchUsage() {
  return R"(dgps-bench: times every generated package on the GPU (see docs/performance.md).
Google Benchmark flags (--benchmark_filter, --benchmark_out, ...) work as usual; dgps-bench's own:
  --dgps_generated_dir=DIR  packages to time (default $DGPS_GENERATED_DIR, else the source tree's generated/)
  --dgps_packages=a,b       only these packages (also limits the up-front JIT compiles and references)
  --dgps_sweep[=a,b]        also time every tunable configuration (of these packages), one row each
  --dgps_reps=N             timed launches per forward benchmark (default 100)
  --dgps_decode_reps=N      timed decode steps (default 300)
  --dgps_warmup=N           untimed launches after the JIT compile (default 10)
  --dgps_budget_s=S         time fewer reps (at least 10) when one pass of --dgps_reps would take longer (2)
  --dgps_spin_us=US         min GPU busy-wait before each start event, so host launch overhead is not timed
                            (default 100; raised to 3x the measured host time of one call + 20)
  --dgps_tol=X              max relative error ||out-ref||/||ref|| of the float64 guard (default 1e-2, bf16)
  --dgps_no_check           skip the guard: rows are marked UNCHECKED (development only)
  --dgps_dry_run            list the benchmarks with their floors and exit, without touching the GPU
  --dgps_tile_tokens=N      draw random inputs for N tokens and repeat them to fill T (default 4096; 0: all)
  --dgps_jobs=N             threads for JIT compiles and references (default min(8, cores))
  --dgps_hang_s=S           a GPU wait longer than S seconds prints the partial table and exits 3 (300)
  --dgps_table=FILE         also write the summary table (markdown) to FILE
  --dgps_device=N           CUDA device ordinal (default 0)
  --dgps_seed=N             input seed
  --dgps_shapes=LIST        time these shapes instead of the standard ones (bench/Shapes.h), ';'-separated:
                            forward:B=1,T=32768,H=2,HV=8,K=128,V=128;decode:B=8,H=16,K=128,V=128
  --dgps_fla=FILE           FLA's times from the same run (scripts/fla_bench.py): the "vs FLA" column
Environment: DGPS_GENERATED_DIR, DGPS_CACHE_DIR (NVRTC binary cache), DGPS_TUNING_DB, DGPS_COMMIT.
)";
}

}  // namespace bench
}  // namespace dgps
