// The chunk dialect: registration, the !chunk.tensor type (parser, printer, short aliases),
// the #chunk.tile / #chunk.plan attributes and the verifier of the chunk.* function attributes.
#include "dgps/Dialect/Chunk/IR/Chunk.h"

#include "../../SpecFieldCheck.h"
#include "dgps/Dialect/DGPS/IR/DGPS.h"

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
  auto parseDim = [&]() -> mlir::ParseResult {
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

//===----------------------------------------------------------------------===//
// Verification of the attributes that carry spec values
//===----------------------------------------------------------------------===//

namespace {

using dgps::ir::FieldProblem;

/// The spec field behind each integer the chunk dialect carries, and how to store it in a Spec.
struct SpecField {
  const char* path;
  dgps::ir::StoreField store;
};

SpecField tuningField(llvm::StringRef name) {
  if (name == "block_v") return {"tuning.block_v", [](dgps::Spec& s, const std::vector<int>& v) { s.tuning.block_v = v; }};
  if (name == "warps") return {"tuning.warps", [](dgps::Spec& s, const std::vector<int>& v) { s.tuning.warps = v; }};
  if (name == "stages") return {"tuning.stages", [](dgps::Spec& s, const std::vector<int>& v) { s.tuning.stages = v; }};
  return {"tuning.chunk", [](dgps::Spec& s, const std::vector<int>& v) { s.tuning.chunk = v; }};
}

/// A scalar attribute checked against a list rule: "a list from {16, 32, 64}" reads "a value from ...".
std::string scalarExpected(std::string expected) {
  const std::string list = "a list from ";
  if (expected.rfind(list, 0) == 0) expected = "a value from " + expected.substr(list.size());
  return expected;
}

/// "<what>: <message> [expected: ...]" for the first problem of `values`, or success.
LogicalResult checkValues(llvm::function_ref<InFlightDiagnostic()> emitError, const std::string& what,
                          ArrayRef<int64_t> values, const SpecField& field, bool scalar) {
  std::optional<FieldProblem> p = dgps::ir::checkSpecInts(values, field.path, field.store);
  if (!p) return success();
  std::string element = scalar ? std::string() : p->element;
  return emitError() << what << element << ": " << p->message << " (the spec language's rule for " << field.path
                     << ") [expected: " << (scalar ? scalarExpected(p->expected) : p->expected) << "]";
}

/// An i64 integer attribute (IntegerAttr::getInt asserts on wider types).
std::optional<int64_t> asI64(Attribute a) {
  auto i = dyn_cast<IntegerAttr>(a);
  if (!i || !i.getType().isSignlessInteger(64)) return std::nullopt;
  return i.getInt();
}

}  // namespace

namespace dgps::chunk {

LogicalResult TileAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError, int64_t chunk, int64_t blockV,
                               int64_t warps, int64_t stages) {
  const std::pair<const char*, int64_t> params[] = {
      {"chunk", chunk}, {"block_v", blockV}, {"warps", warps}, {"stages", stages}};
  for (auto [name, value] : params)
    if (failed(checkValues(emitError, std::string("#chunk.tile ") + name + " = " + std::to_string(value),
                           {value}, tuningField(name), /*scalar=*/true)))
      return failure();
  return success();
}

LogicalResult ChunkDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  const std::string name = attr.getName().getValue().str();
  Attribute value = attr.getValue();
  auto emitError = [&]() { return op->emitOpError() << "attribute '" << name << "'"; };
  auto check = [&](ArrayRef<int64_t> values, const SpecField& field, bool scalar) {
    return checkValues([&]() { return op->emitOpError(); }, "attribute '" + name + "'", values, field, scalar);
  };
  if (name == kChunkSizeAttr || name == kGvaAttr) {
    std::optional<int64_t> v = asI64(value);
    if (!v) return emitError() << " must be an i64 integer, got " << value;
    if (name == kChunkSizeAttr) return check({*v}, tuningField("chunk"), true);
    return check({*v}, {"heads.gva_ratio", [](Spec& s, const std::vector<int>& x) { s.gva_ratio = x[0]; }}, true);
  }
  if (name == kKeyDimsAttr || name == kValueDimsAttr) {
    auto dims = dyn_cast<DenseI64ArrayAttr>(value);
    if (!dims) return emitError() << " must be an array<i64: ...> of head dims, got " << value;
    if (name == kKeyDimsAttr)
      return check(dims.asArrayRef(), {"dims.key", [](Spec& s, const std::vector<int>& x) { s.key_dims = x; }}, false);
    return check(dims.asArrayRef(), {"dims.value", [](Spec& s, const std::vector<int>& x) { s.value_dims = x; }},
                 false);
  }
  if (name == kTuningAttr) {
    auto tuning = dyn_cast<dgps::ir::TuningAttr>(value);
    if (!tuning) return emitError() << " must be a #dgps.tuning<...>, got " << value;
    const std::pair<const char*, DenseI64ArrayAttr> lists[] = {{"chunk", tuning.getChunk()},
                                                               {"block_v", tuning.getBlockV()},
                                                               {"warps", tuning.getWarps()},
                                                               {"stages", tuning.getStages()}};
    for (auto [param, list] : lists)
      if (failed(checkValues([&]() { return op->emitOpError(); }, "attribute '" + name + "' " + param,
                             list.asArrayRef(), tuningField(param), false)))
        return failure();
    return success();
  }
  if (name == kHouseholderStepsAttr) {
    std::optional<int64_t> v = asI64(value);
    if (!v) return emitError() << " must be an i64 integer, got " << value;
    if (*v < 2 || *v > dgps::kMaxHouseholderSteps)
      return emitError() << " must be in 2.." << dgps::kMaxHouseholderSteps
                         << " (Householder steps per token; one step is expressed by leaving it out), got " << *v;
    return success();
  }
  if (name == kPlanAttr && !isa<PlanAttr>(value)) return emitError() << " must be a #chunk.plan<...>, got " << value;
  if (name == kSegmentChunksAttr) {
    std::optional<int64_t> v = asI64(value);
    if (!v || *v < 1) return emitError() << " must be an i64 segment length in chunks >= 1, got " << value;
    return success();
  }
  return success();  // other chunk.* names are free for later passes
}

}  // namespace dgps::chunk
