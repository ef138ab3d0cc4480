// The passes of the DGPS pipeline (Passes.td has each pass's description with a before/after
// example) and the pipeline builder used by dgpsc.
#pragma once

#include <memory>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace dgps {

#define GEN_PASS_DECL
#include "dgps/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dgps/Transforms/Passes.h.inc"

/// The stages a pipeline can stop after or print after.
enum class Stage {
  Dgps,   ///< imported and canonicalised dgps IR
  Chunk,  ///< lowered, canonicalised and preconditioner-fused chunk IR
  Plan,   ///< partitioned into kernels, with the cost estimate
};

/// Adds the passes that take a module of dgps IR to `until` (inclusive).
void buildPipeline(mlir::OpPassManager& pm, Stage until = Stage::Plan);

/// Registers the dialects every DGPS tool reads (dgps, chunk, tile, func).
void registerDialects(mlir::DialectRegistry& registry);

}  // namespace dgps
