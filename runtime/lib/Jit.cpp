#include "dgps/runtime/Jit.h"

#include <link.h>
#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "EmbeddedHeaders.h"
#include "Sha256.h"
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

// CUDA_VERSION from <dir>/cuda.h, or 0.
int headerCudaVersion(const std::string& dir) {
  std::ifstream in(dir + "/cuda.h");
  std::string line;
  static const std::regex re(R"(^\s*#\s*define\s+CUDA_VERSION\s+(\d+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, re)) return std::stoi(m[1]);
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
  std::vector<std::string> roots = {cache.directory() + "/failures/" + key,
                                    "/tmp/dgps-failures-" + std::to_string(::getuid()) + "/" + key};
  for (const auto& dir : roots) {
    if (!makeDirectories(dir, nullptr)) continue;
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
  static const std::regex re(R"(^(sm|compute)_([0-9]{2,3})([af]?)$)");
  std::smatch m;
  const auto& env = nvrtcEnvironment();
  if (!std::regex_match(arch, m, re)) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "invalid --arch \"" + arch + "\": expected sm_XY, sm_XYa or compute_XY (e.g. sm_90a)");
  }
  int sm = std::stoi(m[2]);
  if (std::find(env.supported_archs.begin(), env.supported_archs.end(), sm) == env.supported_archs.end()) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "arch " + arch + " is not supported by the loaded NVRTC " + std::to_string(env.major) + "." +
                           std::to_string(env.minor) + " (supported: " + joinInts(env.supported_archs) + ")");
  }
  JitTarget t;
  t.arch = arch;
  t.ptx = m[1] == "compute";
  t.sm = sm;
  t.reason = "requested explicitly";
  return t;
}

std::vector<KernelResourceUsage> parsePtxasInfo(const std::string& log) {
  std::vector<KernelResourceUsage> out;
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex props(R"(Function properties for ([^\s]+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  KernelResourceUsage* cur = nullptr;
  auto find = [&](const std::string& name) -> KernelResourceUsage* {
    for (auto& k : out) {
      if (k.name == name) return &k;
    }
    out.push_back(KernelResourceUsage{});
    out.back().name = name;
    return &out.back();
  };
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      cur = find(m[1]);
      cur->arch = m[2];
    } else if (std::regex_search(line, m, props)) {
      cur = find(m[1]);
    } else if (cur && std::regex_search(line, m, frame)) {
      cur->stack_frame_bytes = std::stol(m[1]);
      cur->spill_store_bytes = std::stol(m[2]);
      cur->spill_load_bytes = std::stol(m[3]);
    } else if (cur && std::regex_search(line, m, used)) {
      cur->registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers)) cur->barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) cur->shared_bytes = std::stol(m[1]);
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
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "JitRequest for " + req.source_name + " has no target arch");
  }
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
