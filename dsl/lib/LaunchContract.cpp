// The launch contract (LaunchContract.h): each role's threads, grid and shared-memory layout, and their three
// readings (kernels.cu text, manifest formulas, host values).
#include "dgps/dsl/LaunchContract.h"

#include <sstream>
#include <stdexcept>

#include "dgps/tile/feedback_scan_layout.h"

namespace dgps::launch {

const char* roleName(int role) {
  return role == kPrecondSummary ? "precond_summary"
         : role == kPrecondScan  ? "precond_scan"
         : role == kChunkLocal   ? "chunk_local"
         : role == kStateOutput  ? "state_output"
                                 : "unknown";
}

int forwardRoles(const FeatureSet& f, int roles[kMaxRoles]) {
  int n = 0;
  if (f.precond == 1) {
    if (f.source == 0 || hypergradChunked(f)) roles[n++] = kPrecondSummary;
    roles[n++] = kPrecondScan;
  }
  roles[n++] = kChunkLocal;
  roles[n++] = kStateOutput;
  return n;
}

const char* segmentRoleName(int role) {
  return role == kSegmentSummary ? "segment_summary" : role == kSegmentFold ? "segment_fold" : "segment_state_output";
}

// ---- layouts ------------------------------------------------------------------------------------------------------
SmemLayout& SmemLayout::region(const std::string& name, const LaunchExpr& bytes) {
  Item it;
  it.name = name;
  it.bytes = bytes;
  items.push_back(std::move(it));
  return *this;
}

SmemLayout& SmemLayout::alias(const std::string& name, const std::string& target) {
  Item it;
  it.kind = Item::Alias;
  it.name = name;
  it.target = target;
  items.push_back(std::move(it));
  return *this;
}

SmemLayout& SmemLayout::absent(const std::string& name) {
  Item it;
  it.kind = Item::Absent;
  it.name = name;
  items.push_back(std::move(it));
  return *this;
}

SmemLayout& SmemLayout::overlay(std::vector<SmemLayout> alternatives) {
  Item it;
  it.kind = Item::Overlay;
  it.parts = std::move(alternatives);
  items.push_back(std::move(it));
  return *this;
}

SmemLayout& SmemLayout::stages(SmemLayout stage, int align, const LaunchExpr& count) {
  Item it;
  it.kind = Item::Stages;
  it.parts = {std::move(stage)};
  it.align = align;
  it.count = count;
  items.push_back(std::move(it));
  return *this;
}

LaunchExpr smemBytes(const SmemLayout& layout) {
  LaunchExpr total = 0;
  for (const SmemLayout::Item& it : layout.items) {
    switch (it.kind) {
      case SmemLayout::Item::Region:
        total = total + it.bytes;
        break;
      case SmemLayout::Item::Alias:
      case SmemLayout::Item::Absent:
        break;
      case SmemLayout::Item::Overlay: {
        LaunchExpr widest = 0;
        for (const SmemLayout& p : it.parts) widest = max(widest, smemBytes(p));
        total = total + widest;
        break;
      }
      case SmemLayout::Item::Stages:
        total = total + alignUp(smemBytes(it.parts[0]), it.align) * it.count;
        break;
    }
  }
  return total;
}

namespace {

/// Prints the statements that place `layout` at `off` (an int variable of the generated function), into `m`.
void printPlacement(std::ostringstream& os, const SmemLayout& layout, const std::string& off, int& scope) {
  for (const SmemLayout::Item& it : layout.items) {
    switch (it.kind) {
      case SmemLayout::Item::Region:
        os << "  m." << it.name << " = " << off << ";\n";
        if (!it.bytes.isConstant(0)) os << "  " << off << " += (int)(" << it.bytes.cuda() << ");\n";
        break;
      case SmemLayout::Item::Alias:
        os << "  m." << it.name << " = m." << it.target << ";\n";
        break;
      case SmemLayout::Item::Absent:
        os << "  m." << it.name << " = -1;\n";
        break;
      case SmemLayout::Item::Overlay: {
        const std::string base = "base" + std::to_string(scope), end = "end" + std::to_string(scope);
        ++scope;
        os << "  const int " << base << " = " << off << ";\n  int " << end << " = " << base << ";\n";
        for (const SmemLayout& p : it.parts) {
          os << "  " << off << " = " << base << ";\n";
          printPlacement(os, p, off, scope);
          os << "  " << end << " = " << off << " > " << end << " ? " << off << " : " << end << ";\n";
        }
        os << "  " << off << " = " << end << ";\n";
        break;
      }
      case SmemLayout::Item::Stages: {
        // offsets inside a stage are relative to the stage; stage s starts at stage_bytes * s
        const std::string stage = "stage" + std::to_string(scope++);
        os << "  int " << stage << " = 0;\n";
        printPlacement(os, it.parts[0], stage, scope);
        os << "  m.stage_bytes = (int)dgps::launch::align_up(" << stage << ", " << it.align << ");\n";
        os << "  m.stages = (int)(" << it.count.cuda() << ");\n";
        os << "  " << off << " += m.stage_bytes * m.stages;\n";
        break;
      }
    }
  }
}

void collectNames(const SmemLayout& layout, std::vector<std::string>& names) {
  for (const SmemLayout::Item& it : layout.items) {
    if (it.kind == SmemLayout::Item::Overlay || it.kind == SmemLayout::Item::Stages) {
      for (const SmemLayout& p : it.parts) collectNames(p, names);
      if (it.kind == SmemLayout::Item::Stages) names.insert(names.end(), {"stage_bytes", "stages"});
    } else {
      names.push_back(it.name);
    }
  }
}

/// Host twin of printPlacement: the offsets of one call.
void place(const SmemLayout& layout, long long& off, const ProblemShape& s, const TileConfig& t,
           std::vector<std::pair<std::string, long long>>& out) {
  auto find = [&](const std::string& name) {
    for (const auto& e : out)
      if (e.first == name) return e.second;
    return -1LL;
  };
  for (const SmemLayout::Item& it : layout.items) {
    switch (it.kind) {
      case SmemLayout::Item::Region:
        out.emplace_back(it.name, off);
        off += it.bytes.eval(s, t);
        break;
      case SmemLayout::Item::Alias:
        out.emplace_back(it.name, find(it.target));
        break;
      case SmemLayout::Item::Absent:
        out.emplace_back(it.name, -1);
        break;
      case SmemLayout::Item::Overlay: {
        const long long base = off;
        long long end = base;
        for (const SmemLayout& p : it.parts) {
          off = base;
          place(p, off, s, t, out);
          end = off > end ? off : end;
        }
        off = end;
        break;
      }
      case SmemLayout::Item::Stages: {
        long long stage = 0;
        place(it.parts[0], stage, s, t, out);
        const long long bytes = align_up(stage, it.align), count = it.count.eval(s, t);
        out.emplace_back("stage_bytes", bytes);
        out.emplace_back("stages", count);
        off += bytes * count;
        break;
      }
    }
  }
}

/// A Stages item places its stage from byte 0 (the kernels index stage s at s * stage_bytes), so it may only be
/// the layout's first item, at the top level.
void requireStagesFirst(const SmemLayout& layout, bool top = true) {
  for (size_t i = 0; i < layout.items.size(); ++i) {
    const SmemLayout::Item& it = layout.items[i];
    if (it.kind == SmemLayout::Item::Stages && (!top || i != 0))
      throw std::logic_error("a shared-memory layout's stages must be its first item (the kernels index stage s at "
                             "s * stage_bytes from byte 0)");
    for (const SmemLayout& p : it.parts) requireStagesFirst(p, false);
  }
}

}  // namespace

std::string smemLayoutCuda(const std::string& type, const std::string& fn, const SmemLayout& layout) {
  requireStagesFirst(layout);
  std::vector<std::string> names;
  collectNames(layout, names);
  std::ostringstream os;
  os << "struct " << type << " {\n  int ";
  for (const std::string& n : names) os << n << ", ";
  os << "total;\n};\n";
  os << "DGPS_HD constexpr " << type << " " << fn << "() {\n";
  os << "  using namespace dgps::cfg;\n";
  os << "  " << type << " m{};\n  int off = 0;\n";
  int scope = 0;
  printPlacement(os, layout, "off", scope);
  os << "  m.total = off;\n  return m;\n}\n";
  return os.str();
}

std::string threadsCuda(const std::string& fn, const LaunchExpr& threads) {
  return "DGPS_HD constexpr int " + fn + "() {\n  using namespace dgps::cfg;\n  return (int)(" + threads.cuda() +
         ");\n}\n";
}

std::vector<std::pair<std::string, long long>> smemOffsets(const SmemLayout& layout, const ProblemShape& s,
                                                           const TileConfig& t) {
  requireStagesFirst(layout);
  std::vector<std::pair<std::string, long long>> out;
  long long off = 0;
  place(layout, off, s, t, out);
  out.emplace_back("total", off);
  return out;
}

// ---- each role -------------------------------------------------------------------------------------------------
namespace {

LaunchExpr sym(LaunchSym s) { return LaunchExpr::sym(s); }

/// A bf16 [C][KP] operand tile with the +8 pad per row against ldmatrix bank conflicts.
LaunchExpr paddedKeyTile() { return chunk() * bf16RowBytes(KP()); }

/// chunk_local: q, k (and the asymmetric write key) tiles, with the KKT block overlaying them (written only after
/// every warp finished its tensor-core products); with per-channel decay the per-block-pair channel multipliers
/// and the per-channel log2 cumsum G, and the gated column copy (when the key is also a row operand) written over
/// G once G is read, so that KDA's CTA takes 72 KB at K = 128 and three fit on an SM. Per-channel decay without
/// a column copy (PKDA) keeps KKT in its own region after G. Then per-token scalars ([C][8] scalars, [C][2] more
/// columns, and with per-channel decay 16 floats of span scratch for tile/lower_product_gated.cuh), the
/// preconditioner state [KP] and the mbarrier of the row copies. Every byte counts here: PGDN's CTA at chunk 32
/// must stay within 28160 bytes for eight CTAs to share an SM (228 KB less 1 KB reserved per CTA).
SmemLayout chunkLocalLayout(const FeatureSet& f) {
  const bool asym = f.precond == 1 && f.side == 0;
  SmemLayout operands;
  operands.region("q", paddedKeyTile()).region("k", paddedKeyTile());
  if (asym)
    operands.region("kw", paddedKeyTile());
  else
    operands.alias("kw", "k");
  const LaunchExpr kkt = chunk() * f32RowBytes(chunk());
  const LaunchExpr nb = chunk() / 16;  // 16-row blocks: tile/lower_product_gated.cuh's block pairs
  SmemLayout a;
  a.region("A", kkt);
  SmemLayout m;
  if (f.decay == 2 && (asym || f.solve != 1)) {
    // no column copy: the CTA stays above a third of the SM's shared memory whatever overlays, so KKT keeps its
    // own region and each warp stores its blocks as it finishes them (measured: PKDA 2% slower with the overlay)
    m = operands;
    m.region("mul", nb * (nb + 1) / 2 * KP() * 2).absent("kcol").region("G", chunk() * KP() * 4).region("A", kkt);
  } else {
    m.overlay({operands, a});
    if (f.decay == 2) {
      m.region("mul", nb * (nb + 1) / 2 * KP() * 2).region("G", chunk() * KP() * 4);
      m.alias("kcol", "G");  // written over the gates once they are read (tile/lower_product_gated.cuh)
    }
  }
  m.region("tok", chunk() * 40 + (f.decay == 2 ? LaunchExpr(64) : LaunchExpr(0)));
  m.region("pstate", f.precond == 1 ? KP() * 4 : LaunchExpr(0));
  m.region("bar", LaunchExpr(16));  // the mbarrier of the q/k tensor copies (tile/chunk_rows.cuh RowCopy)
  return m;
}

/// A walk (state_output, or with `segment` a segment walk): per pipeline stage the q (or opq) and k (or opk)
/// tiles in the core-matrix layout, the write-key tile (opw, the stored pwk, or P⊙k rebuilt here), the raw key
/// where opk takes the k slot and the walk's rebuild needs it, the value tile, 𝒯·diag(β), Aqk, per-token factors,
/// the preconditioner state at the chunk start (where the walk rebuilds an operand) and, for per-channel decay,
/// the chunk's per-channel decay; 128-byte aligned, `stages` times.
SmemLayout walkLayout(const FeatureSet& f, bool segment) {
  const LaunchExpr tile = chunk() * KP() * 2;
  SmemLayout st;
  st.region("q", tile).region("k", tile);
  if (needOpW(f) || rebuildsKw(f))
    st.region("kw", tile);
  else
    st.alias("kw", "k");
  if (rawKOwnTile(f, segment))
    st.region("kraw", tile);
  else
    st.alias("kraw", "k");
  st.region("v", chunk() * bf16RowBytes(BV()));
  st.region("tb", f.solve == 1 ? chunk() * bf16RowBytes(chunk()) : LaunchExpr(0));
  st.region("aqk", chunk() * bf16RowBytes(chunk()));
  st.region("tok", (chunk() + 1) * 32);
  st.region("pst", walkRebuilds(f, segment) ? KP() * 4 : LaunchExpr(0));
  st.region("dec", f.decay == 2 ? KP() * 4 : LaunchExpr(0));
  st.region("bar", LaunchExpr(16));  // the stage's mbarrier of its q/k tensor copies (tile/stage_copy.cuh)
  SmemLayout m;
  m.stages(st, 128, stages());
  return m;
}

/// One consumer warp per 16 value columns, plus a producer warpgroup that rebuilds the preconditioned operand of
/// the next chunk while the consumers run this one (the rebuild stays off the sequential critical path).
LaunchExpr walkThreads(bool producers) { return (BV() / 16 + (producers ? 4 : 0)) * 32; }

}  // namespace

LaunchExpr walkConsumerThreads() { return walkThreads(false); }
int walkProducerWarps(const FeatureSet& f, bool segment) { return walkRebuilds(f, segment) ? 4 : 0; }

namespace {

/// The chunked hypergrad_ogd scan's layouts: tile/feedback_scan_layout.h, whose structs the tile library carves
/// its shared memory with (tests/runtime/test_launch_rules.cpp FeedbackScanLayoutsMatchTheTileLibrary checks
/// these against them).
SmemLayout feedbackSummaryLayout() {
  SmemLayout ulo, gt, m;
  ulo.region("ulo", paddedKeyTile());
  gt.region("gt", chunk() * f32RowBytes(chunk()));
  m.region("key", paddedKeyTile()).overlay({ulo, gt}).region("tok", (chunk() * 8 + 8) * 4).region("bar", LaunchExpr(16));
  return m;
}

SmemLayout feedbackPassLayout() {
  SmemLayout stage, m;
  stage.region("key", paddedKeyTile()).region("tri", chunk() * (chunk() + 1) * 2).region("vec", (chunk() * 2 + 4) * 4);
  m.stages(stage, 1, tile::kFeedbackPassStages);
  m.region("d", KP() * 4).region("w", chunk() * 4).region("c", chunk() * 4);
  m.region("part", 2 * tile::kFeedbackPassThreads * 4);
  return m;
}

}  // namespace

RoleLaunch forwardRoleLaunch(int role, const FeatureSet& f) {
  RoleLaunch r;
  const LaunchExpr slots = sym(LaunchSym::slots), N = sym(LaunchSym::N), H = sym(LaunchSym::H),
                   HV = sym(LaunchSym::HV);
  switch (role) {
    case kPrecondSummary:  // one CTA per chunk slot and key head
      r.grid = slots * H;
      r.threads = warps() * 32;
      if (hypergradChunked(f)) {
        r.smem = feedbackSummaryLayout();
      } else {  // ema_sq_squash: the key tile, a [C][4] f32 per-row record, the mbarrier of the key's tensor copy
        r.smem.region("key", paddedKeyTile()).region("rec", chunk() * 16).region("bar", LaunchExpr(16));
      }
      break;
    case kPrecondScan:
      if (hypergradChunked(f)) {  // one CTA per (sequence, key head) over its chunks
        r.grid = N * H;
        r.threads = tile::kFeedbackPassThreads;
        r.smem = feedbackPassLayout();
      } else if (f.source == 1) {  // clamped: one warp per (sequence, key head), 4 per CTA, 32 key rows each
        r.grid = cdiv(N * H, 4);
        r.threads = 128;
        r.smem.region("rows", bf16RowBytes(KP()) * 128);
      } else {  // ema_sq_squash: one thread per key channel
        r.grid = N * H;
        r.threads = max(32, alignUp(KP(), 32));
      }
      break;
    case kChunkLocal:
      r.grid = slots * HV;
      r.threads = warps() * 32;
      r.smem = chunkLocalLayout(f);
      break;
    case kStateOutput:
    default:
      r.grid = N * HV * cdiv(V(), BV());
      r.threads = walkThreads(walkRebuilds(f, false));
      r.smem = walkLayout(f, false);
      break;
  }
  return r;
}

RoleLaunch segmentRoleLaunch(int role, const FeatureSet& f) {
  RoleLaunch r;
  const LaunchExpr slots = sym(LaunchSym::segment_slots) * sym(LaunchSym::HV);
  switch (role) {
    case kSegmentSummary:
      // E over value tiles, then M over tiles of M's K columns (BV wide). The summary's walks read no query, so
      // only a write-key rebuild brings the producer warpgroup; its shared memory stays the walk's.
      r.grid = slots * (cdiv(V(), BV()) + cdiv(K(), BV()));
      r.threads = walkThreads(walkRebuildsKw(f, true));
      r.smem = walkLayout(f, true);
      break;
    case kSegmentFold:
      // one CTA per (sequence, value head, slab of kSegmentFoldCols value columns): two stages of M_s [K][K + 4]
      // and two h slabs [K][kSegmentFoldCols], f32 (tile/state_fold.cuh)
      r.grid = sym(LaunchSym::N) * sym(LaunchSym::HV) * cdiv(V(), kSegmentFoldCols);
      r.threads = kSegmentFoldThreads;
      r.smem.region("m", K() * (K() + 4) * 8).region("h", K() * kSegmentFoldCols * 8);
      break;
    case kSegmentStateOutput:
    default:
      r.grid = slots * cdiv(V(), BV());
      r.threads = walkThreads(walkRebuilds(f, true));
      r.smem = walkLayout(f, true);
      break;
  }
  return r;
}

RoleLaunch decodeLaunch(const FeatureSet& f) {
  // One CTA per (row, key head) when preconditioned (it owns the key head's preconditioner state and loops over
  // its value heads and value tiles), else per (row, value head, 32-column value tile). f32 shared memory: k̂,
  // write key, read query, per-channel decay [KP each], cross-warp partial sums [4 warps][2][32], 32 scalars.
  RoleLaunch r;
  const LaunchExpr B = sym(LaunchSym::B);
  r.grid = f.precond == 1 ? B * sym(LaunchSym::H) : B * sym(LaunchSym::HV) * cdiv(V(), 32);
  r.threads = 128;
  r.smem.region("vec", KP() * 16).region("part", 4 * 2 * 32 * 4).region("scalar", 32 * 4);
  return r;
}

namespace {

Geometry evaluate(const RoleLaunch& r, const ProblemShape& s, const TileConfig& t, long long L) {
  Geometry g;
  g.grid.x = (unsigned)r.grid.eval(s, t, L);
  g.block.x = (unsigned)r.threads.eval(s, t, L);
  g.smem_bytes = (unsigned long long)smemBytes(r.smem).eval(s, t, L);
  return g;
}

}  // namespace

Geometry forwardGeometry(int role, const FeatureSet& f, const ProblemShape& s, const TileConfig& t) {
  return evaluate(forwardRoleLaunch(role, f), s, t, 0);
}

Geometry segmentGeometry(int role, const FeatureSet& f, const ProblemShape& s, const TileConfig& t, long long L) {
  return evaluate(segmentRoleLaunch(role, f), s, t, L);
}

Geometry decodeGeometry(const FeatureSet& f, const ProblemShape& s, const TileConfig& t) {
  return evaluate(decodeLaunch(f), s, t, 0);
}

}  // namespace dgps::launch
