// tile.workspace (Workspace.h): the catalog of regions, the region uses of the tile ops, the declaration's
// builder and verifier, and its two printed forms (kernels.cu offsets, manifest size formulas).
#include "dgps/Dialect/Tile/IR/Workspace.h"

#include <set>
#include <sstream>

#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/tile/feedback_scan_layout.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace dgps::tile {

// The extents a region's size may name. `segment_slots` sizes the sequence-parallel state pass's regions: with L
// chunks per segment (launch_rules.h segmentSlots), 0 when the call runs no segmented pass (L < 1); in the manifest
// those regions are launch.forward_segmented.buffers, evaluated only with L >= 1.
using Shape = launch::ProblemShape;
using Tile = launch::TileConfig;
const WorkspaceExtent kWorkspaceExtents[] = {
    {"slots", "dgps::launch::chunkSlots(s, t.chunk)", "slots",
     [](const Shape& s, const Tile& t, long long) { return launch::chunkSlots(s, t.chunk); }},
    {"segment_slots", "(L >= 1 ? dgps::launch::segmentSlots(s, t.chunk, L) : 0)",
     "select(varlen, T / (chunk * L) + N, N * cdiv(cdiv(T, chunk), L))",
     [](const Shape& s, const Tile& t, long long L) { return L >= 1 ? launch::segmentSlots(s, t.chunk, L) : 0; }},
    {"H", "s.H", "H", [](const Shape& s, const Tile&, long long) { return s.H; }},
    {"HV", "s.HV", "HV", [](const Shape& s, const Tile&, long long) { return s.HV; }},
    {"K", "s.K", "K", [](const Shape& s, const Tile&, long long) { return s.K; }},
    {"KP", "(long long)dgps::launch::pad16((int)s.K)", "KP",
     [](const Shape& s, const Tile&, long long) { return (long long)launch::pad16(int(s.K)); }},
    {"V", "s.V", "V", [](const Shape& s, const Tile&, long long) { return s.V; }},
    {"chunk", "(long long)t.chunk", "chunk", [](const Shape&, const Tile& t, long long) { return (long long)t.chunk; }},
    {"chunk + 1", "((long long)t.chunk + 1)", "(chunk + 1)",
     [](const Shape&, const Tile& t, long long) { return (long long)t.chunk + 1; }},
    // the chunked hypergrad_ogd scan: the lower triangle of a C x C block (hgtri) and {a [C], y [C], L, 3 pad}
    // (hgvec), tile/feedback_scan_layout.h feedbackTriFloats / feedbackVecFloats
    {"chunk * (chunk + 1) / 2", "((long long)dgps::tile::feedbackTriFloats(t.chunk))", "(chunk * (chunk + 1) / 2)",
     [](const Shape&, const Tile& t, long long) { return (long long)tile::feedbackTriFloats(t.chunk); }},
    {"2 * chunk + 4", "((long long)dgps::tile::feedbackVecFloats(t.chunk))", "(2 * chunk + 4)",
     [](const Shape&, const Tile& t, long long) { return (long long)tile::feedbackVecFloats(t.chunk); }},
};
const int kWorkspaceExtentCount = int(sizeof(kWorkspaceExtents) / sizeof(kWorkspaceExtents[0]));

const std::vector<WorkspaceRegion>& workspaceCatalog() {
  // Layout order. What each region holds (per chunk slot and value head hv, or key head h) is documented where
  // its writer is (TileChunkOps.td, TilePrecondOps.td, TileStateOps.td) and in docs/architecture.md "The
  // workspace". The regions of the segmented state pass come last (sized by segment_slots).
  static const std::vector<WorkspaceRegion> catalog = {
      {"tb", 2, {"slots", "HV", "chunk", "chunk"}},        // bf16 T·diag(β) (delta solve)
      {"aqk", 2, {"slots", "HV", "chunk", "chunk"}},       // bf16 scale·tril(Q Kwᵀ ⊙ Γ)
      {"tok", 4, {"slots", "HV", "chunk + 1", "8"}},       // f32 per-token record, row C the chunk's decay
      {"pst", 4, {"slots", "H", "K"}},                     // f32 preconditioner state at the chunk start
      {"psum", 4, {"slots", "H", "K"}},                    // f32 ema_sq_squash chunk summary
      {"pgam", 4, {"slots", "H"}},                         // f32 ema_sq_squash chunk decay
      {"pcoef", 4, {"slots", "H", "chunk"}},               // f32 hypergrad_ogd step coefficients
      {"opq", 2, {"slots", "HV", "chunk", "KP"}},           // bf16 gated read query (per-channel decay)
      {"opk", 2, {"slots", "HV", "chunk", "KP"}},           // bf16 gated read key
      {"opw", 2, {"slots", "HV", "chunk", "KP"}},           // bf16 gated write key
      {"pdec", 4, {"slots", "HV", "K"}},                   // f32 per-channel chunk decay
      {"hgtri", 4, {"slots", "H", "chunk * (chunk + 1) / 2"}},  // f32 chunked d-scan block
      {"hgvec", 4, {"slots", "H", "2 * chunk + 4"}},       // f32 chunked d-scan vectors
      {"pwk", 2, {"slots", "HV", "chunk", "KP"}},           // bf16 stored preconditioned write key
      {"pwq", 2, {"slots", "HV", "chunk", "KP"}},          // bf16 stored preconditioned query
      {"seg_ext", 4, {"segment_slots", "HV", "K", "V"}},   // f32 segment end state from zero
      {"seg_trans", 4, {"segment_slots", "HV", "K", "K"}}, // f32 segment transition product
      {"seg_start", 4, {"segment_slots", "HV", "K", "V"}}, // f32 folded state entering the segment
  };
  return catalog;
}

namespace {

const WorkspaceExtent* extentNamed(StringRef name) {
  for (int i = 0; i < kWorkspaceExtentCount; ++i)
    if (name == kWorkspaceExtents[i].name) return &kWorkspaceExtents[i];
  return nullptr;
}

bool isInteger(StringRef s) {
  unsigned long long v = 0;
  return !s.getAsInteger(10, v) && v > 0 && v < (1ull << 31);
}


/// The tensors a state walk's query / key operands may name besides workspace regions (kernel arguments).
bool isWalkArgument(StringRef name) { return name == "q" || name == "k"; }

}  // namespace

bool isSegmentRegion(const WorkspaceRegion& r) { return !r.size.empty() && r.size.front() == "segment_slots"; }

namespace {

std::string functionOf(Operation* op) {
  auto fn = op->getParentOfType<func::FuncOp>();
  return fn ? "@" + fn.getSymName().str() : std::string("(no function)");
}

}  // namespace

namespace {

/// An attribute of a tile op that names a workspace region, and whether the op writes the region (else reads it).
struct RegionAttr {
  const char* attr;
  bool write;
};

/// The attributes of `op` that name workspace regions. Read by name (not through the ops' accessors) so that the
/// module's verifier, which runs before its functions', never trips over an op that is itself malformed.
std::vector<RegionAttr> regionAttrsOf(Operation* op) {
  if (isa<StoreTokenRecordOp, StoreGatedRowsOp, StoreRowsOp, StoreLastExp2Op, LowerProductsOp, StoreLowerColScaledOp,
          ChannelScanTotalOp, StoreSumExpOp>(op))
    return {{"into", true}};
  if (isa<WorkspaceRowsOp>(op)) return {{"region", false}};
  if (isa<ChunkAffineScanOp>(op)) return {{"decay", false}, {"step", false}, {"starts", true}};
  if (isa<HypergradChunkSummaryOp>(op)) return {{"tri", true}, {"vec", true}};
  if (isa<HypergradChunkPassOp>(op)) return {{"tri", false}, {"vec", false}, {"starts", true}, {"coef", true}};
  if (isa<HypergradTokenScanOp>(op)) return {{"starts", true}, {"coef", true}};
  if (isa<StateWalkOp>(op))
    return {{"query", false},   {"write_key", false},   {"read_key", false}, {"record", false},
            {"solve", false},   {"readout", false},     {"columns", false},  {"scan_start", false},
            {"start_region", false}, {"end_region", true}};
  if (isa<StateFoldOp>(op)) return {{"trans", false}, {"ext", false}, {"start", true}};
  return {};
}

}  // namespace

std::vector<RegionUse> regionUses(Operation* root) {
  std::vector<RegionUse> uses;
  root->walk([&](Operation* op) {
    const bool walk = isa<StateWalkOp>(op);
    for (const RegionAttr& a : regionAttrsOf(op)) {
      auto name = op->getAttrOfType<StringAttr>(a.attr);
      if (!name) continue;  // an optional region the op does not use
      // a walk's query and keys may be the kernel's input tensors instead
      if (walk && isWalkArgument(name.getValue())) continue;
      uses.push_back({name.getValue().str(), op, a.write});
    }
  });
  return uses;
}

namespace {

Attribute regionAttr(Builder& b, const WorkspaceRegion& r) {
  SmallVector<Attribute> size;
  for (const std::string& e : r.size) size.push_back(b.getStringAttr(e));
  return b.getDictionaryAttr({b.getNamedAttr("name", b.getStringAttr(r.name)),
                              b.getNamedAttr("bytes", b.getI64IntegerAttr(r.bytes)),
                              b.getNamedAttr("size", b.getArrayAttr(size))});
}

/// One entry of tile.workspace read back, or an error at `op` naming the entry's index and what is wrong.
FailureOr<WorkspaceRegion> parseRegion(Operation* op, Attribute entry, size_t index) {
  auto fail = [&](const std::string& what) {
    return op->emitOpError() << kWorkspaceAttr << " entry " << index << " " << what
                             << "; expected {name = \"<region>\", bytes = <1, 2, 4 or 8>, size = [\"<extent>\", ...]}";
  };
  auto dict = dyn_cast<DictionaryAttr>(entry);
  if (!dict) return fail("is not a dictionary");
  if (dict.size() != 3) return fail("must have exactly the keys name, bytes and size");
  auto name = dict.getAs<StringAttr>("name");
  auto bytes = dict.getAs<IntegerAttr>("bytes");
  auto size = dict.getAs<ArrayAttr>("size");
  if (!name || name.getValue().empty()) return fail("has no region name (a non-empty string)");
  if (!bytes) return fail("has no element size `bytes` (an integer)");
  const long long b = bytes.getInt();
  const std::string quoted = "(\"" + name.getValue().str() + "\")";
  if (b != 1 && b != 2 && b != 4 && b != 8) return fail(quoted + " has element bytes " + std::to_string(b));
  if (!size || size.empty()) return fail(quoted + " has no size (a non-empty array of extents)");
  WorkspaceRegion r{name.getValue().str(), b, {}};
  for (Attribute e : size) {
    auto s = dyn_cast<StringAttr>(e);
    if (!s || (!extentNamed(s.getValue()) && !isInteger(s.getValue()))) {
      std::string known;
      for (int i = 0; i < kWorkspaceExtentCount; ++i)
        known += std::string(i ? ", " : "") + "\"" + kWorkspaceExtents[i].name + "\"";
      std::string got;
      llvm::raw_string_ostream gs(got);
      gs << e;
      return fail("(\"" + r.name + "\") has the extent " + got + ", which is neither one of " + known +
                  " nor a positive integer string");
    }
    r.size.push_back(s.getValue().str());
  }
  if (r.size.front() != "slots" && r.size.front() != "segment_slots")
    return fail("(\"" + r.name + "\") must start its size with \"slots\" or \"segment_slots\" (a region is per chunk "
                "slot or per segment slot)");
  return r;
}

FailureOr<std::vector<WorkspaceRegion>> parseWorkspace(Operation* op, Attribute value) {
  auto list = dyn_cast<ArrayAttr>(value);
  if (!list)
    return op->emitOpError() << kWorkspaceAttr << " must be an array of regions in layout order, got " << value;
  std::vector<WorkspaceRegion> regions;
  std::set<std::string> seen;
  bool segments = false;
  for (size_t i = 0; i < list.size(); ++i) {
    FailureOr<WorkspaceRegion> r = parseRegion(op, list[i], i);
    if (failed(r)) return failure();
    if (!seen.insert(r->name).second)
      return op->emitOpError() << kWorkspaceAttr << " declares region \"" << r->name << "\" twice (entry " << i << ")";
    if (segments && !isSegmentRegion(*r))
      return op->emitOpError() << kWorkspaceAttr << " declares the chunk region \"" << r->name << "\" (entry " << i
                               << ") after a segment region: the regions sized by \"segment_slots\" come last";
    segments = segments || isSegmentRegion(*r);
    regions.push_back(std::move(*r));
  }
  return regions;
}

}  // namespace

LogicalResult declareWorkspace(ModuleOp module) {
  std::set<std::string> used;
  for (const RegionUse& u : regionUses(module)) {
    if (!workspaceCatalogEntry(u.region)) {
      std::string known;
      for (const WorkspaceRegion& r : workspaceCatalog()) known += (known.empty() ? "" : ", ") + r.name;
      return u.op->emitOpError() << "in " << functionOf(u.op) << " names the workspace region \"" << u.region
                                 << "\", which the workspace catalog does not hold (known: " << known
                                 << "; compiler/lib/Dialect/Tile/IR/Workspace.cpp workspaceCatalog)";
    }
    used.insert(u.region);
  }
  Builder b(module.getContext());
  SmallVector<Attribute> entries;
  for (const WorkspaceRegion& r : workspaceCatalog())
    if (used.count(r.name)) entries.push_back(regionAttr(b, r));
  if (entries.empty()) {
    module->removeAttr(kWorkspaceAttr);
    return success();
  }
  module->setAttr(kWorkspaceAttr, b.getArrayAttr(entries));
  return success();
}

LogicalResult verifyWorkspace(Operation* op, Attribute value) {
  if (!isa<ModuleOp>(op))
    return op->emitOpError() << kWorkspaceAttr << " belongs on the module that holds the package's tile functions";
  FailureOr<std::vector<WorkspaceRegion>> regions = parseWorkspace(op, value);
  if (failed(regions)) return failure();
  if (regions->size() > size_t(kMaxWorkspaceRegions))
    return op->emitOpError() << kWorkspaceAttr << " declares " << regions->size()
                             << " regions; the kernels take at most " << kMaxWorkspaceRegions
                             << " offsets (ForwardArgs::workspace_offsets, runtime/device/dgps/device/abi.h)";
  std::set<std::string> declared, written, read;
  for (const WorkspaceRegion& r : *regions) declared.insert(r.name);
  for (const RegionUse& u : regionUses(op)) {
    if (!declared.count(u.region))
      return u.op->emitOpError() << "in " << functionOf(u.op) << " " << (u.write ? "writes" : "reads")
                                 << " the workspace region \"" << u.region << "\", which the module's "
                                 << kWorkspaceAttr << " does not declare";
    (u.write ? written : read).insert(u.region);
  }
  for (const WorkspaceRegion& r : *regions) {
    if (!written.count(r.name))
      return op->emitOpError() << kWorkspaceAttr << " declares region \"" << r.name
                               << "\", which no tile function writes (a region passes data from one role to another)";
    if (!read.count(r.name))
      return op->emitOpError() << kWorkspaceAttr << " declares region \"" << r.name
                               << "\", which no tile function reads (a region passes data from one role to another)";
  }
  return success();
}

std::vector<WorkspaceRegion> workspaceOf(ModuleOp module) {
  Attribute value = module ? module->getAttr(kWorkspaceAttr) : Attribute();
  if (!value) return {};
  FailureOr<std::vector<WorkspaceRegion>> regions = parseWorkspace(module, value);
  return succeeded(regions) ? *regions : std::vector<WorkspaceRegion>();
}

std::string workspaceLayoutCuda(const std::vector<WorkspaceRegion>& regions) {
  std::ostringstream os;
  os << "// The package's workspace (tile.workspace, printed by dgpsc): byte offsets of its regions in layout order,\n"
        "// each 256-byte aligned; `total` is the buffer's size. L: chunks per segment of the segmented state pass\n"
        "// (its regions are empty without one). The manifest's launch.workspace sizes are the same declaration's.\n";
  os << "namespace dgps_package {\nstruct Workspace {\n  long long";
  for (size_t i = 0; i < regions.size(); ++i) os << (i ? ", " : " ") << regions[i].name;
  os << (regions.empty() ? " " : ", ") << "total;\n};\n";
  os << "DGPS_HD inline Workspace workspace_layout(const dgps::launch::ProblemShape& s, "
        "const dgps::launch::TileConfig& t,\n"
        "                                         long long L) {\n";
  os << "  (void)L;  // only the segment regions read it\n";
  os << "  Workspace w{};\n  long long off = 0;\n";
  for (const WorkspaceRegion& r : regions) {
    os << "  w." << r.name << " = off;\n  off += dgps::launch::align_up(";
    for (const std::string& e : r.size) {
      const WorkspaceExtent* x = extentNamed(e);
      os << (x ? x->cuda : e) << " * ";
    }
    os << r.bytes << "LL, " << kWorkspaceAlign << ");\n";
  }
  os << "  w.total = off;\n  return w;\n}\n";
  // the kernels take the offsets the host computed (abi.h workspace_offsets): the same numbers, no 64-bit layout
  // arithmetic per CTA
  os << "// The offsets of this call (ForwardArgs::workspace_offsets, in the order above; `total` is the host's).\n";
  os << "DGPS_HD inline Workspace workspace_of(const dgps::ForwardArgs& a) {\n  Workspace w{};\n";
  for (size_t i = 0; i < regions.size(); ++i)
    os << "  w." << regions[i].name << " = a.workspace_offsets[" << i << "];\n";
  os << "  return w;\n}\n}  // namespace dgps_package\n";
  return os.str();
}

std::string workspaceOfCuda() {
  return "  const dgps_package::Workspace W = dgps_package::workspace_of(a);  // the host's offsets (abi.h)\n";
}

const WorkspaceRegion* workspaceCatalogEntry(StringRef name) {
  for (const WorkspaceRegion& r : workspaceCatalog())
    if (name == r.name) return &r;
  return nullptr;
}

long long regionBytes(const WorkspaceRegion& region, const launch::ProblemShape& s, const launch::TileConfig& t,
                      long long L) {
  long long bytes = region.bytes;
  for (const std::string& e : region.size) {
    unsigned long long n = 0;
    if (const WorkspaceExtent* x = extentNamed(e))
      bytes *= x->value(s, t, L);
    else if (!StringRef(e).getAsInteger(10, n))
      bytes *= (long long)n;
    else
      return -1;
  }
  return bytes;
}

std::vector<std::pair<std::string, std::string>> workspaceBufferFormulas(const std::vector<WorkspaceRegion>& regions) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const WorkspaceRegion& r : regions) {
    std::string f;
    for (const std::string& e : r.size) {
      const WorkspaceExtent* x = extentNamed(e);
      f += (x ? x->formula : e) + std::string(" * ");
    }
    out.push_back({r.name, f + std::to_string(r.bytes)});
  }
  return out;
}

}  // namespace dgps::tile
