// The package's workspace, declared by the tile IR: the module attribute tile.workspace lists the regions the
// forward's roles pass to each other through the one device buffer, in layout order. It is the one definition of
// the layout: the lowering builds it from what the roles read and write (--dgps-declare-tile-workspace), the tile
// dialect verifies it against those roles, and the emitter prints it twice from here: into kernels.cu as the
// offsets the kernels index (workspaceLayoutCuda) and into manifest.yaml as the size formulas the runtime
// evaluates to allocate the buffer (workspaceBufferFormulas). docs/architecture.md "The workspace".
//
//   module attributes {tile.workspace = [{bytes = 2 : i64, name = "tb", size = ["slots", "HV", "chunk", "chunk"]},
//                                        ...]}
//
// Each region starts at a kWorkspaceAlign-aligned byte offset: the sum of the aligned sizes of the regions before
// it. A region's size is element bytes times the product of its extents; an extent is one of kWorkspaceExtents
// (a symbol of the problem shape or tile configuration, or a small formula over them) or a positive integer.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dgps/device/abi.h"
#include "dgps/device/launch_rules.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace dgps::tile {

/// Module attribute: the workspace declaration (above).
inline constexpr const char* kWorkspaceAttr = "tile.workspace";
/// Byte alignment of every region's start (and of the total).
inline constexpr long long kWorkspaceAlign = 256;

/// One region of the workspace: `bytes` per element times the product of `size` (extents, see
/// kWorkspaceExtents; integers printed in decimal), per the whole call (every chunk slot and head).
struct WorkspaceRegion {
  std::string name;
  long long bytes = 0;
  std::vector<std::string> size;
};

/// A region of the sequence-parallel state pass (its size starts with segment_slots): laid out after every chunk
/// region, listed in the manifest's launch.forward_segmented.buffers rather than launch.workspace.buffers.
bool isSegmentRegion(const WorkspaceRegion& region);

/// The extents a region's size may name, each with its CUDA expression in the generated layout function (over
/// `s`, a launch::ProblemShape, and `t`, a launch::TileConfig) and in the manifest's formula language
/// (runtime/include/dgps/runtime/LaunchFormula.h). slots: chunk slots (launch_rules.h chunkSlots); KP: K padded
/// to 16; the composite extents are the chunked hypergrad_ogd scan's per-chunk records.
struct WorkspaceExtent {
  const char* name;
  const char* cuda;
  const char* formula;
  /// Its value for a call (L: chunks per segment, < 1 without the segmented pass).
  long long (*value)(const launch::ProblemShape& s, const launch::TileConfig& t, long long L);
};
extern const WorkspaceExtent kWorkspaceExtents[];
extern const int kWorkspaceExtentCount;

/// The regions a tile role may name, in layout order, with their element bytes and sizes: the catalog the
/// declaration is drawn from. Adding a region or changing a row pitch is one entry here (the kernels' indexing
/// of the region is the emitter's).
const std::vector<WorkspaceRegion>& workspaceCatalog();

/// One use of a region by a tile op: the region's name, the op, and whether the op writes it (else reads).
struct RegionUse {
  std::string region;
  mlir::Operation* op = nullptr;
  bool write = false;
};

/// Every workspace region the tile ops under `root` name, in op order (an op naming two regions gives two uses).
std::vector<RegionUse> regionUses(mlir::Operation* root);

/// Builds tile.workspace on `module` from the regions its tile functions name: the catalog's entries that some
/// role uses, in catalog order. Fails at the op naming a region the catalog does not hold. Replaces an existing
/// declaration.
mlir::LogicalResult declareWorkspace(mlir::ModuleOp module);

/// Checks `value` as the tile.workspace of `op` (a module): the entry format, known extents, unique names, and
/// against the module's tile functions: every region a role names is declared, every declared region is written
/// by some role and read by some role. Each error names the region and, for a use, the op and its function.
mlir::LogicalResult verifyWorkspace(mlir::Operation* op, mlir::Attribute value);

/// The declaration of `module` (empty when it declares none), assuming it verified.
std::vector<WorkspaceRegion> workspaceOf(mlir::ModuleOp module);

/// The CUDA text of the package's layout: namespace dgps_package { struct Workspace { long long <region>...,
/// total; }; Workspace workspace_layout(s, t, L); Workspace workspace_of(const ForwardArgs&); } (host and device),
/// for kernels.cu. workspace_layout computes the offsets from the shape; workspace_of reads the ones the host put in
/// ForwardArgs::workspace_offsets (abi.h; at most kMaxWorkspaceRegions regions), which is what the kernels use.
std::string workspaceLayoutCuda(const std::vector<WorkspaceRegion>& regions);

/// The kernel-body line that binds `W`, the call's region offsets (`ws + W.<region>`), from the arguments `a`.
std::string workspaceOfCuda();

/// The bytes `region` takes for a call, before alignment (L as in WorkspaceExtent::value); -1 for an extent that is
/// not known (a declaration that did not verify).
long long regionBytes(const WorkspaceRegion& region, const launch::ProblemShape& s, const launch::TileConfig& t,
                      long long L = 0);

/// The catalog's entry named `name`, or nullptr.
const WorkspaceRegion* workspaceCatalogEntry(llvm::StringRef name);

/// The manifest's launch.workspace.buffers: (name, size formula in bytes) per region, in layout order.
std::vector<std::pair<std::string, std::string>> workspaceBufferFormulas(const std::vector<WorkspaceRegion>& regions);

}  // namespace dgps::tile
