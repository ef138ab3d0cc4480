#include "JitCheck.h"

#include <algorithm>
#include <atomic>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

struct Variant {
  const Package* package;
  ScalarType dtype;
  int K, V;
  TileConfig config;
};

std::vector<TileConfig> configsOf(const Package& p, const JitCheckOptions& o) {
  const Manifest& m = p.manifest();
  if (!o.all_configs) return {parseTileConfig(o.config, m.default_config)};
  std::vector<TileConfig> out;
  for (int c : m.tunables.chunk)
    for (int b : m.tunables.block_v)
      for (int w : m.tunables.warps)
        for (int s : m.tunables.stages) out.push_back(TileConfig{c, b, w, s});
  return out;
}

// Checks one compiled variant; returns the report lines and whether it is clean.
bool checkVariant(const Variant& v, const JitTarget& target, const JitCompiler& jit, std::string& report) {
  std::ostringstream os;
  const Manifest& m = v.package->manifest();
  os << "  " << v.package->name() << " " << toString(v.dtype) << " K=" << v.K << " V=" << v.V << " "
     << toString(v.config);
  JitBinary bin;
  try {
    v.package->checkConfig(v.config);
    bin = jit.compile(variantRequest(*v.package, v.K, v.V, v.dtype, v.config, target));
  } catch (const RuntimeError& e) {
    os << "  FAILED\n    " << e.what() << "\n";
    report = os.str();
    return false;
  }
  os << (bin.from_cache ? "  (cached)" : "") << "\n";
  bool ok = true;
  std::vector<std::string> symbols = m.forward_symbols;
  if (m.has_decode) symbols.push_back(m.decode_symbol);
  for (const auto& sym : symbols) {
    auto it = std::find_if(bin.usage.begin(), bin.usage.end(), [&](const KernelResourceUsage& u) { return u.name == sym; });
    os << "    " << std::left << std::setw(44) << sym;
    if (target.ptx) {
      os << " (PTX target: no ptxas report)\n";
      continue;
    }
    if (it == bin.usage.end()) {
      os << " MISSING: not in ptxas' report (not compiled for this variant?)\n";
      ok = false;
      continue;
    }
    os << " regs " << std::setw(3) << it->registers << "  stack " << it->stack_frame_bytes << " B  spill st "
       << it->spill_store_bytes << " B ld " << it->spill_load_bytes << " B  smem " << it->shared_bytes << " B";
    if (it->spills()) {
      os << "  FAIL: local memory / spills (docs/math.md §7.5)";
      ok = false;
    }
    os << "\n";
  }
  report = os.str();
  return ok;
}

}  // namespace

int runJitCheck(const JitCheckOptions& o, std::ostream& out, std::ostream& err) {
  try {
    JitTarget target = parseJitTarget(o.arch);
    JitCompiler jit{BinaryCache(o.cache_dir)};
    out << "dgps-jit-check: target " << target.arch << "; " << nvrtcEnvironment().describe() << "\n";
    std::vector<Package> packages;
    int failures = 0;
    for (const auto& dir : o.packages) {
      try {
        packages.push_back(Package::open(dir));
      } catch (const RuntimeError& e) {
        err << "dgps-jit-check: " << e.what() << "\n";
        ++failures;
      }
    }
    std::vector<Variant> variants;
    for (const auto& p : packages) {
      for (DType d : p.manifest().input_dtypes)
        for (int K : p.manifest().key_dims)
          for (int V : p.manifest().value_dims) {
            if (o.square && K != V) continue;
            for (const TileConfig& c : configsOf(p, o)) variants.push_back(Variant{&p, toScalarType(d), K, V, c});
          }
    }
    std::vector<std::string> reports(variants.size());
    std::vector<char> clean(variants.size(), 0);
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i = next++; i < variants.size(); i = next++) clean[i] = checkVariant(variants[i], target, jit, reports[i]);
    };
    std::vector<std::thread> threads;
    for (int j = 1; j < std::max(1, o.jobs); ++j) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < variants.size(); ++i) {
      out << reports[i];
      if (!clean[i]) ++failures;
    }
    out << "dgps-jit-check: " << variants.size() << " variant(s) of " << packages.size() << " package(s), "
        << failures << " failure(s)\n";
    return failures == 0 && !o.packages.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    err << "dgps-jit-check: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace dgps
