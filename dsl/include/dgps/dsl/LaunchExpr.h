// A launch quantity written once and read three ways: the integer expressions of the launch contract (a role's
// threads, grid and shared-memory sizes, LaunchContract.h) are built as LaunchExpr trees, then
//   - formula(): printed into the package manifest in the language of runtime/include/dgps/runtime/LaunchFormula.h
//     (the runtime evaluates it per call);
//   - cuda():    printed into the package's kernels.cu as a C++ constant expression over the kernel's compile-time
//     constants (config.cuh dgps::cfg: K, V, KP, C, BV, STAGES, WARPS);
//   - eval():    evaluated on the host for one call (the tests and the emulator launch with it).
// So the host's sizes and the kernels' offsets cannot disagree: they are one tree.
//
//   LaunchExpr tile = chunk() * (KP() + 8) * 2;        // formula "chunk * (KP + 8) * 2", cuda "C * (KP + 8) * 2"
//   tile.eval(shape, config)                          // 64 * 136 * 2 at K = 128, chunk 64
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dgps/device/launch_rules.h"

namespace dgps::launch {

/// The names a launch expression may read. Kernel constants (printed in kernels.cu) and problem symbols (grids
/// only: they exist on the host, not in the kernel's compile-time constants).
enum class LaunchSym {
  K, V, KP,           ///< key and value head dims; KP = K padded to 16 (the tensor-core k-step)
  chunk,              ///< tile configuration: chunk length C
  BV,                 ///< value tile of a walk CTA (launch_rules.h valueTile)
  stages, warps,      ///< tile configuration
  B, T, N, H, HV,     ///< problem shape (grids only)
  varlen,             ///< 1 with cu_seqlens (grids only)
  slots,              ///< chunk slots (launch_rules.h chunkSlots; grids only)
  segment_slots,      ///< segment slots of L chunks (launch_rules.h segmentSlots; grids only)
};

class LaunchExpr {
 public:
  LaunchExpr(long long constant);  // NOLINT(google-explicit-constructor): literals read as expressions
  static LaunchExpr sym(LaunchSym s);

  friend LaunchExpr operator+(const LaunchExpr& a, const LaunchExpr& b);
  friend LaunchExpr operator*(const LaunchExpr& a, const LaunchExpr& b);
  /// Integer division rounding toward zero (both operands are non-negative here).
  friend LaunchExpr operator/(const LaunchExpr& a, const LaunchExpr& b);
  friend LaunchExpr max(const LaunchExpr& a, const LaunchExpr& b);
  friend LaunchExpr cdiv(const LaunchExpr& a, const LaunchExpr& b);
  friend LaunchExpr alignUp(const LaunchExpr& a, const LaunchExpr& b);

  /// The manifest formula text (LaunchFormula.h; KP, BV and slots are the manifest's lets).
  std::string formula() const;
  /// The C++ text over dgps::cfg's constants K, V, KP, C, BV, STAGES and WARPS in scope (launch_rules.h helpers
  /// qualified). Problem symbols have no kernel spelling: printing one is a programming error (it throws).
  std::string cuda() const;
  /// The value for one call (L: chunks per segment, for segment_slots).
  long long eval(const ProblemShape& s, const TileConfig& t, long long L = 0) const;

  /// True for a constant equal to `v`.
  bool isConstant(long long v) const;

 private:
  struct Node;
  explicit LaunchExpr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  /// A call node fn(a, b) ("max", "cdiv", "align_up").
  static LaunchExpr call(const char* fn, const LaunchExpr& a, const LaunchExpr& b);
  std::string render(bool cuda) const;
  /// A term as rest * coef (coef the constant factor of a folded product, else 1; a constant c is 1 * c).
  struct Term;
  static Term splitTerm(const LaunchExpr& e);
  std::shared_ptr<const Node> node_;
};

struct LaunchExpr::Term {
  LaunchExpr rest;
  long long coef;
};

inline LaunchExpr K() { return LaunchExpr::sym(LaunchSym::K); }
inline LaunchExpr V() { return LaunchExpr::sym(LaunchSym::V); }
inline LaunchExpr KP() { return LaunchExpr::sym(LaunchSym::KP); }
inline LaunchExpr chunk() { return LaunchExpr::sym(LaunchSym::chunk); }
inline LaunchExpr BV() { return LaunchExpr::sym(LaunchSym::BV); }
inline LaunchExpr stages() { return LaunchExpr::sym(LaunchSym::stages); }
inline LaunchExpr warps() { return LaunchExpr::sym(LaunchSym::warps); }

/// Row pitch in bytes of a bf16 shared tile with `cols` columns: cols + 8 elements (launch_rules.h bf16Pitch).
inline LaunchExpr bf16RowBytes(const LaunchExpr& cols) { return (cols + 8) * 2; }
/// Row pitch in bytes of an f32 shared tile with `cols` columns: cols + 4 elements (launch_rules.h f32Pitch).
inline LaunchExpr f32RowBytes(const LaunchExpr& cols) { return (cols + 4) * 4; }

}  // namespace dgps::launch
