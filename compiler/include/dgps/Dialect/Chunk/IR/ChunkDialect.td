//===- ChunkDialect.td - the chunkwise WY dialect --------------*- tablegen -*-===//
//
// The `chunk` dialect describes the chunkwise-parallel (WY / UT transform) algorithm of docs/math.md §4
// over chunks of C tokens, and the preconditioner scans of §5, as a dataflow graph of whole-tensor
// stages in FLA's layout. The read key (k̂, used in the prediction S^T k) and the write key
// (k̃, used in the outer-product write) are separate SSA values on every op that takes keys; a
// symmetric rule passes the same value twice.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_CHUNK_IR_DIALECT_TD
#define DGPS_DIALECT_CHUNK_IR_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Chunk_Dialect : Dialect {
  let name = "chunk";
  let cppNamespace = "::dgps::chunk";
  let summary = "Chunkwise WY recurrence stages with explicit read and write keys";
  let description = [{
    Values are whole tensors `!chunk.tensor<[dims], elem>` with symbolic dimensions
    (B batch, T tokens, H key heads, HV value heads, K key dim, V value dim, C chunk-local
    column, NT chunk index, N sequence, TQ query tokens). With several Householder steps per
    token (function attribute `chunk.householder_steps` = n_h > 1, Gated DeltaProduct) T counts
    the T·n_h steps the chunkwise algorithm runs over and TQ the tokens, which own one query,
    gate and output each (chunk.spread_steps, chunk.gather_steps); TQ appears in no other IR. A tensor marked `global` is a device-memory buffer that
    crosses a kernel boundary (set by --chunk-partition-kernels). Ops are grouped into
    `chunk.kernel` regions by the partitioning pass; the function attribute `chunk.chunk_size`
    gives C.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasCanonicalizer = 0;
  // Verifies the function attributes chunk.chunk_size, chunk.gva_ratio, chunk.key_dims,
  // chunk.value_dims, chunk.tuning and chunk.plan wherever they appear (ChunkDialect.cpp).
  let hasOperationAttrVerify = 1;
}

// Symbolic tensor dimensions (docs/math.md §1).
def Chunk_Dim : I32EnumAttr<"Dim", "symbolic tensor dimension", [
    I32EnumAttrCase<"B", 0>, I32EnumAttrCase<"T", 1>, I32EnumAttrCase<"H", 2>,
    I32EnumAttrCase<"HV", 3>, I32EnumAttrCase<"K", 4>, I32EnumAttrCase<"V", 5>,
    I32EnumAttrCase<"C", 6>, I32EnumAttrCase<"NT", 7>, I32EnumAttrCase<"N", 8>,
    // NS: segment slots per batch row of a sequence-parallel state pass (ChunkSegmentOps.td).
    I32EnumAttrCase<"NS", 9>,
    // TQ: tokens when T counts Householder steps (ChunkStepOps.td).
    I32EnumAttrCase<"TQ", 10>]> {
  let cppNamespace = "::dgps::chunk";
  let genSpecializedAttr = 0;
}

def Chunk_TensorType : TypeDef<Chunk_Dialect, "ChunkTensor"> {
  let mnemonic = "tensor";
  let summary = "a whole tensor with symbolic dims, an element type and a memory flag";
  let description = [{
    `!chunk.tensor<[B, T, H, K], f32>` or, for a device-memory buffer between kernels,
    `!chunk.tensor<[B, T, HV, K], bf16, global>`. The element type is the storage type a kernel
    would use (the float64 executor ignores it); bf16 stands for the spec's input dtype.
  }];
  let parameters = (ins ArrayRefParameter<"::dgps::chunk::Dim">:$dims,
                        "::mlir::Type":$elementType,
                        DefaultValuedParameter<"bool", "false">:$global);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// The same tensor with the memory flag set or cleared.
    ChunkTensorType withGlobal(bool isGlobal) const;
    bool hasDim(::dgps::chunk::Dim d) const;
  }];
}

// The tile configuration a kernel is generated for (one point of the spec's tuning space).
def Chunk_TileAttr : AttrDef<Chunk_Dialect, "Tile"> {
  let mnemonic = "tile";
  let summary = "tile parameters of a kernel: chunk size, value block, warps, pipeline stages";
  let parameters = (ins "int64_t":$chunk, "int64_t":$block_v, "int64_t":$warps, "int64_t":$stages);
  let assemblyFormat = "`<` struct(params) `>`";
  // Each parameter must be a value the spec language allows for tuning.<name>.
  let genVerifyDecl = 1;
}

// The cost estimate of a kernel plan (per token and value head; docs/math.md §4.4/§4.5 counting).
def Chunk_PlanAttr : AttrDef<Chunk_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "estimated device-memory bytes and FLOPs per token-head of a kernel plan";
  let parameters = (ins "int64_t":$bytes_per_token_head, "int64_t":$flops_per_token_head,
                        "int64_t":$key_dim, "int64_t":$value_dim);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif
