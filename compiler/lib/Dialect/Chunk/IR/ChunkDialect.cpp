// The chunk dialect: registration, the !chunk.tensor type (parser, printer, short aliases) and
// the #chunk.tile / #chunk.plan attributes.
#include "dgps/Dialect/Chunk/IR/Chunk.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dgps::chunk;

#include "dgps/Dialect/Chunk/IR/ChunkDialect.cpp.inc"
#include "dgps/Dialect/Chunk/IR/ChunkEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dgps/Dialect/Chunk/IR/ChunkTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dgps/Dialect/Chunk/IR/ChunkAttrs.cpp.inc"

namespace {

/// Prints `!f32_bthk = !chunk.tensor<[B, T, H, K], f32>` once at the top of a module, so op
/// signatures stay short. Device-memory buffers get a `_global` suffix.
struct ChunkAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Type type, raw_ostream& os) const override {
    auto t = dyn_cast<ChunkTensorType>(type);
    if (!t) return AliasResult::NoAlias;
    os << t.getElementType() << "_";
    for (Dim d : t.getDims()) os << llvm::StringRef(stringifyDim(d)).lower();
    if (t.getGlobal()) os << "_global";
    return AliasResult::FinalAlias;
  }
};

}  // namespace

void ChunkDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dgps/Dialect/Chunk/IR/ChunkTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dgps/Dialect/Chunk/IR/ChunkAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dgps/Dialect/Chunk/IR/ChunkOps.cpp.inc"
      >();
  addInterfaces<ChunkAsmInterface>();
}

namespace dgps::chunk {

ChunkTensorType tensorType(MLIRContext* ctx, ArrayRef<Dim> dims, Type elem, bool global) {
  return ChunkTensorType::get(ctx, dims, elem, global);
}

ChunkTensorType ChunkTensorType::withGlobal(bool isGlobal) const {
  return ChunkTensorType::get(getContext(), getDims(), getElementType(), isGlobal);
}

bool ChunkTensorType::hasDim(Dim d) const { return llvm::is_contained(getDims(), d); }

// !chunk.tensor<[B, T, H, K], f32> or !chunk.tensor<[B, T, HV, K], bf16, global>
Type ChunkTensorType::parse(AsmParser& parser) {
  SmallVector<Dim> dims;
  Type elem;
  if (parser.parseLess() || parser.parseLSquare()) return {};
  auto parseDim = [&]() -> ParseResult {
    StringRef name;
    llvm::SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&name)) return failure();
    std::optional<Dim> d = symbolizeDim(name);
    if (!d)
      return parser.emitError(loc) << "unknown dimension '" << name
                                   << "'; expected one of B, T, H, HV, K, V, C, NT, N";
    dims.push_back(*d);
    return success();
  };
  if (parser.parseCommaSeparatedList(parseDim) || parser.parseRSquare() || parser.parseComma() ||
      parser.parseType(elem))
    return {};
  bool global = false;
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("global")) return {};
    global = true;
  }
  if (parser.parseGreater()) return {};
  return ChunkTensorType::get(parser.getContext(), dims, elem, global);
}

void ChunkTensorType::print(AsmPrinter& printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims(), printer, [&](Dim d) { printer << stringifyDim(d); });
  printer << "], " << getElementType();
  if (getGlobal()) printer << ", global";
  printer << ">";
}

}  // namespace dgps::chunk
