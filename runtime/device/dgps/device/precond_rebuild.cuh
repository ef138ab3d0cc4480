// The device library's view of the preconditioner's in-chunk rebuild: the spec's Traits turned into the read-out
// and parameters of tile/channel_scan.cuh, which defines the scan itself (its maths, pad rows and channels) once
// for the device library's chunk_local and state_output and for the kernels printed from tile IR. The scan's
// per-token coefficients pa, pb are chunk_local's token record (launch_rules.h WorkspaceLayout, tok).
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
