//===- DGPSDialect.td - the spec-level dialect ------------------*- tablegen -*-===//
//
// The `dgps` dialect is the first stage of the pipeline: one `dgps.recurrence` op holds a whole
// layer spec (Decay, Gain, Preconditioner, Solve axes plus dims, dtypes, optional I/O and the tuning
// space) as typed attributes. It is produced from a parsed YAML spec (dsl/Spec.h) by the importer, or
// read as text by dgps-opt, and lowered to the `chunk` dialect by --dgps-lower-to-chunk.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_DGPS_IR_DIALECT_TD
#define DGPS_DIALECT_DGPS_IR_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def DGPS_Dialect : Dialect {
  let name = "dgps";
  let cppNamespace = "::dgps::ir";
  let summary = "Spec-level dialect: one recurrent layer along the DGPS axes";
  let description = [{
    A module of this dialect carries the compilation target as the module attribute
    `dgps.target` (for example "sm_90a") and one `dgps.recurrence` op per layer. The op's verifier
    enforces the same rules as the spec validator in dsl/, so IR written by hand is held to the
    same contract as YAML.
  }];
  let useDefaultAttributePrinterParser = 1;
}

#endif
