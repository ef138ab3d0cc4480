// Test stand-in for emitter output (tests/gpu_kernels/gen_configs.py): spec "pgdn".
#include "dgps/device/dgps.cuh"
namespace {
struct Traits {
  static constexpr bool kL2Norm = true;
  static constexpr float kL2Eps = 1e-06f;
  static constexpr float kSquashX = 1.5f;
  static constexpr float kSquashEps = 1e-06f;
  static constexpr bool kSquashGate = true;
  static constexpr bool kSquashGain = true;
  static constexpr float kEta = 1.0f;
  static constexpr bool kRetention = false;
  static constexpr int kTiming = 0;
  static constexpr float kInit = 1.0f;
  static constexpr bool kClampMin = false;
  static constexpr bool kClampMax = false;
  static constexpr float kClampMinV = 0.0f;
  static constexpr float kClampMaxV = 0.0f;
  static constexpr int kDecay = 1;
  static constexpr bool kGain = true;
  static constexpr int kPrecond = 1;
  static constexpr int kPrecondSide = 0;
  static constexpr int kPrecondSource = 0;
  static constexpr int kSolve = 1;
};
}  // namespace
extern "C" __global__ void dgps_pgdn_fwd_precond_summary(dgps::ForwardArgs a) { dgps::fwd_precond_summary<Traits>(a); }
extern "C" __global__ void dgps_pgdn_fwd_precond_scan(dgps::ForwardArgs a) { dgps::fwd_precond_scan<Traits>(a); }
extern "C" __global__ void dgps_pgdn_fwd_chunk_local(dgps::ForwardArgs a) { dgps::fwd_chunk_local<Traits>(a); }
extern "C" __global__ void __launch_bounds__(dgps::state_output_threads<Traits>(), 1) dgps_pgdn_fwd_state_output(dgps::ForwardArgs a) { dgps::fwd_state_output<Traits>(a); }
extern "C" __global__ void dgps_pgdn_decode(dgps::DecodeArgs a) { dgps::decode<Traits>(a); }
