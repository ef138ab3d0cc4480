// The `chunk` dialect: chunkwise WY stages over whole tensors with symbolic dims (ChunkOps.td).
#pragma once

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dgps/Dialect/Chunk/IR/ChunkDialect.h.inc"
#include "dgps/Dialect/Chunk/IR/ChunkEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dgps/Dialect/Chunk/IR/ChunkTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dgps/Dialect/Chunk/IR/ChunkAttrs.h.inc"

#define GET_OP_CLASSES
#include "dgps/Dialect/Chunk/IR/ChunkOps.h.inc"

namespace dgps::chunk {
/// Function attribute: the chunk size C the IR is specialised for.
inline constexpr const char* kChunkSizeAttr = "chunk.chunk_size";
/// Function attribute: the estimated cost of the kernel plan (#chunk.plan).
inline constexpr const char* kPlanAttr = "chunk.plan";
/// Function attribute: the spec's tuning space (#dgps.tuning), carried for the emitter.
inline constexpr const char* kTuningAttr = "chunk.tuning";
/// Function attribute: the GVA ratio HV/H assumed by the cost estimate.
inline constexpr const char* kGvaAttr = "chunk.gva_ratio";
/// Function attribute: the spec's key and value dims (dense i64 arrays).
inline constexpr const char* kKeyDimsAttr = "chunk.key_dims";
inline constexpr const char* kValueDimsAttr = "chunk.value_dims";

/// Shorthand for building tensor types.
ChunkTensorType tensorType(mlir::MLIRContext* ctx, llvm::ArrayRef<Dim> dims, mlir::Type elem,
                      bool global = false);
}  // namespace dgps::chunk
