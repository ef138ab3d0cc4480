#include "JitCheck.h"

#include <algorithm>
#include <atomic>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "dgps/dsl/Process.h"
#include "dgps/dsl/FileRead.h"
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

std::string describe(const Variant& v) {
  return v.package->name() + " " + toString(v.dtype) + " K=" + std::to_string(v.K) + " V=" + std::to_string(v.V) +
         " " + toString(v.config);
}

// A private scratch folder for the children's result files and logs, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dgps-jit-check-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      throw RuntimeError(RuntimeErrorCode::Io, "cannot create a scratch folder " + tmpl + " for compile results");
    }
    path_ = buf.data();
  }
  ~ScratchDir() {
    for (const auto& f : files_) std::remove(f.c_str());
    ::rmdir(path_.c_str());
  }
  std::string file(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::mutex mu_;
  std::vector<std::string> files_;
};

struct ChildContext {
  std::string exe;        // this executable
  std::string arch;
  std::string cache_dir;
  double timeout_s;
  ScratchDir* scratch;
};

std::string secondsText(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// Compiles one variant in a child process under the time limit. Throws RuntimeError on a failure.
JitBinary compileInChild(const Variant& v, std::size_t index, const ChildContext& c) {
  const std::string result = c.scratch->file("result-" + std::to_string(index) + ".txt");
  const std::string log = c.scratch->file("log-" + std::to_string(index) + ".txt");
  const std::vector<std::string> argv = {c.exe,         "--compile-one",        v.package->directory(),
                                         toString(v.dtype), std::to_string(v.K), std::to_string(v.V),
                                         toString(v.config), c.arch,            c.cache_dir.empty() ? "-" : c.cache_dir,
                                         result};
  const auto limit = std::chrono::milliseconds(static_cast<long long>(c.timeout_s * 1000));
  const dgps::ProcessResult p = dgps::runProcess(argv, log, limit);
  if (!p.started) throw RuntimeError(RuntimeErrorCode::Jit, "cannot start the compile process: " + p.error);
  if (p.timed_out) {
    throw RuntimeError(RuntimeErrorCode::Jit, "compile of " + describe(v) + " exceeded " + secondsText(c.timeout_s) +
                                                  " s (the NVRTC process was killed; raise --compile-timeout if "
                                                  "the source is legitimately slow)");
  }
  if (p.signaled) {
    throw RuntimeError(RuntimeErrorCode::Jit, "the compile process of " + describe(v) + " was killed by signal " +
                                                  std::to_string(p.signal) + ": " + dgps::fileTail(log));
  }
  const FileReadResult r = readRegularFile(result, file_limits::kCacheEntry, "a compile result");
  if (!r.ok) {
    throw RuntimeError(RuntimeErrorCode::Jit, "the compile process of " + describe(v) + " exited with status " +
                                                  std::to_string(p.exit_code) + " without a result (" + r.error +
                                                  "): " + dgps::fileTail(log));
  }
  const std::size_t nl = r.data.find('\n');
  const std::string head = r.data.substr(0, nl);
  const std::string body = nl == std::string::npos ? "" : r.data.substr(nl + 1);
  if (head != "ok") throw RuntimeError(RuntimeErrorCode::Jit, body.empty() ? "compile failed" : body);
  JitBinary bin;
  bin.from_cache = body.rfind("1\n", 0) == 0;
  bin.log = body.size() >= 2 ? body.substr(2) : "";
  bin.usage = parsePtxasInfo(bin.log);
  return bin;
}

// Checks one compiled variant; returns the report lines and whether it is clean.
bool checkVariant(const Variant& v, std::size_t index, const JitTarget& target, const ChildContext& child,
                  std::string& report) {
  std::ostringstream os;
  const Manifest& m = v.package->manifest();
  os << "  " << describe(v);
  JitBinary bin;
  try {
    v.package->checkConfig(v.config);
    const JitRequest req = variantRequest(*v.package, v.K, v.V, v.dtype, v.config, target);
    checkSourceIncludes(req);
    bin = compileInChild(v, index, child);
  } catch (const RuntimeError& e) {
    os << "  FAILED\n    " << e.what() << "\n";
    report = os.str();
    return false;
  }
  os << (bin.from_cache ? "  (cached)" : "") << "\n";
  bool ok = true;
  std::vector<std::string> symbols = m.forward_symbols;
  // the segmented forward's own kernels (its chunk_local is launch.forward's)
  for (const KernelLaunchRule& k : m.launch.forward_segmented)
    if (std::find(symbols.begin(), symbols.end(), k.symbol) == symbols.end()) symbols.push_back(k.symbol);
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
    if (!(o.compile_timeout_s > 0) || o.compile_timeout_s > 86400) {
      err << "dgps-jit-check: --compile-timeout must be in (0, 86400] seconds, got " << o.compile_timeout_s << "\n";
      return 1;
    }
    ScratchDir scratch;
    ChildContext child{dgps::selfExePath(), o.arch, o.cache_dir, o.compile_timeout_s, &scratch};
    if (child.exe.empty()) {
      err << "dgps-jit-check: cannot find its own executable (/proc/self/exe) to run compiles in\n";
      return 1;
    }
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
      for (std::size_t i = next++; i < variants.size(); i = next++)
        clean[i] = checkVariant(variants[i], i, target, child, reports[i]);
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
  } catch (...) {
    err << "dgps-jit-check: internal error\n";
    return 1;
  }
}

int runJitCheckChild(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr, "dgps-jit-check --compile-one: internal mode, expected 8 arguments\n");
    return 1;
  }
  const std::string result = argv[9];
  std::string out;
  int rc = 1;
  try {
    const Package pkg = Package::open(argv[2]);
    const std::string dt = argv[3];
    if (dt != "bf16" && dt != "f16") throw RuntimeError(RuntimeErrorCode::InvalidArgument, "dtype " + dt);
    long long K = 0, V = 0;
    K = std::strtoll(argv[4], nullptr, 10);
    V = std::strtoll(argv[5], nullptr, 10);
    const TileConfig config = parseTileConfig(argv[6], pkg.manifest().default_config);
    const JitTarget target = parseJitTarget(argv[7]);
    const std::string cache_dir = std::string(argv[8]) == "-" ? "" : argv[8];
    JitCompiler jit{BinaryCache(cache_dir)};
    const JitBinary bin =
        jit.compile(variantRequest(pkg, K, V, dt == "bf16" ? ScalarType::BF16 : ScalarType::F16, config, target));
    out = std::string("ok\n") + (bin.from_cache ? "1" : "0") + "\n" + bin.log;
    rc = 0;
  } catch (const std::exception& e) {
    out = std::string("error\n") + e.what();
  } catch (...) {
    out = "error\ninternal error";
  }
  std::ofstream f(result, std::ios::binary | std::ios::trunc);
  f << out;
  return f ? rc : 1;
}

}  // namespace dgps
