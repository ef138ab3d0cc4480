// The launch contract of a package's kernels: which forward roles run and, for each role, its threads, its grid
// and its shared-memory layout. The one definition: the emitter prints the layouts and thread counts into
// kernels.cu (each role's `<role>_smem()` and __launch_bounds__), the manifest writer prints the same expressions
// as formulas (LaunchManifest.h), and host code evaluates them for one call (forwardGeometry and friends, which
// the emulator tests launch with). The device library holds none of it: it is decided here, per package, from
// the spec's features (DeviceFeatures.h FeatureSet) and the compiler's choices carried in them (write_key).
//
// A shared-memory layout is a sequence of items placed one after another from byte 0:
//   region(name, bytes)    a named part at the current offset, then the offset advances by `bytes`;
//   alias(name, target)    a name for `target`'s offset (a role whose features fold two parts into one);
//   absent(name)           a name whose offset is -1 (the kernel static_asserts it never reads it);
//   overlay({a, b, ...})   alternatives that share the current offset (reused after a barrier); the offset
//                          advances by the largest;
//   stages(s, align, n)    the layout `s` (offsets relative to the stage) padded to `align` bytes, repeated n times
//                          (the role's prefetch pipeline; the layout also names stage_bytes and stages).
// docs/architecture.md "The launch contract" lists each role's layout.
#pragma once

#include <string>
#include <vector>

#include "dgps/device/launch_rules.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/LaunchExpr.h"

namespace dgps::launch {

// ---- roles --------------------------------------------------------------------------------------------------
enum Role : int {
  kPrecondSummary = 0,  ///< per-chunk summary, fully parallel: ema_sq_squash's accumulator, or the chunked
                        ///< hypergrad_ogd d-scan's triangular block (hypergradChunked)
  kPrecondScan = 1,     ///< preconditioner state at every chunk start (sequential per sequence and key head)
  kChunkLocal = 2,      ///< per chunk: norms, gate cumsum, write key, KKT, triangular inverse, masked Q·Kᵀ
  kStateOutput = 3,     ///< per (sequence, value head, value tile): sequential state pass and output
};
constexpr int kMaxRoles = 4;
const char* roleName(int role);

/// The forward roles of `f`, in launch order; returns their count.
int forwardRoles(const FeatureSet& f, int roles[kMaxRoles]);

/// The kernels of the segmented state pass, in launch order after chunk_local (they replace state_output;
/// docs/architecture.md "Long sequences: the segmented state pass").
enum SegmentRole : int {
  kSegmentSummary = 0,      ///< per (slot, value head): E over value tiles, then M over tiles of M's columns
  kSegmentFold = 1,         ///< per (sequence, value head, slab of fold columns): the fp32 fold over the segments
  kSegmentStateOutput = 2,  ///< per (slot, value head, value tile): the walk from the folded start, writes o
};
constexpr int kSegmentRoles = 3;
const char* segmentRoleName(int role);

// ---- shared-memory layouts ------------------------------------------------------------------------------------
struct SmemLayout {
  struct Item {
    enum Kind { Region, Alias, Absent, Overlay, Stages } kind = Region;
    std::string name;                ///< Region, Alias, Absent
    LaunchExpr bytes = 0;            ///< Region
    std::string target;              ///< Alias
    std::vector<SmemLayout> parts;   ///< Overlay: the alternatives; Stages: one stage
    int align = 1;                   ///< Stages
    LaunchExpr count = 1;            ///< Stages
  };
  std::vector<Item> items;

  SmemLayout& region(const std::string& name, const LaunchExpr& bytes);
  SmemLayout& alias(const std::string& name, const std::string& target);
  SmemLayout& absent(const std::string& name);
  SmemLayout& overlay(std::vector<SmemLayout> alternatives);
  SmemLayout& stages(SmemLayout stage, int align, const LaunchExpr& count);
};

/// The layout's size in bytes (the role's dynamic shared memory).
LaunchExpr smemBytes(const SmemLayout& layout);

/// The CUDA text of `layout` for kernels.cu: `struct <type> { int <names>..., total; };` and
/// `DGPS_HD constexpr <type> <fn>()` computing the byte offsets from dgps::cfg's constants.
std::string smemLayoutCuda(const std::string& type, const std::string& fn, const SmemLayout& layout);

/// The CUDA text `DGPS_HD constexpr int <fn>() { ... }` returning `threads` over dgps::cfg's constants (a kernel's
/// __launch_bounds__).
std::string threadsCuda(const std::string& fn, const LaunchExpr& threads);

/// The byte offset of each name of `layout` for one call, in declaration order (absent names: -1), then "total".
std::vector<std::pair<std::string, long long>> smemOffsets(const SmemLayout& layout, const ProblemShape& s,
                                                           const TileConfig& t);

// ---- each role's launch ------------------------------------------------------------------------------------------
struct RoleLaunch {
  LaunchExpr grid = 1;      ///< CTAs (grid.x)
  LaunchExpr threads = 32;  ///< threads per CTA (block.x); the kernel's __launch_bounds__
  SmemLayout smem;          ///< dynamic shared memory
};

/// A walk's consumer threads: one warp per 16 value columns (the producer warpgroup, where a walk has one, comes
/// after them).
LaunchExpr walkConsumerThreads();
/// The producer warps of a walk of `f` (`segment`: a segment walk): a warpgroup where it rebuilds an operand.
int walkProducerWarps(const FeatureSet& f, bool segment);

/// A forward role (Role) of `f`.
RoleLaunch forwardRoleLaunch(int role, const FeatureSet& f);
/// A kernel of the segmented state pass (SegmentRole) of `f`.
RoleLaunch segmentRoleLaunch(int role, const FeatureSet& f);
/// The decode kernel of `f`.
RoleLaunch decodeLaunch(const FeatureSet& f);

/// The role's geometry for one call (L: chunks per segment, for the segment kernels).
Geometry forwardGeometry(int role, const FeatureSet& f, const ProblemShape& s, const TileConfig& t);
Geometry segmentGeometry(int role, const FeatureSet& f, const ProblemShape& s, const TileConfig& t, long long L);
Geometry decodeGeometry(const FeatureSet& f, const ProblemShape& s, const TileConfig& t);

}  // namespace dgps::launch
