// The tile emitter (TileEmitter.h): tile IR of the decode role -> CUDA calling runtime/device/dgps/tile.
#include "dgps/Emit/TileEmitter.h"

#include <map>
#include <sstream>

#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Emit/Package.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dgps::tile;

namespace dgps {
namespace {

/// Shared [KP] vectors the decode launch provides (LaunchContract.h decodeLaunch).
constexpr int kSmemVectors = 4;

/// A DecodeArgs field: whether it holds the 16-bit input dtype and whether the kernel may write it.
struct Field {
  bool act;
  bool writable;
};
const std::map<std::string, Field>& decodeFields() {
  static const std::map<std::string, Field> f = {
      {"q", {true, false}},           {"k", {true, false}},          {"v", {true, false}},
      {"o", {true, true}},            {"g", {false, false}},         {"beta", {false, false}},
      {"precond_g", {false, false}},  {"precond_beta", {false, false}}, {"precond_center", {false, false}},
      {"state", {false, true}},       {"precond_state", {false, true}}};
  return f;
}

/// Row offset (in elements) of a view's or scalar's index, for a tensor whose trailing extent is `inner`; with a
/// Householder `step` j the tensor has DGPS_ROW_STEPS rows per token ([B, n_h, ...]) and the row is step j's.
std::string indexExpr(Index at, const std::string& inner, std::optional<uint64_t> step = std::nullopt) {
  const std::string b = step ? "(b * dgps::cfg::ROW_STEPS + " + std::to_string(*step) + ")" : "b";
  std::string row;
  switch (at) {
    case Index::none: return "";
    case Index::h: row = "h"; break;
    case Index::bh: row = "(" + b + " * H + h)"; break;
    case Index::bhv: row = "(" + b + " * HV + hv)"; break;
    case Index::bh_first: row = "(" + b + " * HV + h * ratio)"; break;
  }
  return inner.empty() ? row : row + " * " + inner;
}

class Emitter {
 public:
  explicit Emitter(std::ostringstream& os) : os_(os) {}

  LogicalResult block(Block& body, int indent) {
    for (Operation& op : body)
      if (failed(emit(op, indent))) return failure();
    return success();
  }

 private:
  std::string name(Value v) {
    auto it = names_.find(v.getAsOpaquePointer());
    if (it != names_.end()) return it->second;
    std::string n = "t" + std::to_string(names_.size());
    names_[v.getAsOpaquePointer()] = n;
    return n;
  }
  /// "a, b, c" for the values' C++ names.
  template <class Range>
  std::string names(Range values) {
    std::string s;
    for (Value v : values) s += (s.empty() ? "" : ", ") + name(v);
    return s;
  }
  std::string pad(int indent) { return std::string(2 * indent, ' '); }

  /// The C++ type of a register tile.
  static std::string cppType(Type t) {
    auto tt = cast<TileType>(t);
    switch (tt.getLayout()) {
      case Layout::split: return "SplitK";
      case Layout::quad: return "Quad";
      case Layout::frag: return "Frag";
      default: return "?";
    }
  }

  LogicalResult view(ViewOp op, int indent) {
    if (printedViews_.count(op)) return success();  // printed ahead of its first read (readAhead())
    if (op->getParentOfType<ForValueTilesOp>() && !readAhead_ &&
        llvm::none_of(op->getUsers(), [](Operation* u) { return isa<StoreOp>(u); }))
      return success();  // only read: printed inside the read-ahead blocks (loop())
    auto it = decodeFields().find(op.getName().str());
    if (it == decodeFields().end())
      return op.emitOpError() << "'" << op.getName() << "' is not a tensor of the decode arguments (abi.h DecodeArgs)";
    TileType t = op.getType();
    if (it->second.act != !t.getElementType().isF32())
      return op.emitOpError() << "'" << op.getName() << "' has element type "
                              << (it->second.act ? "of the input dtype (bf16)" : "f32");
    const bool hasV = llvm::is_contained(t.getDims(), Extent::V);
    if (hasV && !op->getParentOfType<ForValueTilesOp>())
      return op.emitOpError("a view over V must be inside tile.for_value_tiles (its window is the loop's)");
    const std::string inner = t.getRank() == 2 ? "(int64_t)K * V" : hasV ? "V" : "K";
    std::string ptr = it->second.act ? "uint16_t" : "float";
    bool writable = false;
    for (Operation* user : op->getUsers())
      if (isa<StoreOp>(user)) writable = true;
    if (writable && !it->second.writable) return op.emitOpError() << "'" << op.getName() << "' is read-only";
    const std::string cv = writable ? "" : "const ";
    os_ << pad(indent) << cv << ptr << "* const " << name(op) << " = ";
    if (it->second.act)
      os_ << "static_cast<" << cv << "uint16_t*>(a." << op.getName().str() << ")";
    else
      os_ << "a." << op.getName().str();
    os_ << " + " << indexExpr(op.getIndex(), inner, op.getStep());
    // A view over V is read and written at the CTA's value-tile window.
    if (hasV) os_ << " + col0";
    os_ << ";\n";
    return success();
  }

  /// The C++ expression of a scalar read, or failure (with an error at the op).
  FailureOr<std::string> loadScalarExpr(LoadScalarOp op) {
    auto it = decodeFields().find(op.getName().str());
    const bool isArg = op.getIndex() == Index::none;
    if (isArg ? op.getName() != "scale" : (it == decodeFields().end() || it->second.act))
      return op.emitOpError() << "'" << op.getName() << "' is not an f32 " << (isArg ? "scalar" : "tensor")
                              << " of the decode arguments";
    const std::string field = "a." + op.getName().str();
    if (isArg) return field;
    const std::string elem = field + "[" + indexExpr(op.getIndex(), "", op.getStep()) + "]";
    if (op.getAbsent())
      return "(" + field + " != nullptr ? " + elem + " : " + cudaFloatLiteral(op.getAbsent()->convertToDouble()) + ")";
    return elem;
  }

  LogicalResult loadScalar(LoadScalarOp op, int indent) {
    if (hoisted_.count(op)) return success();  // read ahead (loop())
    FailureOr<std::string> e = loadScalarExpr(op);
    if (failed(e)) return failure();
    os_ << pad(indent) << "const float " << name(op) << " = " << *e << ";\n";
    return success();
  }

  /// Valid extents of a view's window: rows K, columns V − col0.
  static std::string validCols() { return "V - col0"; }

  /// The C++ expression of a tile read, or failure (with an error at the op).
  FailureOr<std::string> loadExpr(LoadOp op) {
    const std::string src = name(op.getView());
    switch (op.getType().getLayout()) {
      case Layout::split: return "t::load_split<KP, NT, Codec>(" + src + ", K)";
      case Layout::quad: return "t::load_quad<BV, NT, Codec>(" + src + ", " + validCols() + ")";
      case Layout::frag: return "t::load_frag<KP, BV, NT>(" + src + ", V, K, " + validCols() + ")";
      default: return op.emitOpError("cannot load into this layout");
    }
  }

  LogicalResult load(LoadOp op, int indent) {
    if (hoisted_.count(op)) return success();  // read ahead (loop())
    FailureOr<std::string> e = loadExpr(op);
    if (failed(e)) return failure();
    os_ << pad(indent) << "const " << cppType(op.getType()) << " " << name(op) << " = " << *e << ";\n";
    return success();
  }

  LogicalResult store(StoreOp op, int indent) {
    const std::string val = name(op.getValue()), dst = name(op.getView());
    os_ << pad(indent);
    switch (cast<TileType>(op.getValue().getType()).getLayout()) {
      case Layout::split: os_ << "t::store_split(" << val << ", " << dst << ", K)"; break;
      case Layout::quad: os_ << "t::store_quad<BV, NT, Codec>(" << val << ", " << dst << ", " << validCols() << ")"; break;
      case Layout::frag: os_ << "t::store_frag(" << val << ", " << dst << ", V, K, " << validCols() << ")"; break;
      default: return op.emitOpError("cannot store this layout");
    }
    os_ << ";\n";
    return success();
  }

  LogicalResult copy(CopyOp op, int indent) {
    if (smemUsed_ == kSmemVectors)
      return op.emitOpError() << "needs more than " << kSmemVectors << " shared [K] vectors (decode launch geometry)";
    os_ << pad(indent) << "float* const " << name(op) << " = smem + " << smemUsed_++ << " * KP;\n";
    os_ << pad(indent) << "t::to_smem(" << name(op.getValue()) << ", " << name(op) << ");\n";
    return success();
  }

  std::string typeOf(Value v) { return v.getType().isF32() ? "float" : cppType(v.getType()); }

  LogicalResult call(Operation& op, const char* fn, int indent) {
    os_ << pad(indent) << "const " << typeOf(op.getResult(0)) << " " << name(op.getResult(0)) << " = t::" << fn << "(";
    os_ << names(op.getOperands()) << ");\n";
    return success();
  }

  static bool isKeyHead(Operation* op) {
    auto fn = op->getParentOfType<func::FuncOp>();
    return fn->getAttrOfType<StringAttr>(kGridAttr).getValue() == stringifyGrid(Grid::key_head);
  }

  /// The body's global reads (tile.load of a view, tile.load_scalar), in order; `frags`: only the [K, BV]
  /// fragment loads (the state), or only the others.
  static SmallVector<Operation*> reads(ForValueTilesOp loop, bool frags) {
    SmallVector<Operation*> r;
    for (Operation& op : loop.getBody().front()) {
      const bool isFrag = isa<LoadOp>(op) && cast<LoadOp>(op).getType().getLayout() == Layout::frag;
      if ((isa<LoadOp>(op) && op.getOperand(0).getDefiningOp<ViewOp>()) || isa<LoadScalarOp>(op))
        if (isFrag == frags) r.push_back(&op);
    }
    return r;
  }

  /// `{ hv, col0 of tile `tileExpr`; the views; dst = read; ... }`: the reads of one tile assigned to the
  /// variables `suffix`-named after their values (declared by the caller).
  LogicalResult readBlock(ArrayRef<Operation*> ops, const std::string& tileExpr, const std::string& suffix,
                          int indent) {
    os_ << pad(indent) << "{\n";
    os_ << pad(indent + 1) << "const int64_t hv = hv0 + (" << tileExpr << ") / VT;\n";
    os_ << pad(indent + 1) << "const int col0 = (int)(vt0 + (" << tileExpr << ") % VT) * BV;\n";
    os_ << pad(indent + 1) << "(void)hv;\n" << pad(indent + 1) << "(void)col0;\n";
    readAhead_ = true;
    for (Operation* op : ops) {
      std::string expr;
      if (auto l = dyn_cast<LoadOp>(op)) {
        if (failed(view(l.getView().getDefiningOp<ViewOp>(), indent + 1))) return failure();
        FailureOr<std::string> e = loadExpr(l);
        if (failed(e)) return failure();
        expr = *e;
      } else {
        FailureOr<std::string> e = loadScalarExpr(cast<LoadScalarOp>(op));
        if (failed(e)) return failure();
        expr = *e;
      }
      os_ << pad(indent + 1) << name(op->getResult(0)) << suffix << " = " << expr << ";\n";
    }
    readAhead_ = false;
    os_ << pad(indent) << "}\n";
    return success();
  }

  void declare(ArrayRef<Operation*> ops, const std::string& suffix, int indent) {
    for (Operation* op : ops)
      os_ << pad(indent) << typeOf(op->getResult(0)) << " " << name(op->getResult(0)) << suffix << ";\n";
  }

 public:
  /// The first tile's reads of every tile.for_value_tiles in `body`, issued before anything else
  /// (TileOps.td: the loop's reads go ahead; the verifier made that legal), then the prologue's own reads.
  LogicalResult readAhead(Block& body, int indent) {
    for (auto loop : body.getOps<ForValueTilesOp>()) {
      SmallVector<Operation*> all = reads(loop, true);
      all.append(reads(loop, false));
      if (all.empty()) continue;
      os_ << pad(indent) << "// The first value tile's reads, issued before the prologue (tile.for_value_tiles).\n";
      declare(all, "", indent);
      if (failed(readBlock(all, "0", "", indent))) return failure();
      for (Operation* op : all) hoisted_.insert(op);
    }
    return prologueReads(body, indent);
  }

 private:
  /// The tensor a prologue read reads (its view's or its scalar's name).
  static StringRef tensorOf(Operation* op) {
    if (auto l = dyn_cast<LoadOp>(op)) return l.getView().getDefiningOp<ViewOp>().getName();
    return cast<LoadScalarOp>(op).getName();
  }

  /// The prologue's global reads (k, q, the preconditioner state and its gates, ...; tile.load of a view and
  /// tile.load_scalar at the function's top level), issued together right after the first tile's: a decode
  /// is bound by the latency of dependent round trips before the state stream starts, and printed where the
  /// IR has them a read would wait for the reductions before it (q behind k's l2 norm, the preconditioner
  /// state behind both). A read moves only ahead of maths and barriers, never ahead of a store to its tensor:
  /// a read after such a store stays in place.
  LogicalResult prologueReads(Block& body, int indent) {
    llvm::StringSet<> stored;
    SmallVector<Operation*> early;
    for (Operation& op : body) {
      if (auto st = dyn_cast<StoreOp>(op)) {
        if (auto v = st.getView().getDefiningOp<ViewOp>()) stored.insert(v.getName());
        continue;
      }
      const bool viewLoad = isa<LoadOp>(op) && op.getOperand(0).getDefiningOp<ViewOp>();
      if ((viewLoad || isa<LoadScalarOp>(op)) && !stored.contains(tensorOf(&op))) early.push_back(&op);
    }
    if (early.empty()) return success();
    os_ << pad(indent) << "// The prologue's reads, issued before its maths and reductions.\n";
    for (Operation* op : early) {
      if (auto l = dyn_cast<LoadOp>(op)) {
        auto v = l.getView().getDefiningOp<ViewOp>();
        if (!printedViews_.count(v)) {
          if (failed(view(v, indent))) return failure();
          printedViews_.insert(v);
        }
        FailureOr<std::string> e = loadExpr(l);
        if (failed(e)) return failure();
        os_ << pad(indent) << "const " << cppType(l.getType()) << " " << name(l) << " = " << *e << ";\n";
      } else {
        FailureOr<std::string> e = loadScalarExpr(cast<LoadScalarOp>(op));
        if (failed(e)) return failure();
        os_ << pad(indent) << "const float " << name(op->getResult(0)) << " = " << *e << ";\n";
      }
      hoisted_.insert(op);
    }
    return success();
  }

 private:
  LogicalResult loop(ForValueTilesOp op, int indent) {
    const bool keyHead = isKeyHead(op);
    os_ << pad(indent) << "for (int it = 0; it < ntile; ++it) {\n";
    os_ << pad(indent + 1) << "const int64_t hv = hv0 + it / VT;\n";
    os_ << pad(indent + 1) << "const int col0 = (int)(vt0 + it % VT) * BV;\n";
    SmallVector<Operation*> frags = reads(op, true), small = reads(op, false);
    if (keyHead) {
      // The next tile's fragments stream in while this one computes; its small reads wait for its start.
      declare(frags, "_next", indent + 1);
      if (!frags.empty()) {
        os_ << pad(indent + 1) << "if (it + 1 < ntile)\n";
        if (failed(readBlock(frags, "it + 1", "_next", indent + 1))) return failure();
      }
      if (!small.empty()) {
        os_ << pad(indent + 1) << "if (it > 0)\n";
        if (failed(readBlock(small, "it", "", indent + 1))) return failure();
      }
    }
    if (failed(block(op.getBody().front(), indent + 1))) return failure();
    if (keyHead) {
      for (Operation* f : frags)
        os_ << pad(indent + 1) << "if (it + 1 < ntile) " << name(f->getResult(0)) << " = " << name(f->getResult(0))
            << "_next;\n";
      // Iterations reuse the shared vectors and the reduction scratch.
      os_ << pad(indent + 1) << "dgps::dev::sync_threads();\n";
    }
    os_ << pad(indent) << "}\n";
    return success();
  }

  LogicalResult emit(Operation& op, int indent) {
    return llvm::TypeSwitch<Operation*, LogicalResult>(&op)
        .Case<ViewOp>([&](auto o) { return view(o, indent); })
        .Case<LoadScalarOp>([&](auto o) { return loadScalar(o, indent); })
        .Case<LoadOp>([&](auto o) { return load(o, indent); })
        .Case<StoreOp>([&](auto o) { return store(o, indent); })
        .Case<CopyOp>([&](auto o) { return copy(o, indent); })
        .Case<BarrierOp>([&](auto) {
          os_ << pad(indent) << "dgps::dev::sync_threads();\n";
          return success();
        })
        .Case<ConstantOp>([&](auto o) {
          os_ << pad(indent) << "const float " << name(o) << " = " << cudaFloatLiteral(o.getValue().convertToDouble())
              << ";\n";
          return success();
        })
        .Case<AddOp>([&](auto o) { return call(op, "add", indent); })
        .Case<SubOp>([&](auto o) { return call(op, "sub", indent); })
        .Case<MulOp>([&](auto o) { return call(op, "mul", indent); })
        .Case<DivOp>([&](auto o) { return call(op, "div", indent); })
        .Case<MaxOp>([&](auto o) { return call(op, "max", indent); })
        .Case<MinOp>([&](auto o) { return call(op, "min", indent); })
        .Case<ExpOp>([&](auto o) { return call(op, "exp", indent); })
        .Case<Exp2Op>([&](auto o) { return call(op, "exp2", indent); })
        .Case<LogOp>([&](auto o) { return call(op, "log", indent); })
        .Case<AbsOp>([&](auto o) { return call(op, "abs", indent); })
        .Case<RsqrtOp>([&](auto o) { return call(op, "rsqrt", indent); })
        .Case<SelectPositiveOp>([&](auto o) { return call(op, "select_positive", indent); })
        .Case<ReduceSumOp>([&](ReduceSumOp o) {
          if (o.getXs().size() == 1) {
            os_ << pad(indent) << "const float " << name(o.getSums()[0]) << " = t::reduce_sum(" << name(o.getXs()[0])
                << ", scalars);\n";
            return success();
          }
          // two sums, one exchange (tile/reduce.cuh)
          os_ << pad(indent) << "float " << names(o.getSums()) << ";\n";
          os_ << pad(indent) << "t::reduce_sum(" << names(o.getXs()) << ", scalars, " << names(o.getSums()) << ");\n";
          return success();
        })
        .Case<RowScaleOp>([&](auto o) { return call(op, "row_scale", indent); })
        .Case<OuterAddOp>([&](auto o) { return call(op, "outer_add", indent); })
        .Case<ContractOp>([&](ContractOp o) {
          os_ << pad(indent) << "Quad ";
          os_ << names(o.getResults()) << ";\n" << pad(indent) << "t::contract(" << name(o.getTile());
          for (Value v : o.getVectors()) os_ << ", " << name(v);
          os_ << ", scratch";
          for (Value v : o.getResults()) os_ << ", " << name(v);
          os_ << ");\n";
          return success();
        })
        .Case<ForValueTilesOp>([&](auto o) { return loop(o, indent); })
        .Case<func::ReturnOp>([&](auto) { return success(); })
        .Default([&](Operation* o) { return o->emitOpError("has no tile emitter"); });
  }

  std::ostringstream& os_;
  std::map<const void*, std::string> names_;
  int smemUsed_ = 0;
  llvm::DenseSet<Operation*> hoisted_;  ///< reads printed ahead of their place (readAhead)
  llvm::DenseSet<Operation*> printedViews_;  ///< prologue views printed ahead (prologueReads)
  bool readAhead_ = false;              ///< printing a read-ahead block (views print there)
};

/// `__launch_bounds__(128, n) ` for the function's tile.min_ctas_per_sm (Tile.h; 128 threads: LaunchContract.h
/// decodeLaunch's block), n picked by the key width at JIT time (a partial last value tile of `valueTile` columns
/// counts as padded: its masks cost registers as the pad channels' do, and 4 CTAs spilled PKDA's decode at K = 128,
/// V = 120); empty without the attribute.
FailureOr<std::string> launchBounds(func::FuncOp fn, int64_t valueTile) {
  if (!fn->hasAttr(kMinCtasPerSmAttr)) return std::string();
  auto counts = fn->getAttrOfType<DenseI32ArrayAttr>(kMinCtasPerSmAttr);
  if (!counts || counts.size() != 3)  // the dialect verifies it; this guards an emitter run on unverified IR
    return fn.emitOpError() << kMinCtasPerSmAttr << " must be array<i32: dense, padded, wide>";
  auto n = [&](KeyWidth w) { return std::to_string(counts[static_cast<int>(w)]); };
  return "__launch_bounds__(128, dgps::cfg::KP > 128 ? " + n(KeyWidth::wide) +
         " : dgps::cfg::K < dgps::cfg::KP || dgps::cfg::V % " + std::to_string(valueTile) + " != 0 ? " +
         n(KeyWidth::padded) + " : " + n(KeyWidth::dense) + ") ";
}

}  // namespace

FailureOr<std::string> emitTileKernel(func::FuncOp fn, const std::string& symbol) {
  auto role = fn->getAttrOfType<StringAttr>(kRoleAttr);
  auto grid = fn->getAttrOfType<StringAttr>(kGridAttr);
  auto bv = fn->getAttrOfType<IntegerAttr>(kValueTileAttr);
  if (!role || role.getValue() != "decode" || !grid || !symbolizeGrid(grid.getValue()) || !bv)
    return fn.emitOpError() << "is not a decode tile function (needs " << kRoleAttr << " = \"decode\", " << kGridAttr
                            << " and " << kValueTileAttr << ")";
  if (bv.getInt() != 32)
    return fn.emitOpError() << kValueTileAttr << " must be 32, the decode launch geometry's value tile";
  const bool keyHead = *symbolizeGrid(grid.getValue()) == Grid::key_head;
  FailureOr<std::string> bounds = launchBounds(fn, bv.getInt());
  if (failed(bounds)) return failure();
  std::ostringstream os;
  os << "extern \"C\" __global__ void " << *bounds << symbol << "(dgps::DecodeArgs a) {\n";
  os << "  // Generated from tile IR (" << fn.getSymName().str() << ", grid " << grid.getValue().str() << ").\n";
  os << "  namespace t = dgps::tile;\n";
  os << "  using Codec = dgps::dev::Act<dgps::cfg::kInputF16>;\n";
  os << "  constexpr int K = dgps::cfg::K, V = dgps::cfg::V, KP = dgps::cfg::KP, BV = 32, NT = 128;\n";
  os << "  constexpr int VT = (V + BV - 1) / BV;\n";
  os << "  using SplitK = t::SplitVec<KP, NT>;\n  using Frag = t::RowFrag<KP, BV, NT>;\n  using Quad = t::Quad<BV, NT>;\n";
  os << "  (void)sizeof(SplitK);\n  (void)sizeof(Frag);\n";
  os << "  // Shared memory: the launch contract's layout (printed above): 4 [KP] vectors, [4][2][BV] scratch, 32 "
        "scalars.\n";
  os << "  constexpr dgps_package::DecodeSmem L = dgps_package::decode_smem();\n";
  os << "  unsigned char* const sm = dgps::dev::dyn_smem();\n";
  os << "  float* const smem = dgps::dev::smem_at<float>(sm, L.vec);\n";
  os << "  float* const scratch = dgps::dev::smem_at<float>(sm, L.part);\n";
  os << "  float* const scalars = dgps::dev::smem_at<float>(sm, L.scalar);\n";
  os << "  (void)scratch;\n  (void)scalars;\n";
  os << "  const int64_t H = a.heads_qk, HV = a.heads_v, ratio = HV / H;\n";
  os << "  const int64_t bid = dgps::dev::block_x();\n";
  if (keyHead) {
    os << "  // One CTA per (b, h), the only writer of its preconditioner state: all value tiles of the group.\n";
    os << "  const int64_t b = bid / H, h = bid - b * H, hv0 = h * ratio, vt0 = 0;\n";
    os << "  const int ntile = (int)(ratio * VT);\n";
  } else {
    os << "  // One CTA per (b, hv, value tile).\n";
    os << "  const int64_t vt0 = bid % VT, hv0 = (bid / VT) % HV, b = bid / VT / HV, h = hv0 / ratio;\n";
    os << "  const int ntile = 1;\n";
  }
  Emitter e(os);
  if (failed(e.readAhead(fn.getBody().front(), 1))) return failure();
  if (failed(e.block(fn.getBody().front(), 1))) return failure();
  os << "}\n";
  return os.str();
}

}  // namespace dgps
