//===- DGPSAttrs.td - enums and parameter groups of a spec -----*- tablegen -*-===//
#ifndef DGPS_DIALECT_DGPS_IR_ATTRS_TD
#define DGPS_DIALECT_DGPS_IR_ATTRS_TD

include "dgps/Dialect/DGPS/IR/DGPSDialect.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class DGPS_Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::dgps::ir";
  let genSpecializedAttr = 0;
}
class DGPS_EnumAttr<EnumAttrInfo info, string mnemonic>
    : EnumAttr<DGPS_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

// Decay axis (docs/math.md §1): D_t = I, exp(g_t) I or Diag(exp(g_t)).
def DGPS_DecayKind : DGPS_Enum<"DecayKind", "decay axis", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Scalar", 1, "scalar">,
    I32EnumAttrCase<"Diagonal", 2, "diagonal">]>;
def DGPS_DecayAttr : DGPS_EnumAttr<DGPS_DecayKind, "decay">;

// Gain axis: unit gain or a per-token scalar beta.
def DGPS_GainKind : DGPS_Enum<"GainKind", "gain axis", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Scalar", 1, "scalar">]>;
def DGPS_GainAttr : DGPS_EnumAttr<DGPS_GainKind, "gain">;

// Preconditioner axis (docs/math.md §3.3-3.4, §5.2).
def DGPS_PrecondKind : DGPS_Enum<"PrecondKind", "preconditioner axis", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Diagonal", 1, "diagonal">]>;
def DGPS_PrecondAttr : DGPS_EnumAttr<DGPS_PrecondKind, "precond">;

def DGPS_PrecondSide : DGPS_Enum<"PrecondSide", "where the diagonal preconditioner applies", [
    I32EnumAttrCase<"Key", 0, "key">,
    I32EnumAttrCase<"Query", 1, "query">]>;
def DGPS_PrecondSideAttr : DGPS_EnumAttr<DGPS_PrecondSide, "side">;

def DGPS_PrecondSource : DGPS_Enum<"PrecondSource", "rule producing the diagonal preconditioner", [
    I32EnumAttrCase<"EmaSqSquash", 0, "ema_sq_squash">,
    I32EnumAttrCase<"HypergradOgd", 1, "hypergrad_ogd">]>;
def DGPS_PrecondSourceAttr : DGPS_EnumAttr<DGPS_PrecondSource, "source">;

// Solve axis: Hebbian (linear attention) or one delta-rule step.
def DGPS_SolveKind : DGPS_Enum<"SolveKind", "solve axis", [
    I32EnumAttrCase<"Linear", 0, "linear">,
    I32EnumAttrCase<"Delta", 1, "delta">]>;
def DGPS_SolveAttr : DGPS_EnumAttr<DGPS_SolveKind, "solve">;

// OSDN: does the write at token t use d_t or d_{t+1}?
def DGPS_WriteTiming : DGPS_Enum<"WriteTiming", "OSDN write timing", [
    I32EnumAttrCase<"Pre", 0, "pre">,
    I32EnumAttrCase<"Post", 1, "post">]>;
def DGPS_WriteTimingAttr : DGPS_EnumAttr<DGPS_WriteTiming, "timing">;

def DGPS_KernelKind : DGPS_Enum<"KernelKind", "kernels a package contains", [
    I32EnumAttrCase<"ChunkForward", 0, "chunk_forward">,
    I32EnumAttrCase<"Decode", 1, "decode">]>;
def DGPS_KernelKindAttr : DGPS_EnumAttr<DGPS_KernelKind, "kernel">;

class DGPS_Attr<string name, string attrMnemonic> : AttrDef<DGPS_Dialect, name> {
  let mnemonic = attrMnemonic;
}

// ema_sq_squash parameters (docs/math.md §3.3):
//   A_t = exp(g^a_t) A_{t-1} + beta^a_t k̂_t²,  r = ln(A+eps) - c_h,  s = r/(1+|r|),  M = x^(-s).
def DGPS_SquashAttr : DGPS_Attr<"Squash", "squash"> {
  let summary = "parameters of the ema_sq_squash preconditioner source";
  let parameters = (ins "::mlir::FloatAttr":$x, "::mlir::FloatAttr":$eps,
                        "::mlir::FloatAttr":$center_init, "::mlir::BoolAttr":$gate,
                        "::mlir::BoolAttr":$gain);
  let assemblyFormat = "`<` struct(params) `>`";
}

// hypergrad_ogd parameters (docs/math.md §5.2):
//   d_{t+1} = r_t d_t + (eta beta_t / |k_t|²)(1 - beta_t <d_t, k_t²>) k_t², then optional clamp.
def DGPS_HypergradAttr : DGPS_Attr<"Hypergrad", "hypergrad"> {
  let summary = "parameters of the hypergrad_ogd (OSDN) preconditioner source";
  let parameters = (ins "::mlir::FloatAttr":$eta, "::mlir::BoolAttr":$retention,
                        "::dgps::ir::WriteTimingAttr":$timing, "::mlir::FloatAttr":$init,
                        OptionalParameter<"::mlir::FloatAttr">:$clamp_min,
                        OptionalParameter<"::mlir::FloatAttr">:$clamp_max);
  let assemblyFormat = "`<` struct(params) `>`";
}

// Optional tensors of the forward: initial/final memory state, preconditioner state, varlen.
def DGPS_IOAttr : DGPS_Attr<"IO", "io"> {
  let summary = "optional inputs and outputs";
  let parameters = (ins "::mlir::BoolAttr":$initial_state, "::mlir::BoolAttr":$final_state,
                        "::mlir::BoolAttr":$initial_precond_state,
                        "::mlir::BoolAttr":$final_precond_state, "::mlir::BoolAttr":$varlen);
  let assemblyFormat = "`<` struct(params) `>`";
}

// Tile parameters the autotuner may search; each list holds the allowed values.
def DGPS_TuningAttr : DGPS_Attr<"Tuning", "tuning"> {
  let summary = "tuning space of the tile parameters";
  let parameters = (ins "::mlir::DenseI64ArrayAttr":$chunk, "::mlir::DenseI64ArrayAttr":$block_v,
                        "::mlir::DenseI64ArrayAttr":$warps, "::mlir::DenseI64ArrayAttr":$stages);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif
