// The diagonal preconditioner's multiplier P inside one chunk, rebuilt from the state at the chunk start.
// Both chunk_local (for the KKT and Aqk) and state_output (for the state update or the read query) run this
// same scan, so the preconditioned key P⊙k never goes through device memory (issue 3; docs/math.md §5.1 option (b)
// with the chunk-start state from the tiny precond_scan pre-pass).
//
// Per channel d, sequentially over the chunk's tokens i (fp32, one thread per channel):
//   ema_sq_squash (docs/math.md §3.3): A_i = pa_i·A_{i-1} + pb_i·k_{i,d}²,  P = x^{−s(ln(A_i + eps) − c_h)}
//   hypergrad_ogd (docs/math.md §5.2): d_{i+1} = clamp(pa_i·d_i + pb_i·k_{i,d}²), P = d_i (pre) or d_{i+1} (post)
// with k the raw input key (bf16/fp16 bits) and the per-token coefficients written by chunk_local:
//   pa_i = e^{precond_g_i} (accumulator gate or retention, 1 without it),
//   pb_i = β^a_i·rk_i² (ema_sq_squash) or κ_i ε_i·rk_i² (hypergrad_ogd), rk the key's l2norm factor,
// so k̂² = rk²·k² never needs the normalised key. Pad rows (i ≥ Lr) and pad channels (d ≥ K) get P = 1.
//
// The scan itself is tile/channel_scan.cuh (one implementation for the device library's kernels and the ones
// printed from tile IR); this header only turns the spec's Traits into its read-out and parameters.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/tile/channel_scan.cuh"

namespace dgps {
namespace dev {

/// The read-out of the spec's preconditioner: a soft power of the accumulator (ema_sq_squash) or the clamped
/// hypergradient state before / after the token's step (hypergrad_ogd, write timing pre / post).
template <class Tr>
DGPS_HD constexpr tile::Readout precond_readout() {
  return Tr::kPrecondSource == 0 ? tile::Readout::soft_power
                                 : (Tr::kTiming == 0 ? tile::Readout::clamped_pre : tile::Readout::clamped_post);
}

/// The scan's parameters for key head h: the squash's base x, eps and centre c_h (0 when precond_center is not
/// given), or the hypergradient clamp.
template <class Tr>
DGPS_DEV tile::ScanParams precond_scan_params(const ForwardArgs& a, int64_t h) {
  tile::ScanParams p;
  if (Tr::kPrecondSource == 0) {
    p.base = Tr::kSquashX;
    p.eps = Tr::kSquashEps;
    p.center = a.precond_center != nullptr ? a.precond_center[h] : 0.f;
  } else {
    p.has_min = Tr::kClampMin;
    p.min = Tr::kClampMinV;
    p.has_max = Tr::kClampMax;
    p.max = Tr::kClampMaxV;
  }
  return p;
}

}  // namespace dev
}  // namespace dgps
