// --dgps-declare-tile-workspace: the module attribute tile.workspace from the regions the package's tile roles
// name (Passes.td; the catalog, builder and verifier are Dialect/Tile/IR/Workspace.h).
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Transforms/Passes.h"

namespace dgps {
#define GEN_PASS_DEF_DECLARETILEWORKSPACE
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

namespace {

struct DeclareTileWorkspacePass : public dgps::impl::DeclareTileWorkspaceBase<DeclareTileWorkspacePass> {
  void runOnOperation() override {
    if (mlir::failed(dgps::tile::declareWorkspace(getOperation()))) signalPassFailure();
  }
};

}  // namespace
