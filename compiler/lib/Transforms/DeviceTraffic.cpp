// Device-memory traffic of the shipped kernels, from the launch contract's rules
// (runtime/device/dgps/device/launch_rules.h): the workspace buffers chunk_local and the preconditioner
// kernels write for the kernels after them, plus the inputs each kernel loads and the outputs it stores.
// See PlanCost.h for the conventions.
#include <algorithm>
#include <string>

#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Transforms/PlanCost.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace dgps::chunk;

namespace dgps {

bool isPreconditionerApply(Operation* op) {
  return op && isa<AccumApplyOp, SquashApplyOp, HypergradApplyOp, DiagApplyOp>(op);
}

launch::FeatureSet featuresOf(func::FuncOp fn) {
  launch::FeatureSet f;
  f.solve = 0;
  fn.walk([&](Operation* op) {
    if (auto g = dyn_cast<GateCumsumOp>(op))
      f.decay = std::max(f.decay, cast<ChunkTensorType>(g.getGate().getType()).hasDim(Dim::K) ? 2 : 1);
    else if (auto load = dyn_cast<LoadOp>(op); load && load.getName() == "beta")
      f.gain = 1;
    else if (isa<SolveTrilOp>(op))
      f.solve = 1;
    if (isa<HypergradScanOp, HypergradPassOp, HypergradApplyOp, HypergradChunkPassOp>(op)) f.source = 1;
    // A clamped d-scan keeps the token scan (--chunk-parallel-precond-scan leaves it a hypergrad_pass).
    if (auto p = dyn_cast<HypergradPassOp>(op); p && (p.getClampMin() || p.getClampMax())) f.clamp = 1;
    if (auto p = dyn_cast<HypergradScanOp>(op); p && (p.getClampMin() || p.getClampMax())) f.clamp = 1;
    if (isPreconditionerApply(op)) {
      f.precond = 1;
      // ATQ: the preconditioned value is the query of Aqk and of the output.
      for (Operation* user : op->getResult(0).getUsers()) {
        if (auto a = dyn_cast<QKAttnOp>(user); a && a.getQuery() == op->getResult(0)) f.side = 1;
        if (auto o = dyn_cast<OutputOp>(user); o && o.getQuery() == op->getResult(0)) f.side = 1;
      }
    }
  });
  return f;
}

PrecondInputs precondInputsOf(func::FuncOp fn) {
  PrecondInputs in;
  fn.walk([&](LoadOp load) {
    if (load.getName() == "precond_g") in.gate = true;
    if (load.getName() == "precond_beta") in.gain = true;
  });
  return in;
}

launch::ProblemShape representativeShape(const CostPoint& at) {
  launch::ProblemShape s;
  s.B = 8;
  s.T = 4096;
  s.N = s.B;
  s.HV = 16;
  s.H = std::max<int64_t>(1, s.HV / std::max<int64_t>(1, at.gvaRatio));
  s.K = at.K;
  s.V = at.V;
  return s;
}

DeviceTraffic deviceTraffic(const launch::FeatureSet& f, const PrecondInputs& in, const launch::ProblemShape& s,
                            const launch::TileConfig& t) {
  DeviceTraffic d;
  const double tokenHeads = double(s.B) * double(s.T) * double(s.HV);
  const double BT = double(s.B) * double(s.T), H = double(s.H), HV = double(s.HV), K = double(s.K),
               V = double(s.V);
  const double ratio = HV / H;
  const long long VP = launch::pad16(int(s.V));
  const double valueTiles = double(launch::cdiv(s.V, std::min<long long>(t.block_v, VP)));
  const int nroles = 4;
  double roleBytes[nroles] = {0, 0, 0, 0};
  auto add = [&](int role, double bytes) { roleBytes[role] += bytes / tokenHeads; };

  // Workspace buffers: each region's size is the workspace catalog's (Dialect/Tile/IR/Workspace.h, the regions the
  // tile roles declare), 256-byte padding included; which regions a forward of `f` uses is estimated here from
  // its features, f.write_key included (the stored write key "pwk" or query "pwq": a tile-IR choice the plan is
  // first costed without, estimatePlan's `writeKey`). Each is written once by its producer. Reads: state_output
  // runs one CTA per (sequence, value head, value tile) and every CTA loads the whole chunk tile, so its workspace
  // reads count once per value tile (L2 may absorb the repeats; these are the loads issued); chunk_local runs one
  // CTA per (slot, value head) and reads the key head's pst / pcoef, so those count once per value head (HV/H per
  // key head). pst has a second reader where state_output rebuilds the preconditioned operand from it. A pwk that
  // only the segment walks read (write_key segments) counts its write here: the plan is the unsegmented forward.
  struct Buf {
    const char* name;
    bool used;
    int writer, reader;
    double reads;
    int reader2 = -1;
    double reads2 = 0;
  };
  using namespace launch;
  const bool pre = f.precond == 1, squash = pre && f.source == 0, hypergrad = pre && f.source == 1;
  const Buf bufs[] = {
      {"psum", squash, kPrecondSummary, kPrecondScan, 1.0},
      {"pgam", squash, kPrecondSummary, kPrecondScan, 1.0},
      {"pst", pre, kPrecondScan, kChunkLocal, ratio, walkRebuilds(f, false) ? kStateOutput : -1,
       ratio * valueTiles},
      {"pcoef", hypergrad, kPrecondScan, kChunkLocal, ratio},
      {"tb", f.solve == 1, kChunkLocal, kStateOutput, valueTiles},
      {"aqk", true, kChunkLocal, kStateOutput, valueTiles},
      {"tok", true, kChunkLocal, kStateOutput, valueTiles},
      {"opq", needOpQ(f), kChunkLocal, kStateOutput, valueTiles},
      {"opk", needOpK(f), kChunkLocal, kStateOutput, valueTiles},
      {"opw", needOpW(f), kChunkLocal, kStateOutput, valueTiles},
      {"pdec", f.decay == 2, kChunkLocal, kStateOutput, valueTiles},
      {"hgtri", hypergradChunked(f), kPrecondSummary, kPrecondScan, 1.0},
      {"hgvec", hypergradChunked(f), kPrecondSummary, kPrecondScan, 1.0},
      {"pwk", storesKw(f) && !needOpW(f), kChunkLocal, kStateOutput, walkRebuildsKw(f, false) ? 0.0 : valueTiles},
      {"pwq", needPwq(f), kChunkLocal, kStateOutput, valueTiles},
  };
  for (const Buf& b : bufs) {
    if (!b.used) continue;
    const double size = double(align_up(tile::regionBytes(*tile::workspaceCatalogEntry(b.name), s, t), 256));
    const double reads = b.reads + (b.reader2 >= 0 ? b.reads2 : 0.0);
    std::string readers = b.reads > 0 ? roleName(b.reader) : "segment walks";
    if (b.reader2 >= 0) readers += std::string(", ") + roleName(b.reader2);
    d.buffers.push_back({b.name, roleName(b.writer), readers, size / tokenHeads, size * reads / tokenHeads});
    add(b.writer, size);
    add(b.reader, size * b.reads);
    if (b.reader2 >= 0) add(b.reader2, size * b.reads2);
  }

  // Inputs and outputs (bf16/f16 activations, f32 gates; per-sequence states amortised to 0), as the
  // kernels in runtime/device/dgps/device/fwd_*.cuh load them.
  if (pre && f.source == 0)  // precond_summary: k, precond_g, precond_beta per key head
    add(kPrecondSummary, BT * H * (K * 2 + (in.gate ? 4 : 0) + (in.gain ? 4 : 0)));
  if (hypergradChunked(f)) {  // chunked: the summary loads k, beta, retention gate; the pass loads k again
    add(kPrecondSummary, BT * H * (K * 2 + (f.gain ? 4 : 0) + (in.gate ? 4 : 0)));
    add(kPrecondScan, BT * H * K * 2);
  } else if (pre && f.source == 1) {  // hypergrad precond_scan (token scan): k, beta, retention gate
    add(kPrecondScan, BT * H * (K * 2 + (f.gain ? 4 : 0) + (in.gate ? 4 : 0)));
  }
  // chunk_local, one CTA per (slot, value head): q, k, g, beta and the per-token preconditioner inputs.
  double cl = 2 * K * 2 + (f.decay == 2 ? K * 4 : f.decay == 1 ? 4 : 0) + (f.gain ? 4 : 0);
  if (pre && f.source == 0) cl += (in.gate ? 4 : 0) + (in.gain ? 4 : 0);
  if (pre && f.source == 1) cl += in.gate ? 4 : 0;
  add(kChunkLocal, BT * HV * cl);
  // state_output: the raw q / k where no prepared operand replaces them or a preconditioner reads the key
  // (once per value tile), v once, o written once.
  double so = 0;
  if (!needOpQ(f) && !needPwq(f)) so += K * 2 * valueTiles;
  // the raw key: the delta read key, the unpreconditioned write key, or a rebuild's scan input (TileStateEmitter.cpp
  // emitStageLoads; a linear solve whose write key chunk_local stored loads none)
  const bool rawKeyRead = !needOpK(f) && (f.solve == 1 || (!needOpW(f) && !rebuildsKw(f)) || walkRebuilds(f, false));
  if (rawKeyRead) so += K * 2 * valueTiles;
  if (rawKOwnTile(f)) so += K * 2 * valueTiles;
  so += V * 2 + V * 2;
  add(kStateOutput, BT * HV * so);

  int roles[kMaxRoles];
  const int n = forwardRoles(f, roles);
  for (int i = 0; i < n; ++i) d.kernels.push_back({roleName(roles[i]), roleBytes[roles[i]], 0.0});
  return d;
}

double DeviceTraffic::bytes() const {
  double s = 0;
  for (const KernelCost& k : kernels) s += k.bytes;
  return s;
}

}  // namespace dgps
