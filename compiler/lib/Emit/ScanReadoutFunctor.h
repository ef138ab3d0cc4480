// The read-out functor of a per-channel channel scan, printed into kernels.cu (TileChunkEmitter.cpp,
// TileStateEmitter.cpp). The device library's scan (runtime/device/dgps/tile/channel_scan.cuh) knows only
// "scan, then read out each step through the given functor"; which read-out a spec's preconditioner needs is the
// tile op's `readout` / `scan_readout` attribute, and this file turns it into code.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "dgps/Dialect/Tile/IR/Tile.h"

namespace dgps {

/// The parameters of one read-out, as the tile op carries them.
struct ScanReadoutSpec {
  tile::ScanReadout kind = tile::ScanReadout::soft_power;
  std::optional<double> base, eps;  ///< soft_power: P = base^(−r/(1+|r|)), r = ln(s + eps) − center
  std::string center;               ///< soft_power: a CUDA expression for the centre (a float in scope)
  std::optional<double> min, max;   ///< clamped_*: the bounds the state is projected onto after each step
};

/// Prints, each line prefixed by `indent`, a local struct `ScanReadout` and a const instance `var` of it with
/// the members channel_scan.cuh's read-out contract asks for:
///   float step(float s) const               the state kept after a step (the projection onto [min, max], or s)
///   float operator()(float prev, float next) const   the row's multiplier P from the state before / after it
///   enum : bool { kDeferred }   true for a costly read-out (the soft power), which the scan runs after a batch
///                               of steps; false for a choice of state, read out in the step
/// (A local class may not have static data members, hence the enum.)
/// The parameters are the struct's members (initialised from literals and `center`), so the scan's loop reads
/// registers, not a switch.
void printScanReadout(std::ostream& os, const std::string& indent, const ScanReadoutSpec& r, const std::string& var);

}  // namespace dgps
