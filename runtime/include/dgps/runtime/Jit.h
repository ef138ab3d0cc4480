// NVRTC compilation of generated kernel sources to CUBIN (or PTX), with the on-disk binary cache.
//
// Three CUDA versions meet in a JIT compile: the toolkit the runtime was built against,
// the libnvrtc loaded at run time, and the CUDA headers (cuda_bf16.h, cuda_fp16.h) passed with -I. The
// runtime looks for headers that match the loaded NVRTC (see nvrtcEnvironment) and every JIT error
// names all three, plus the driver version and the target architecture.
//
// Target selection: the arch-specific "a" target (sm_90a) only on a device whose
// compute capability is exactly the one it was built for (9.0); a CUBIN for sm_XY when NVRTC supports the
// device's arch; otherwise PTX for the highest compute_XX NVRTC supports that is not newer than the
// device, which the driver JIT-compiles at load.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dgps/runtime/BinaryCache.h"
#include "dgps/runtime/CudaDriver.h"

namespace dgps {

struct JitTarget {
  std::string arch;    ///< the --gpu-architecture value: "sm_90a", "sm_86", "compute_120".
  bool ptx = false;    ///< true for compute_XX (PTX loaded through the driver's JIT).
  int sm = 0;          ///< 90 for sm_90a / compute_90.
  std::string reason;  ///< why this target was chosen, for logs and errors.
};

/// Chooses the target for a device of capability `cc` given NVRTC's supported archs (e.g. {75,...,90,
/// 100,120}). Throws RuntimeError{Jit} when NVRTC supports nothing at or below the device.
JitTarget selectJitTarget(ComputeCapability cc, const std::vector<int>& supported_archs);

/// Parses an explicit target ("sm_90a", "sm_80", "compute_90") and checks that the loaded NVRTC
/// supports it. Throws RuntimeError{InvalidArgument} naming the arch and the supported list.
JitTarget parseJitTarget(const std::string& arch);

/// What the loaded NVRTC and its headers are.
struct NvrtcEnvironment {
  int major = 0, minor = 0;              ///< nvrtcVersion.
  std::vector<int> supported_archs;      ///< nvrtcGetSupportedArchs.
  std::string library_path;              ///< the libnvrtc file actually loaded (dladdr), if known.
  std::string include_dir;               ///< CUDA headers passed with -I ("" if none found).
  int include_cuda_version = 0;          ///< CUDA_VERSION of <include_dir>/cuda.h, 0 if unknown.
  std::vector<std::string> searched;     ///< include folders considered, in order.
  int built_cuda_version = 0;            ///< CUDA_VERSION the runtime was compiled against.
  /// "NVRTC 13.0 (/usr/local/cuda/lib64/libnvrtc.so.13), CUDA headers 13.0 at /usr/local/cuda/include,
  ///  runtime built against CUDA 13.0, driver 13.0" (driver: "none" without libcuda).
  std::string describe() const;
};

/// Probed once per process. Include folder order: $DGPS_CUDA_INCLUDE_DIR; next to the loaded libnvrtc
/// (../include, ../../include, pip's ../../cuda_runtime/include); $CUDA_HOME/include, $CUDA_PATH/include;
/// the build's CUDA include folder; /usr/local/cuda/include. The first folder holding cuda_bf16.h and
/// cuda_fp16.h whose CUDA version equals NVRTC's wins; failing that the first holding them (with a warning).
const NvrtcEnvironment& nvrtcEnvironment();

/// Register and memory use of one kernel, from ptxas -v (NVRTC's log).
struct KernelResourceUsage {
  std::string name;           ///< the mangled or extern "C" entry name.
  std::string arch;           ///< "sm_90a".
  int registers = -1;
  long stack_frame_bytes = 0; ///< local memory per thread (0 is what we require; docs/math.md §7.5).
  long spill_store_bytes = 0;
  long spill_load_bytes = 0;
  long shared_bytes = 0;      ///< static shared memory.
  int barriers = 0;
  bool spills() const { return stack_frame_bytes > 0 || spill_store_bytes > 0 || spill_load_bytes > 0; }
};

/// Parses every "Compiling entry function"/"Function properties"/"Used N registers" group of a log.
std::vector<KernelResourceUsage> parsePtxasInfo(const std::string& log);

/// One compile: the source, its macros and the target. Headers: the embedded device library (always)
/// plus `extra_headers` (name, contents) as in-memory headers.
struct JitRequest {
  std::string source;
  std::string source_name = "kernels.cu";
  std::vector<std::string> defines;  ///< "DGPS_K=128", passed as -D...
  JitTarget target;
  std::vector<std::pair<std::string, std::string>> extra_headers;
  std::vector<std::string> extra_options;
};

struct JitBinary {
  std::string image;  ///< CUBIN, or PTX text when target.ptx.
  bool is_ptx = false;
  std::string log;    ///< NVRTC log (ptxas -v resource lines).
  std::vector<KernelResourceUsage> usage;
  std::string key;    ///< cache key (64 hex digits).
  bool from_cache = false;
};

/// Refuses a source whose #include directives reach outside the embedded device library: only
/// names of embedded headers ("dgps/device/<header>", "dgps/tile/<header>") and the request's extra_headers
/// may be included;
/// absolute paths, other names, computed includes, #include_next/#import/#embed and __has_include are
/// refused. Throws RuntimeError{Package} "<source_name>:<line>: <why>: '<the line>'; ...". Called by
/// JitCompiler::compile before anything else; see IncludeScan.h in runtime/lib for how lines are read.
void checkSourceIncludes(const JitRequest& request);

/// Every input of the cache key, gathered so tests can change each one.
struct JitKeyFields {
  std::string source;
  std::string source_name;
  std::string headers_digest;           ///< SHA-256 over the in-memory headers' names and contents.
  std::vector<std::string> options;     ///< the full NVRTC option list (arch with suffix, -D, -I ...).
  std::string nvrtc_version;            ///< "13.0".
  int include_cuda_version = 0;         ///< version of the -I headers.
  std::string arch;                     ///< "sm_90a" (also in options; kept explicit).
};
/// SHA-256 (hex) over all fields and the cache format version.
std::string jitCacheKey(const JitKeyFields& fields);

/// SHA-256 over the embedded device headers (names and contents).
const std::string& embeddedHeadersDigest();
/// Names of the embedded device headers ("dgps/device/abi.h", ...).
std::vector<std::string> embeddedHeaderNames();

class JitCompiler {
 public:
  explicit JitCompiler(BinaryCache cache = BinaryCache());

  /// The NVRTC option list for `request` (architecture, -std=c++17, ptxas -v, -I, -D...).
  std::vector<std::string> options(const JitRequest& request) const;
  JitKeyFields keyFields(const JitRequest& request) const;
  std::string cacheKey(const JitRequest& request) const { return jitCacheKey(keyFields(request)); }

  /// Returns the cached image for the request or compiles it with NVRTC and caches it. The source's
  /// includes are checked first (checkSourceIncludes). On a compile
  /// failure throws RuntimeError{Jit} naming the folder (under the cache dir, "failures/<key>/") that
  /// holds the source, options and full log, and the versions (NvrtcEnvironment::describe()).
  JitBinary compile(const JitRequest& request) const;

  const BinaryCache& cache() const { return cache_; }

 private:
  BinaryCache cache_;
};

}  // namespace dgps
