// The DGPS pass pipeline (Passes.td lists the stages) and dialect registration for the tools.
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/DGPS/IR/DGPS.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

namespace dgps {

void registerDialects(mlir::DialectRegistry& registry) {
  registry.insert<ir::DGPSDialect, chunk::ChunkDialect, tile::TileDialect, mlir::func::FuncDialect>();
}

void buildPipeline(mlir::OpPassManager& pm, Stage until) {
  pm.addPass(mlir::createCanonicalizerPass());
  if (until == Stage::Dgps) return;
  pm.addPass(createLowerToChunk());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addNestedPass<mlir::func::FuncOp>(createFusePreconditioner());
  if (until == Stage::Chunk) return;
  // An unclamped OSDN d-scan in its chunked form (the launch contract's roles for it, DeviceFeatures.h
  // hypergradChunked); a no-op for every other spec.
  pm.addNestedPass<mlir::func::FuncOp>(createParallelPrecondScan());
  pm.addPass(createPartitionKernels());
}

}  // namespace dgps
