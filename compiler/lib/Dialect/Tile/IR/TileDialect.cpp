// The tile dialect: registration, the !tile.tile type (parser, printer, verifier, short aliases) and the verifier
// of the tile.* function attributes that carry launch decisions.
#include "dgps/Dialect/Tile/IR/Tile.h"

#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dgps::tile;

#include "dgps/Dialect/Tile/IR/TileDialect.cpp.inc"
#include "dgps/Dialect/Tile/IR/TileEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dgps/Dialect/Tile/IR/TileTypes.cpp.inc"

namespace {

/// Prints `!f32_k_reg_split = !tile.tile<[K], f32, reg, split>` once per module.
struct TileAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Type type, raw_ostream& os) const override {
    auto t = dyn_cast<TileType>(type);
    if (!t) return AliasResult::NoAlias;
    os << t.getElementType() << "_";
    for (Extent e : t.getDims()) os << llvm::StringRef(stringifyExtent(e)).lower();
    os << "_" << stringifySpace(t.getSpace()) << "_" << stringifyLayout(t.getLayout());
    return AliasResult::FinalAlias;
  }
};

}  // namespace

void TileDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dgps/Dialect/Tile/IR/TileTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dgps/Dialect/Tile/IR/TileOps.cpp.inc"
      >();
  addInterfaces<TileAsmInterface>();
}

namespace {

/// tile.min_ctas_per_sm (Tile.h): on a decode function, one count per KeyWidth, each in [1, kMaxCtasPerSm].
LogicalResult verifyMinCtasPerSm(Operation* op, Attribute value) {
  auto role = op->getAttrOfType<StringAttr>(kRoleAttr);
  if (!role || role.getValue() != "decode")
    return op->emitOpError() << kMinCtasPerSmAttr << " belongs on a decode tile function (" << kRoleAttr
                             << " = \"decode\"), the one role whose launch bound the tile IR decides";
  auto counts = dyn_cast<DenseI32ArrayAttr>(value);
  if (!counts || counts.size() != 3)
    return op->emitOpError() << kMinCtasPerSmAttr << " must be array<i32: dense, padded, wide> (CTAs per SM for "
                             << "K = KP <= 128, K < KP <= 128 and KP > 128), got " << value;
  for (int32_t n : counts.asArrayRef())
    if (n < 1 || n > kMaxCtasPerSm)
      return op->emitOpError() << kMinCtasPerSmAttr << " holds " << n << " CTAs per SM; expected 1 to "
                               << kMaxCtasPerSm << " (CTAs of 128 threads that fit one SM)";
  return success();
}

}  // namespace

LogicalResult TileDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  if (attr.getName() == kMinCtasPerSmAttr) return verifyMinCtasPerSm(op, attr.getValue());
  if (attr.getName() == kLaunchFeaturesAttr) return verifyLaunchFeatures(op, attr.getValue());
  if (attr.getName() == kWorkspaceAttr) return verifyWorkspace(op, attr.getValue());
  return success();
}

TileType TileType::with(Space space, Layout layout) const {
  return TileType::get(getContext(), getDims(), getElementType(), space, layout);
}

// !tile.tile<[K, BV], f32, reg, frag>
Type TileType::parse(AsmParser& parser) {
  SmallVector<Extent> dims;
  Type elem;
  if (parser.parseLess() || parser.parseLSquare()) return {};
  auto parseExtent = [&]() -> ParseResult {
    StringRef name;
    llvm::SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&name)) return failure();
    std::optional<Extent> e = symbolizeExtent(name);
    if (!e) return parser.emitError(loc) << "unknown tile extent '" << name << "'; expected K, V, BV or C";
    dims.push_back(*e);
    return success();
  };
  if (failed(parser.parseOptionalRSquare())) {
    if (parser.parseCommaSeparatedList(parseExtent) || parser.parseRSquare()) return {};
  }
  StringRef spaceName, layoutName;
  llvm::SMLoc spaceLoc, layoutLoc;
  if (parser.parseComma() || parser.parseType(elem) || parser.parseComma()) return {};
  spaceLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&spaceName) || parser.parseComma()) return {};
  layoutLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&layoutName) || parser.parseGreater()) return {};
  std::optional<Space> space = symbolizeSpace(spaceName);
  if (!space) {
    parser.emitError(spaceLoc) << "unknown memory space '" << spaceName << "'; expected global, smem or reg";
    return {};
  }
  std::optional<Layout> layout = symbolizeLayout(layoutName);
  if (!layout) {
    parser.emitError(layoutLoc) << "unknown layout '" << layoutName << "'; expected row, split, quad or frag";
    return {};
  }
  return TileType::getChecked([&] { return parser.emitError(spaceLoc); }, parser.getContext(), dims, elem, *space,
                              *layout);
}

void TileType::print(AsmPrinter& p) const {
  p << "<[";
  llvm::interleaveComma(getDims(), p, [&](Extent e) { p << stringifyExtent(e); });
  p << "], " << getElementType() << ", " << stringifySpace(getSpace()) << ", " << stringifyLayout(getLayout())
    << ">";
}

// The table of TileTypes.td: which (space, layout, shape, dtype) combinations exist.
LogicalResult TileType::verify(function_ref<InFlightDiagnostic()> emitError, ArrayRef<Extent> dims, Type elem,
                               Space space, Layout layout) {
  if (!elem.isF32() && !elem.isBF16() && !elem.isF16())
    return emitError() << "tile element type must be f32, bf16 or f16, got " << elem;
  if (dims.empty() || dims.size() > 2) return emitError() << "a tile has rank 1 or 2, got " << dims.size();
  auto is = [&](std::initializer_list<Extent> want) { return llvm::equal(dims, want); };
  switch (space) {
    case Space::global:
      if (layout != Layout::row) return emitError() << "a global tile must have layout row";
      if (!(is({Extent::K}) || is({Extent::V}) || is({Extent::K, Extent::V})))
        return emitError() << "a global view has shape [K], [V] or [K, V]";
      return success();
    case Space::smem:
      if (layout != Layout::row) return emitError() << "a shared tile must have layout row";
      // [K] f32 vectors (decode); over the rows of one chunk: [C, K] of any dtype, [C] and [C, C] f32.
      if (is({Extent::C, Extent::K})) return success();
      if ((is({Extent::K}) || is({Extent::C}) || is({Extent::C, Extent::C})) && elem.isF32()) return success();
      return emitError() << "a shared tile is [K], [C] or [C, C] f32, or [C, K]";
    case Space::reg:
      if (!elem.isF32()) return emitError() << "a register tile holds f32, got " << elem;
      if (layout == Layout::split && is({Extent::K})) return success();
      if (layout == Layout::quad && is({Extent::BV})) return success();
      if (layout == Layout::frag && is({Extent::K, Extent::BV})) return success();
      return emitError() << "register layout " << stringifyLayout(layout)
                         << " needs shape [K] (split), [BV] (quad) or [K, BV] (frag)";
  }
  return emitError() << "unknown memory space";
}
