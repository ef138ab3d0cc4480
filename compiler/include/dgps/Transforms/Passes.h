// The passes of the DGPS pipeline (Passes.td has each pass's description with a before/after
// example) and the pipeline builder used by dgpsc.
#pragma once

#include <memory>
#include <string>

#include "dgps/device/launch_rules.h"
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

/// The launch_rules.h FeatureSet::write_key code of a forward with features `f` for the tile lowerings' `write-key`
/// option `requested` (Passes.td): rebuilt -> 0; stored -> 1; segments -> 2 (stored, loaded by the segment
/// walks only; not with per-channel decay, whose stored key is opw, which state_output reads too); auto -> 0
/// without a key-side preconditioner or for hypergrad_ogd (unmeasured), 1 with per-channel decay (the stored key
/// replaces opw: no extra traffic), kAutoScalarWriteKey otherwise. stored and segments need a key-side
/// preconditioner. Returns false and sets *error (naming the value and why) otherwise.
bool writeKeyCode(llvm::StringRef requested, const launch::FeatureSet& f, int* code, std::string* error);

/// auto's choice for a scalar (or no) decay, where the stored key is a region of its own ("pwk": chunk_local
/// writes it, the walks read it instead of rebuilding it): the segment walks (three rebuilds per chunk at B = 1)
/// load it and state_output rebuilds it. The one line to change once the H200 times state_output both ways
/// (launch::kWriteKeyStored: state_output loads it too).
inline constexpr int kAutoScalarWriteKey = launch::kWriteKeyStoredSegments;

/// The option value of a write-key code (rebuilt, stored, segments).
const char* writeKeyName(int code);

/// Registers the dialects every DGPS tool reads (dgps, chunk, tile, func).
void registerDialects(mlir::DialectRegistry& registry);

}  // namespace dgps
