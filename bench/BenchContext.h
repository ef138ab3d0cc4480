// The state one dgps-bench run shares between its benchmarks: options, the opened packages, the
// benchmark cases, the runtime and the GPU session, and caches of everything that is expensive and
// reusable — compiled variants, float64 references, guard verdicts, host inputs — each computed once
// (OnceMap), most of them up front in parallel (prepareAhead) before Google Benchmark starts timing.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "BenchInputs.h"
#include "BenchOptions.h"
#include "CorrectnessGuard.h"
#include "GpuSession.h"
#include "Results.h"
#include "Shapes.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace bench {

/// A value per key, computed once by the first caller while later callers wait; an exception from
/// the computation is stored and rethrown to every caller (so a failed JIT compile is not retried).
template <class T>
class OnceMap {
 public:
  std::shared_ptr<const T> get(const std::string& key, const std::function<T()>& make) {
    std::promise<std::shared_ptr<const T>> promise;
    std::shared_future<std::shared_ptr<const T>> future;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = values_.find(key);
      if (it == values_.end()) {
        future = promise.get_future().share();
        values_.emplace(key, future);
        mine = true;
      } else {
        future = it->second;
      }
    }
    if (mine) {
      try {
        promise.set_value(std::make_shared<const T>(make()));
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
    }
    return future.get();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_future<std::shared_ptr<const T>>> values_;
};

struct PackageEntry {
  std::string dir;   ///< the package folder
  std::string name;  ///< the folder's name
  std::shared_ptr<const Package> package;  ///< null when it did not open
  std::string error;                       ///< why it did not open
};

/// One registered benchmark.
struct BenchCase {
  std::string name;                ///< "BM_forward/gdn/B8_T4096_H16_K128_V128/default"
  const PackageEntry* entry = nullptr;
  BenchShape shape;
  std::string variant;             ///< "default", "tuned", "sweep"; "open" for a package that did not open
  TileConfig config;
  double recorded_ms = 0;          ///< tuned: the database record's median
  std::string note;
};

/// Device inputs and outputs of the case being timed, with its launch.
struct PreparedCase {
  std::string name;
  std::shared_ptr<const HostInputs> host;
  DeviceSet set;
  std::function<void()> launch;              ///< enqueues the timed call(s) on the session's stream
  std::function<void()> restore;             ///< puts in-place state back (decode), before the final check
  std::vector<std::string> outputs;          ///< tensors written by the call, checked finite afterwards
  double host_launch_us = 0;                 ///< host time of one launch() call (median of the warm-up)
};

class BenchContext {
 public:
  BenchOptions options;
  std::vector<PackageEntry> packages;
  std::vector<BenchCase> cases;
  Results results;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<GpuSession> session;
  double copy_bytes_per_s = 0;
  std::string context_lost;     ///< the sticky CUDA error after which nothing more can run
  std::string context_lost_by;  ///< the benchmark that hit it

  /// Opens every package folder (a folder with manifest.yaml) of options.generated_dir, sorted by
  /// name, keeping open errors. Returns false with *error when the folder cannot be listed.
  bool discoverPackages(std::string* error);

  /// Builds the case list: per shape and package, the default configuration, the tuning database's
  /// (when `gpu` and a record exists) and, with --dgps_sweep, every other tunable configuration.
  /// Shapes a package cannot run are recorded in results.notTimed.
  void buildCases(const GpuInfo* gpu);

  /// Compiles the variants, computes the references and draws the host inputs of `selected` on
  /// options.jobs threads. Failures stay in the caches (the benchmarks report them).
  void prepareAhead(const std::vector<const BenchCase*>& selected);

  std::shared_ptr<const VariantInfo> variant(const BenchCase& c);
  std::shared_ptr<const GuardReference> reference(const BenchCase& c);
  std::shared_ptr<const GuardResult> guard(const BenchCase& c);
  std::shared_ptr<const HostInputs> hostInputs(const BenchCase& c);

  /// The case's device tensors and launch (kept until another case is prepared).
  PreparedCase& prepareCase(const BenchCase& c);

  SummaryInfo summaryInfo() const;

  /// Frees device memory, modules, the stream and the context, in that order.
  void shutdown();

 private:
  OnceMap<VariantInfo> variants_;
  OnceMap<GuardReference> references_;
  OnceMap<GuardResult> guards_;
  OnceMap<HostInputs> host_inputs_;
  std::unique_ptr<PreparedCase> current_;
};

BenchContext& benchContext();

/// The configure-time generated/ folder.
std::string defaultGeneratedDir();
/// DGPS_COMMIT, else the commit the build was configured from.
std::string buildCommit();

}  // namespace bench
}  // namespace dgps
