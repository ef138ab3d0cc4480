// Conversions between the spec data model (dsl/Spec.h) and the dgps dialect.
//
//   importSpec(spec)      builds `module attributes {dgps.target = ...} { dgps.recurrence @name {...} }`
//                         with the op located at the spec file's position (FileLineColLoc).
//   exportSpec(op)        reads a dgps.recurrence back into a Spec. For every spec the parser accepts,
//                         exportSpec(importSpec(s)) == s (tests/compiler/SpecImportTest.cpp).
#pragma once

#include <string>

#include "dgps/Dialect/DGPS/IR/DGPS.h"
#include "dgps/dsl/Spec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace dgps::ir {

/// The default compilation target (H100/H200, wgmma-capable).
inline constexpr const char* kDefaultTarget = "sm_90a";

/// Builds one dgps.recurrence for `spec` inside a new module carrying `target`. The caller must
/// have loaded DGPSDialect into `ctx`. Does not verify (call mlir::verify on the result).
mlir::OwningOpRef<mlir::ModuleOp> importSpec(mlir::MLIRContext& ctx, const Spec& spec,
                                             const std::string& target = kDefaultTarget);

/// Reads the op's attributes into a Spec (the location becomes spec.loc when it is a file position).
/// Parameters of an absent preconditioner are dropped and its state flags cleared, as the parser does.
Spec exportSpec(RecurrenceOp op);

}  // namespace dgps::ir
