// The `dgps` dialect: one `dgps.recurrence` op per layer spec (see DGPSOps.td for the attributes).
#pragma once

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

#include "dgps/Dialect/DGPS/IR/DGPSDialect.h.inc"
#include "dgps/Dialect/DGPS/IR/DGPSEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dgps/Dialect/DGPS/IR/DGPSAttrs.h.inc"

#define GET_OP_CLASSES
#include "dgps/Dialect/DGPS/IR/DGPSOps.h.inc"

namespace dgps::ir {
/// Name of the module attribute holding the compilation target, e.g. "sm_90a".
inline constexpr const char* kTargetAttrName = "dgps.target";
}  // namespace dgps::ir
