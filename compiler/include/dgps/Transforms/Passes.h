// The passes of the DGPS pipeline (Passes.td has each pass's description with a before/after
// example) and the pipeline builder used by dgpsc.
#pragma once

#include <memory>
#include <string>

#include "dgps/dsl/LaunchContract.h"
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

/// The DeviceFeatures.h FeatureSet::write_key code of a forward with features `f` for the tile lowerings' `write-key`
/// option `requested` (Passes.td). The option governs the walks' preconditioned operand: the write key P ⊙ k̂ of
/// a key-side preconditioner or the query P ⊙ q̂ of a query-side one. rebuilt -> 0; stored -> 1; segments -> 2
/// (key side only: stored, loaded by the segment walks only; not with per-channel decay, whose stored key is opw,
/// which state_output reads too); auto -> for a key-side preconditioner (either source) 1 with per-channel decay
/// (the stored key replaces opw: no extra traffic), else kAutoScalarWriteKey; for a query-side ema_sq_squash
/// preconditioner with scalar or no decay 1 (atq: the stored query "pwq"); 0 otherwise (no preconditioner, or a
/// query side with per-channel decay or hypergrad_ogd). stored
/// needs a preconditioner (on the query side, scalar or no decay). Returns false and sets *error (naming the
/// value and why) otherwise.
bool writeKeyCode(llvm::StringRef requested, const launch::FeatureSet& f, int* code, std::string* error);

/// auto's choice for a scalar (or no) decay, where the stored key is a region of its own ("pwk": chunk_local
/// writes it, every walk reads it instead of rebuilding it). Timed on the H200 (B = 8, T = 4096, H = 16,
/// K = V = 128, all-tile pgdn; docs/performance.md run 11): stored 0.759 ms, segments 0.797, rebuilt 0.782; at
/// B = 1, T = 32768: stored 1.749, segments 1.754, rebuilt 2.226. state_output loads the key too: the extra 16 KB
/// written and read per chunk costs less than the producer warpgroup's rebuild on the walk's critical path.
/// OSDN's hypergradient preconditioner likewise (H100, run 26, shipped rebuilt beside stored): B = 8 0.836 ->
/// 0.793 ms, B = 1, T = 32768 2.157 -> 2.032 (run 11 had found stored 2.3% slower at B = 8, before the parallel
/// feedback scan).
inline constexpr int kAutoScalarWriteKey = launch::kWriteKeyStored;

/// The option value of a write-key code (rebuilt, stored, segments).
const char* writeKeyName(int code);

/// Registers the dialects every DGPS tool reads (dgps, chunk, tile, func).
void registerDialects(mlir::DialectRegistry& registry);

}  // namespace dgps
