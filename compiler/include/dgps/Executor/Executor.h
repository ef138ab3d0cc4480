// A float64 interpreter of chunk IR: runs the forward function of a module at any stage after
// --dgps-lower-to-chunk (flat, fused or partitioned into chunk.kernel regions) on host tensors, so
// every pass can be checked against dsl's token-by-token reference (Reference.h).
//
// Inputs and outputs use the names, layouts and shapes of Reference.h / abi.h (FLA layouts):
//   q, k [B,T,H,K]; v [B,T,HV,V]; g [B,T,HV] or [B,T,HV,K]; beta [B,T,HV]; precond_g,
//   precond_beta [B,T,H]; precond_center [H]; initial_state [N,HV,K,V]; initial_precond_state
//   [N,H,K]; cu_seqlens [N+1] (i64, B = 1). Any floating dtype; values are read as double.
//   A function with chunk.householder_steps = n_h (Gated DeltaProduct) takes k, v, beta with T·n_h rows
//   (q, g, o keep T; cu_seqlens counts tokens), as Reference.h describes.
// Outputs (f64): o [B,T,HV,V], and final_state [N,HV,K,V] / final_precond_state [N,H,K] when the
// IR stores them. Every op is computed chunk by chunk exactly as ChunkOps.td documents (chunks of
// C tokens restart at every sequence start; the last chunk of a sequence may be partial).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dgps/dsl/Tensor.h"
#include "mlir/IR/BuiltinOps.h"

namespace dgps {

struct ExecutorOptions {
  /// Chunk size C; unset = the function's chunk.chunk_size attribute.
  std::optional<int64_t> chunkSize;
  /// Query scale when the IR leaves it to run time (no `scale` attribute); unset = K^{-1/2}.
  std::optional<double> scale;
  /// Segment length in chunks of a segmented state pass (ChunkSegmentOps.td); unset = the function's
  /// chunk.segment_chunks attribute, else dsl's launch rule (SegmentScan.h chooseSegmentChunks) with
  /// N · HV CTAs on `smCount` SMs.
  std::optional<int64_t> segmentChunks;
  int64_t smCount = 132;
};

struct ExecutorResult {
  bool ok = false;
  std::string error;  ///< what went wrong (missing input, bad shape, unsupported op, ...) when !ok
  TensorMap outputs;  ///< "o", "final_state", "final_precond_state" as stored by the IR
};

/// Runs the single forward function (func.func carrying chunk.chunk_size, not chunk.backward_of) of
/// `module`. Never throws; a malformed module or bad inputs give ok = false and a message. After
/// --chunk-derive-backward the outputs also hold the intermediates the forward saves ("saved.<name>").
ExecutorResult executeChunkIR(mlir::ModuleOp module, const TensorMap& inputs, const ExecutorOptions& options = {});

/// Runs the derived backward (--chunk-derive-backward, docs/backward_ir.md): the forward function
/// (for its saved intermediates), then the backward function (func.func with chunk.backward_of), flat
/// or partitioned. `inputs` as for executeChunkIR; `cotangents` (any floating dtype):
///   do [B,T,HV,V] required; dfinal_state [N,HV,K,V], dfinal_precond_state [N,H,K] optional (0).
/// Outputs (f64): "d" + name for every floating input given in `inputs` and loaded by the IR (dq, dk,
/// dv, dg, dbeta, dprecond_g, dprecond_beta, dprecond_center, dinitial_state,
/// dinitial_precond_state), shaped like the input; key-head gradients sum their value heads (GVA).
/// Never throws; an unknown or missing cotangent, a bad module or bad inputs give ok = false.
ExecutorResult executeChunkBackward(mlir::ModuleOp module, const TensorMap& inputs, const TensorMap& cotangents,
                                    const ExecutorOptions& options = {});

}  // namespace dgps
