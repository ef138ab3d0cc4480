#include "dgps/runtime/Jit.h"

#include <link.h>
#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <limits>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "EmbeddedHeaders.h"
#include "IncludeScan.h"
#include "OwnedFolder.h"
#include "Sha256.h"
#include "TextParse.h"
#include "dgps/dsl/FileRead.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Log.h"

#ifndef DGPS_CUDA_BUILD_INCLUDE_DIR
#define DGPS_CUDA_BUILD_INCLUDE_DIR ""
#endif

namespace dgps {
namespace {

constexpr const char* kKeyFormat = "dgps-jit-key-v1";

std::string joinInts(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

bool fileExists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string dirName(const std::string& p) {
  auto i = p.rfind('/');
  return i == std::string::npos ? "." : (i == 0 ? "/" : p.substr(0, i));
}

// The path of the libnvrtc that the dynamic loader actually mapped into this process.
std::string loadedNvrtcPath() {
  std::string found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        auto base = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
        if (base.rfind("libnvrtc.so", 0) == 0 || base.rfind("libnvrtc.alt.so", 0) == 0) {
          *static_cast<std::string*>(data) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

// CUDA_VERSION from <dir>/cuda.h, or 0 (also for a header that is unreadable or implausible).
int headerCudaVersion(const std::string& dir) {
  FileReadResult f = readRegularFile(dir + "/cuda.h", file_limits::kSource, "a CUDA header");
  if (!f.ok) return 0;
  std::istringstream in(f.data);
  std::string line;
  while (std::getline(in, line)) {
    // "#  define CUDA_VERSION 13000", spaces allowed around '#'.
    std::size_t i = 0;
    auto skip = [&] {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    };
    auto word = [&](const char* w) {
      const std::size_t n = std::char_traits<char>::length(w);
      if (line.compare(i, n, w) != 0) return false;
      i += n;
      return true;
    };
    skip();
    if (!word("#")) continue;
    skip();
    if (!word("define")) continue;
    skip();
    if (!word("CUDA_VERSION")) continue;
    if (i >= line.size() || (line[i] != ' ' && line[i] != '\t')) continue;
    skip();
    long long v = 0;
    if (text::readDigits(line, i, 1000000, &v)) return int(v);
  }
  return 0;
}
NvrtcEnvironment probe() {
  NvrtcEnvironment env;
  env.built_cuda_version = CUDA_VERSION;
  nvrtcVersion(&env.major, &env.minor);
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    env.supported_archs.resize(std::size_t(n));
    nvrtcGetSupportedArchs(env.supported_archs.data());
  }
  env.library_path = loadedNvrtcPath();

  std::vector<std::string> candidates;
  auto add = [&](const std::string& d) {
    if (d.empty()) return;
    char resolved[PATH_MAX];
    const std::string c = ::realpath(d.c_str(), resolved) ? std::string(resolved) : d;  // readable paths in errors
    if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) candidates.push_back(c);
  };
  add(envOr("DGPS_CUDA_INCLUDE_DIR"));
  if (!env.library_path.empty()) {
    std::string lib = dirName(env.library_path);
    add(lib + "/../include");
    add(lib + "/../../include");
    add(lib + "/../../cuda_runtime/include");  // pip: nvidia/cuda_nvrtc/lib -> nvidia/cuda_runtime/include
  }
  if (!envOr("CUDA_HOME").empty()) add(envOr("CUDA_HOME") + "/include");
  if (!envOr("CUDA_PATH").empty()) add(envOr("CUDA_PATH") + "/include");
  add(DGPS_CUDA_BUILD_INCLUDE_DIR);
  add("/usr/local/cuda/include");
  env.searched = candidates;

  int nvrtc_version = env.major * 1000 + env.minor * 10;
  std::string first_usable;
  for (const auto& d : candidates) {
    if (!fileExists(d + "/cuda_bf16.h") || !fileExists(d + "/cuda_fp16.h")) continue;
    int v = headerCudaVersion(d);
    if (first_usable.empty()) first_usable = d;
    if (v == nvrtc_version) {
      env.include_dir = d;
      env.include_cuda_version = v;
      return env;
    }
  }
  if (!first_usable.empty()) {
    env.include_dir = first_usable;
    env.include_cuda_version = headerCudaVersion(first_usable);
    warn("no CUDA headers matching NVRTC " + std::to_string(env.major) + "." + std::to_string(env.minor) +
         " found; using " + first_usable + " (CUDA " +
         (env.include_cuda_version ? cudaVersionString(env.include_cuda_version) : std::string("unknown")) +
         "). Set DGPS_CUDA_INCLUDE_DIR to the include folder of the matching toolkit if compiles fail.");
  }
  return env;
}

std::string readFirstLines(const std::string& log, int max_lines) {
  std::istringstream in(log);
  std::string line, out;
  int n = 0;
  while (n < max_lines && std::getline(in, line)) {
    if (line.find("error") == std::string::npos && n == 0) continue;  // start at the first error line
    out += "\n    " + line;
    ++n;
  }
  return out;
}

// Writes the failing compile's inputs and log; returns the folder ("" if even that failed).
std::string saveFailure(const BinaryCache& cache, const std::string& key, const JitRequest& req,
                        const std::vector<std::string>& opts, const std::string& log) {
  // Only into folders of our own (OwnedFolder.h): the cache folder when it is trusted, else a private
  // folder in /tmp created 0700 (refused when someone else made it first).
  std::vector<std::string> roots;
  if (cache.trusted(/*create=*/true)) roots.push_back(cache.directory() + "/failures");
  roots.push_back("/tmp/dgps-failures-" + std::to_string(::geteuid()));
  for (const auto& root : roots) {
    const bool shared = root.rfind("/tmp/", 0) == 0;
    if (!detail::makePrivateFolder(root, !shared).empty()) continue;
    const std::string dir = root + "/" + key;
    if (!detail::makePrivateFolder(dir, false).empty()) continue;
    std::string src_name = req.source_name.substr(req.source_name.rfind('/') == std::string::npos
                                                      ? 0
                                                      : req.source_name.rfind('/') + 1);
    std::ofstream(dir + "/" + (src_name.empty() ? "kernels.cu" : src_name), std::ios::binary) << req.source;
    std::ofstream o(dir + "/options.txt");
    for (const auto& s : opts) o << s << "\n";
    std::ofstream(dir + "/log.txt", std::ios::binary) << log;
    std::ofstream e(dir + "/environment.txt");
    e << nvrtcEnvironment().describe() << "\n";
    for (const auto& h : req.extra_headers) std::ofstream(dir + "/" + h.first.substr(h.first.rfind('/') + 1)) << h.second;
    if (o && e) return dir;
  }
  return "";
}

std::string driverDescription() {
  std::string why;
  try {
    return "driver CUDA " + cudaVersionString(cudaDriver().driver_version);
  } catch (const RuntimeError&) {
    return "driver none (libcuda.so.1 not loadable)";
  }
}

}  // namespace

std::string NvrtcEnvironment::describe() const {
  std::ostringstream os;
  os << "NVRTC " << major << "." << minor;
  if (!library_path.empty()) os << " (" << library_path << ")";
  if (include_dir.empty()) {
    os << ", no CUDA headers found (searched";
    for (const auto& s : searched) os << " " << s;
    os << ")";
  } else {
    os << ", CUDA headers " << (include_cuda_version ? cudaVersionString(include_cuda_version) : "of unknown version")
       << " at " << include_dir;
  }
  os << ", runtime built against CUDA " << cudaVersionString(built_cuda_version) << ", " << driverDescription();
  return os.str();
}

const NvrtcEnvironment& nvrtcEnvironment() {
  static const NvrtcEnvironment env = probe();
  return env;
}

JitTarget selectJitTarget(ComputeCapability cc, const std::vector<int>& supported) {
  int sm = cc.major * 10 + cc.minor;
  auto has = [&](int a) { return std::find(supported.begin(), supported.end(), a) != supported.end(); };
  JitTarget t;
  if (sm == 90 && has(90)) {
    t.arch = "sm_90a";
    t.sm = 90;
    t.reason = "device CC 9.0 matches sm_90a exactly (arch-specific wgmma/setmaxnreg target)";
    return t;
  }
  if (has(sm)) {
    t.arch = "sm_" + std::to_string(sm);
    t.sm = sm;
    t.reason = "NVRTC supports the device's arch sm_" + std::to_string(sm);
    return t;
  }
  int best = 0;
  for (int a : supported) {
    if (a <= sm && a > best) best = a;
  }
  if (best == 0) {
    throw RuntimeError(RuntimeErrorCode::Jit,
                       "no JIT target for a device of compute capability " + std::to_string(cc.major) + "." +
                           std::to_string(cc.minor) + ": the loaded NVRTC supports only [" + joinInts(supported) + "]");
  }
  t.arch = "compute_" + std::to_string(best);
  t.ptx = true;
  t.sm = best;
  t.reason = "NVRTC does not know sm_" + std::to_string(sm) + "; PTX for compute_" + std::to_string(best) +
             " (the highest supported arch below the device) is JIT-compiled by the driver";
  return t;
}

JitTarget parseJitTarget(const std::string& arch) {
  const auto& env = nvrtcEnvironment();
  // sm_XY, sm_XYa, sm_XYf, compute_XY (two or three digits).
  const bool is_sm = arch.rfind("sm_", 0) == 0, is_compute = arch.rfind("compute_", 0) == 0;
  std::size_t pos = is_sm ? 3 : is_compute ? 8 : 0;
  const std::size_t digits_at = pos;
  long long sm_value = 0;
  const bool digits = (is_sm || is_compute) && text::readDigits(arch, pos, 999, &sm_value);
  const std::size_t ndigits = pos - digits_at;
  const bool suffix_ok = pos == arch.size() || (is_sm && pos + 1 == arch.size() && (arch[pos] == 'a' || arch[pos] == 'f'));
  if (arch.size() > 16 || !digits || ndigits < 2 || ndigits > 3 || !suffix_ok) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "invalid --arch \"" + text::shown(arch) + "\": expected sm_XY, sm_XYa or compute_XY (e.g. sm_90a)");
  }
  const int sm = int(sm_value);
  if (std::find(env.supported_archs.begin(), env.supported_archs.end(), sm) == env.supported_archs.end()) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "arch " + arch + " is not supported by the loaded NVRTC " + std::to_string(env.major) + "." +
                           std::to_string(env.minor) + " (supported: " + joinInts(env.supported_archs) + ")");
  }
  JitTarget t;
  t.arch = arch;
  t.ptx = is_compute;
  t.sm = sm;
  t.reason = "requested explicitly";
  return t;
}

namespace {

// Helpers for ptxas' report lines. Numbers are read with a bound: a forged or corrupt log (the cache
// stores it) must not abort the process; a number out of range leaves the field at its default.
constexpr long long kMaxReportNumber = 1ll << 40;

// The text between `open` ... `close` after `prefix`, e.g. name in "Compiling entry function 'name' for".
bool between(const std::string& line, const std::string& prefix, char close, std::size_t& pos, std::string* out) {
  const std::size_t at = line.find(prefix, pos);
  if (at == std::string::npos) return false;
  const std::size_t start = at + prefix.size();
  const std::size_t end = line.find(close, start);
  if (end == std::string::npos || end == start) return false;
  *out = line.substr(start, end - start);
  pos = end + 1;
  return true;
}

// The number right before `suffix` (e.g. "Used 80 registers": number before " registers").
template <typename T>
void numberBefore(const std::string& line, const std::string& suffix, T* out) {
  const std::size_t at = line.find(suffix);
  if (at == std::string::npos) return;
  std::size_t start = at;
  while (start > 0 && text::isDigit(line[start - 1])) --start;
  long long v = 0;
  if (start < at && text::parseInt(std::string_view(line).substr(start, at - start), 0, kMaxReportNumber, &v) &&
      v <= static_cast<long long>(std::numeric_limits<T>::max())) {
    *out = static_cast<T>(v);
  }
}

}  // namespace

std::vector<KernelResourceUsage> parsePtxasInfo(const std::string& log) {
  std::vector<KernelResourceUsage> out;
  std::istringstream in(log);
  std::string line;
  KernelResourceUsage* cur = nullptr;
  auto find = [&](const std::string& name) -> KernelResourceUsage* {
    for (auto& k : out) {
      if (k.name == name) return &k;
    }
    if (out.size() >= 4096) return nullptr;  // a module has a handful of kernels; a longer list is not a real log
    out.push_back(KernelResourceUsage{});
    out.back().name = name;
    return &out.back();
  };
  while (std::getline(in, line)) {
    std::size_t pos = 0;
    std::string name, arch;
    if (between(line, "Compiling entry function '", '\'', pos, &name)) {
      cur = find(name);
      if (between(line, " for '", '\'', pos, &arch)) cur->arch = arch;
    } else if (const std::size_t at = line.find("Function properties for "); at != std::string::npos) {
      std::size_t end = at + 24;
      while (end < line.size() && !text::isSpace(line[end])) ++end;
      if (end > at + 24) cur = find(line.substr(at + 24, end - at - 24));
    } else if (cur && line.find(" bytes stack frame, ") != std::string::npos) {
      numberBefore(line, " bytes stack frame", &cur->stack_frame_bytes);
      numberBefore(line, " bytes spill stores", &cur->spill_store_bytes);
      numberBefore(line, " bytes spill loads", &cur->spill_load_bytes);
    } else if (cur && line.find("Used ") != std::string::npos && line.find(" registers") != std::string::npos) {
      numberBefore(line, " registers", &cur->registers);
      numberBefore(line, " barriers", &cur->barriers);
      numberBefore(line, " bytes smem", &cur->shared_bytes);
    }
  }
  return out;
}

std::string jitCacheKey(const JitKeyFields& f) {
  detail::Sha256 h;
  h.field(kKeyFormat);
  h.field(f.source);
  h.field(f.source_name);
  h.field(f.headers_digest);
  h.field(std::to_string(f.options.size()));
  for (const auto& o : f.options) h.field(o);
  h.field(f.nvrtc_version);
  h.field(std::to_string(f.include_cuda_version));
  h.field(f.arch);
  return h.hexDigest();
}

const std::string& embeddedHeadersDigest() {
  static const std::string digest = [] {
    std::size_t n = 0;
    const detail::EmbeddedFile* files = detail::embeddedDeviceHeaders(&n);
    detail::Sha256 h;
    for (std::size_t i = 0; i < n; ++i) {
      h.field(files[i].path);
      h.field(std::string(files[i].data, files[i].size));
    }
    return h.hexDigest();
  }();
  return digest;
}

std::vector<std::string> embeddedHeaderNames() {
  std::size_t n = 0;
  const detail::EmbeddedFile* files = detail::embeddedDeviceHeaders(&n);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n; ++i) names.push_back(files[i].path);
  return names;
}

void checkSourceIncludes(const JitRequest& req) {
  static const std::vector<std::string> embedded = embeddedHeaderNames();
  auto allowed = [&](const std::string& target) {
    // Any header the runtime embeds (runtime/device/: the "dgps/device/..." kernels library and the
    // "dgps/tile/..." tile library), by its exact embedded name.
    if (std::find(embedded.begin(), embedded.end(), target) != embedded.end()) return true;
    for (const auto& h : req.extra_headers)
      if (h.first == target) return true;
    return false;
  };
  if (auto v = detail::findDisallowedInclude(req.source, allowed)) {
    throw RuntimeError(RuntimeErrorCode::Package,
                       req.source_name + ":" + std::to_string(v->line) + ": " + v->why + ": '" + v->directive +
                           "'; a package's source may include only the DGPS device library (\"dgps/device/...\" "
                           "and \"dgps/tile/...\" headers embedded in the runtime), nothing from the file system");
  }
}

JitCompiler::JitCompiler(BinaryCache cache) : cache_(std::move(cache)) {}

std::vector<std::string> JitCompiler::options(const JitRequest& req) const {
  const auto& env = nvrtcEnvironment();
  std::vector<std::string> o;
  o.push_back("--gpu-architecture=" + req.target.arch);
  o.push_back("-std=c++17");
  if (!req.target.ptx) o.push_back("--ptxas-options=-v");
  if (!env.include_dir.empty()) o.push_back("-I" + env.include_dir);
  for (const auto& d : req.defines) o.push_back("-D" + d);
  for (const auto& x : req.extra_options) o.push_back(x);
  // Developer hook: extra NVRTC options for experiments (e.g. -DNAME=1); part of the cache key like the rest.
  std::istringstream extra(envOr("DGPS_NVRTC_OPTIONS"));
  for (std::string x; extra >> x;) o.push_back(x);
  return o;
}

JitKeyFields JitCompiler::keyFields(const JitRequest& req) const {
  const auto& env = nvrtcEnvironment();
  JitKeyFields f;
  f.source = req.source;
  f.source_name = req.source_name;
  detail::Sha256 h;
  h.field(embeddedHeadersDigest());
  for (const auto& x : req.extra_headers) {
    h.field(x.first);
    h.field(x.second);
  }
  f.headers_digest = h.hexDigest();
  f.options = options(req);
  f.nvrtc_version = std::to_string(env.major) + "." + std::to_string(env.minor);
  f.include_cuda_version = env.include_cuda_version;
  f.arch = req.target.arch;
  return f;
}

namespace {

// The in-memory header list: each embedded file under its path ("dgps/device/abi.h") and under its path
// relative to dgps/device ("abi.h"), so quoted includes between device headers resolve either way.
void collectHeaders(const JitRequest& req, std::vector<std::string>& names, std::vector<std::string>& bodies) {
  std::size_t n = 0;
  const detail::EmbeddedFile* files = detail::embeddedDeviceHeaders(&n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string path = files[i].path;
    names.push_back(path);
    bodies.emplace_back(files[i].data, files[i].size);
    const std::string prefix = "dgps/device/";
    if (path.rfind(prefix, 0) == 0) {
      names.push_back(path.substr(prefix.size()));
      bodies.emplace_back(files[i].data, files[i].size);
    }
  }
  for (const auto& x : req.extra_headers) {
    names.push_back(x.first);
    bodies.push_back(x.second);
  }
}

}  // namespace

JitBinary JitCompiler::compile(const JitRequest& req) const {
  if (req.target.arch.empty()) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "cannot compile " + req.source_name +
                                                              ": no target architecture given (expected e.g. sm_90a)");
  }
  checkSourceIncludes(req);
  const auto& env = nvrtcEnvironment();
  JitBinary out;
  out.key = cacheKey(req);
  if (auto hit = cache_.load(out.key)) {
    out.image = std::move(hit->image);
    out.is_ptx = hit->is_ptx;
    out.log = std::move(hit->log);
    out.usage = parsePtxasInfo(out.log);
    out.from_cache = true;
    return out;
  }
  if (env.include_dir.empty()) {
    throw RuntimeError(RuntimeErrorCode::Jit, "cannot JIT-compile " + req.source_name +
                                                  ": no CUDA headers (cuda_bf16.h, cuda_fp16.h) found for the loaded "
                                                  "NVRTC; set DGPS_CUDA_INCLUDE_DIR. " + env.describe());
  }

  std::vector<std::string> names, bodies;
  collectHeaders(req, names, bodies);
  std::vector<const char*> name_ptrs, body_ptrs;
  for (std::size_t i = 0; i < names.size(); ++i) {
    name_ptrs.push_back(names[i].c_str());
    body_ptrs.push_back(bodies[i].c_str());
  }
  std::vector<std::string> opts = options(req);
  std::vector<const char*> opt_ptrs;
  for (const auto& o : opts) opt_ptrs.push_back(o.c_str());

  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, req.source.c_str(), req.source_name.c_str(), int(names.size()),
                                     body_ptrs.data(), name_ptrs.data());
  if (r != NVRTC_SUCCESS) {
    throw RuntimeError(RuntimeErrorCode::Jit, std::string("nvrtcCreateProgram failed for ") + req.source_name + ": " +
                                                  nvrtcGetErrorString(r) + "; " + env.describe());
  }
  struct ProgramGuard {
    nvrtcProgram* p;
    ~ProgramGuard() { nvrtcDestroyProgram(p); }
  } guard{&prog};

  r = nvrtcCompileProgram(prog, int(opt_ptrs.size()), opt_ptrs.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(prog, &log[0]);
  while (!log.empty() && log.back() == '\0') log.pop_back();

  if (r != NVRTC_SUCCESS) {
    std::string dir = saveFailure(cache_, out.key, req, opts, log);
    std::ostringstream msg;
    msg << "NVRTC failed to compile " << req.source_name << " for " << req.target.arch << " ("
        << nvrtcGetErrorString(r) << ")";
    std::string first = readFirstLines(log, 8);
    if (!first.empty()) msg << ":" << first;
    msg << "\n  full log, source and options: "
        << (dir.empty() ? std::string("(could not be saved: cache dir not writable)") : dir + "/log.txt");
    msg << "\n  " << env.describe();
    throw RuntimeError(RuntimeErrorCode::Jit, msg.str());
  }

  std::size_t size = 0;
  if (req.target.ptx) {
    nvrtcGetPTXSize(prog, &size);
    out.image.resize(size);
    if (size) nvrtcGetPTX(prog, &out.image[0]);
    while (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
  } else {
    nvrtcGetCUBINSize(prog, &size);
    out.image.resize(size);
    if (size) nvrtcGetCUBIN(prog, &out.image[0]);
  }
  if (out.image.empty()) {
    throw RuntimeError(RuntimeErrorCode::Jit, "NVRTC produced an empty image for " + req.source_name + " (" +
                                                  req.target.arch + "); " + env.describe());
  }
  out.is_ptx = req.target.ptx;
  out.log = log;
  out.usage = parsePtxasInfo(log);
  cache_.store(out.key, CachedImage{out.image, out.is_ptx, out.log});
  return out;
}

}  // namespace dgps
