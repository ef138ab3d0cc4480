// The workspace a package's manifest sizes for one call, as the runtime evaluates it (launch.workspace, and
// launch.forward_segmented's buffers with a segment length): the emulator checks allocate exactly that and find
// a region's offset by name, while the kernels index the layout printed into kernels.cu from the same
// declaration (the compiler's tile.workspace). A check thus runs the host and kernel sides as the runtime does.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "dgps/device/abi.h"
#include "dgps/device/launch_rules.h"

namespace dgps_emu {

struct ManifestWorkspace {
  std::size_t bytes = 0;                        ///< the size to allocate
  std::map<std::string, std::size_t> offsets;  ///< byte offset of each region, by name
  std::vector<std::size_t> ordered;            ///< the same offsets in layout order (the manifest's)
  /// The offset of region `name`; exits with a message naming the region when the manifest has none.
  std::size_t at(const std::string& name) const;
};

/// The workspace of the package in `dir` for shape `s` (T: the kernels' row axis) and tile `t`; `L` >= 1: the
/// segmented forward with L chunks per segment. Exits with the runtime's message when the manifest refuses.
ManifestWorkspace manifestWorkspace(const std::string& dir, const dgps::launch::ProblemShape& s,
                                    const dgps::launch::TileConfig& t, long long L = 0);

/// What the runtime does with the plan's offsets: a.workspace_offsets[i] = W.ordered[i] (abi.h), the offsets the
/// kernels index the workspace by.
void setWorkspaceOffsets(dgps::ForwardArgs& a, const ManifestWorkspace& W);

/// What the runtime does for the workspace operand rows on a GPU with tensor copies (runtime/lib/TensorMaps.cpp),
/// in the emulator's map format: encodes a.wsq_core, a.wsk_core and a.wsw_core for the regions W has (opq or pwq,
/// opk, opw or pwk) over launch::chunkSlots(s, C)·HV·C rows and sets bit 2 of a.row_maps. a.workspace must be
/// set. False (and nothing set) when W has none of those regions.
bool encodeWorkspaceMaps(dgps::ForwardArgs& a, const ManifestWorkspace& W, const dgps::launch::ProblemShape& s,
                         int chunk);

}  // namespace dgps_emu
