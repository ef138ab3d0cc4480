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
/// Function attribute: the segment length in chunks of a sequence-parallel state pass
/// (--chunk-segment-state-pass, ChunkSegmentOps.td); absent: chosen at launch (SegmentScan.h).
inline constexpr const char* kSegmentChunksAttr = "chunk.segment_chunks";
/// Function attribute: the GVA ratio HV/H assumed by the cost estimate.
inline constexpr const char* kGvaAttr = "chunk.gva_ratio";
/// Function attribute: Householder steps per token n_h (i64 >= 2; absent = 1). Dim T then counts
/// the T·n_h steps and dim TQ the tokens (ChunkStepOps.td).
inline constexpr const char* kHouseholderStepsAttr = "chunk.householder_steps";
/// Function attribute: the spec's key and value dims (dense i64 arrays).
inline constexpr const char* kKeyDimsAttr = "chunk.key_dims";
inline constexpr const char* kValueDimsAttr = "chunk.value_dims";

/// Function attribute of a derived backward function (--chunk-derive-backward): the symbol name of its
/// forward function.
inline constexpr const char* kBackwardOfAttr = "chunk.backward_of";
/// Function attributes of a backward function: the forward intermediates the forward writes for it
/// (kept) and those it recomputes (string arrays of intermediate names, e.g. "solve_tril").
inline constexpr const char* kBwdKeepAttr = "bwd.keep";
inline constexpr const char* kBwdRecomputeAttr = "bwd.recompute";
/// Load/store name prefix of a kept forward intermediate ("saved.solve_tril").
inline constexpr const char* kSavedPrefix = "saved.";
/// The kernel roles of a partitioned backward (--chunk-partition-backward), in launch order.
inline constexpr const char* kBackwardRoles[] = {
    "bwd_precond_scan", "bwd_chunk_local",     "bwd_state_fwd",       "bwd_output_grad",
    "bwd_state_reverse", "bwd_chunk_grad", "bwd_precond_reverse", "bwd_prologue_grad"};

/// Shorthand for building tensor types.
ChunkTensorType tensorType(mlir::MLIRContext* ctx, llvm::ArrayRef<Dim> dims, mlir::Type elem,
                      bool global = false);
}  // namespace dgps::chunk
