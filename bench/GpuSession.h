// The benchmark's hold on one GPU: its primary context (current on the main thread for the whole run),
// one blocking stream that every timed launch goes to, the device's properties, and three small helper
// kernels compiled with NVRTC through the runtime's JitCompiler (the driver API only, like the runtime:
// no cudart):
//   dgps_bench_copy   a 16-byte-per-thread grid-stride copy, for the device-to-device copy bandwidth;
//   dgps_bench_spin   a one-thread busy-wait on %globaltimer, enqueued before each start event so the
//                     GPU is still busy while the host enqueues the timed launches (their host-side
//                     overhead — validation, pointer checks — then never shows up between the events);
//   L2 flush          cuMemsetD8Async over a buffer of 2x the L2 size, before every timed launch, so
//                     no launch finds the previous one's data in L2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Jit.h"

namespace dgps {
namespace bench {

struct GpuInfo {
  int device = 0;
  std::string name;                 ///< "NVIDIA H200"
  ComputeCapability cc;
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t smem_per_block_optin = 0;
  std::int64_t smem_per_sm = 0;
  int regs_per_sm = 0;
  int max_threads_per_block = 0;
  std::size_t total_memory = 0;     ///< bytes
  std::string driver_version;       ///< "13.0"
  std::string nvrtc_version;        ///< "13.0"
  JitTarget target;                 ///< what NVRTC compiles for on this device (sm_90a on an H200)
};

class GpuSession {
 public:
  /// Makes `device`'s primary context current, creates the stream, compiles and loads the helpers.
  /// Throws RuntimeError.
  GpuSession(int device, const JitCompiler& jit);
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  const GpuInfo& info() const { return info_; }
  CUstream stream() const { return stream_; }

  /// Enqueues a write over 2x L2 (at least 64 MiB) on the stream.
  void flushL2();
  /// Enqueues a busy-wait of `microseconds` on the stream (nothing when <= 0).
  void spin(double microseconds);
  /// Waits for the stream under the hang watchdog; throws RuntimeError{Cuda} naming `what` on an error.
  void synchronize(const std::string& what);

  /// Median device-to-device copy bandwidth, bytes read + bytes written per second, of a `bytes`-byte
  /// copy kernel timed `reps` times with events (after 3 untimed copies).
  double measureCopyBandwidth(std::size_t bytes, int reps);

 private:
  GpuInfo info_;
  std::unique_ptr<DeviceContextGuard> context_;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction copy_ = nullptr;
  CUfunction spin_ = nullptr;
  DeviceBuffer flush_;
  unsigned char flush_value_ = 0;
};

/// Times `launch` `reps` times on the session's stream. Each repetition: flush L2, spin `spin_us`,
/// record start, launch(), record end. One synchronisation at the end (under the watchdog, labelled
/// `what`); returns the per-repetition times in milliseconds. Throws RuntimeError on a CUDA error.
std::vector<double> timeLaunches(GpuSession& session, const std::function<void()>& launch, int reps, double spin_us,
                                 const std::string& what);

/// True when `message` (a RuntimeError text) names a CUDA error after which the context is unusable
/// (illegal address, launch failure, misaligned address, illegal instruction, trap, ...).
bool isStickyCudaError(const std::string& message);

}  // namespace bench
}  // namespace dgps
