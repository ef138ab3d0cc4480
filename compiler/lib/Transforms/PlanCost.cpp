// Byte and FLOP counting of a kernel plan (PlanCost.h).
#include "dgps/Transforms/PlanCost.h"

#include <algorithm>

#include "dgps/dsl/SegmentScan.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dgps::chunk;

namespace dgps {

double PlanCost::bytes() const {
  double s = 0;
  for (const KernelCost& k : kernels) s += k.bytes;
  return s;
}

double PlanCost::flops() const {
  double s = 0;
  for (const KernelCost& k : kernels) s += k.flops;
  return s;
}

double bytesPerTokenHead(ChunkTensorType t, const CostPoint& at) {
  double perToken;
  if (t.hasDim(Dim::T))
    perToken = 1.0;
  else if (t.hasDim(Dim::TQ))
    perToken = 1.0 / static_cast<double>(at.steps);
  else if (t.hasDim(Dim::NT))
    perToken = 1.0 / static_cast<double>(at.C);
  else if (t.hasDim(Dim::NS))
    perToken = 1.0 / static_cast<double>(at.C * std::max<int64_t>(1, at.segmentChunks));
  else
    return 0.0;  // per sequence or per head: amortised over the sequence
  double elems = 1.0;
  for (Dim d : t.getDims()) {
    switch (d) {
      case Dim::K: elems *= static_cast<double>(at.K); break;
      case Dim::V: elems *= static_cast<double>(at.V); break;
      case Dim::C: elems *= static_cast<double>(at.C); break;
      case Dim::H: elems /= static_cast<double>(at.gvaRatio); break;
      default: break;
    }
  }
  Type e = t.getElementType();
  double size = (e.isBF16() || e.isF16()) ? 2.0 : 4.0;
  return size * elems * perToken;
}

double flopsPerTokenHead(Operation* op, const CostPoint& at) {
  const double K = static_cast<double>(at.K), V = static_cast<double>(at.V), C = static_cast<double>(at.C);
  const double perKeyHead = 1.0 / static_cast<double>(at.gvaRatio);
  const double L = static_cast<double>(std::max<int64_t>(1, at.segmentChunks));
  auto diagonalGate = [](Value g) { return g && cast<ChunkTensorType>(g.getType()).hasDim(Dim::K); };
  return llvm::TypeSwitch<Operation*, double>(op)
      .Case([&](L2NormOp) { return 3 * K * perKeyHead; })
      .Case([&](GateCumsumOp o) { return diagonalGate(o.getGate()) ? K : 1.0; })
      .Case([&](KKTOp) { return 2 * C * K; })                  // 2C²K per chunk
      .Case([&](SolveTrilOp) { return C * C / 2; })            // ≈ C³/2 per chunk
      .Case([&](WYRecomputeOp) { return 2 * C * K + 2 * C * V; })
      .Case([&](GainScaleOp) { return V; })
      .Case([&](StatePassOp) { return 4 * K * V; })            // W·h and K̃ᵀ·v_new
      .Case([&](QKAttnOp) { return 2 * C * K; })                // masked Q·K̃ᵀ, 2C²K per chunk
      .Case([&](OutputOp) { return 2 * K * V + 2 * C * V; })    // Q·h and Aqk·v_new
      .Case([&](AccumScanOp) { return 3 * K * perKeyHead; })
      .Case([&](SquashApplyOp) { return 10 * K * perKeyHead; })
      .Case([&](AccumSummaryOp) { return 3 * K * perKeyHead; })
      .Case([&](AccumPassOp) { return 2 * K / C * perKeyHead; })
      .Case([&](AccumApplyOp) { return (2 * C * K + 10 * K) * perKeyHead; })  // intra matmul + squash
      .Case([&](HypergradScanOp) { return 7 * K * perKeyHead; })
      .Case([&](HypergradPassOp) { return 7 * K * perKeyHead; })
      .Case([&](HypergradApplyOp) { return 4 * K * perKeyHead; })
      // Chunked d-scan (ChunkPrecondScanOps.td) as the device roles run it (tile/feedback_scan_{summary,pass}.cuh): the
      // lower half of the Gram matrix of u C²K and the blocked inverse about C³/3 per chunk, u, κ and the
      // triangular block; the pass 4K + 2C per token ((k²)·d, the triangular product, the update).
      .Case([&](HypergradChunkSummaryOp) { return (2 * C * K + C * C / 3 + 2 * C + 4 * K) * perKeyHead; })
      .Case([&](HypergradChunkPassOp) { return (4 * K + 2 * C) * perKeyHead; })
      // Segmented passes (ChunkSegmentOps.td); L chunks per segment.
      .Case([&](SegmentSummaryOp) { return 4 * K * V + 4 * K * K; })   // E: as state_pass; M: on a K×K block
      .Case([&](SegmentFoldOp) { return 2 * K * K * V / (C * L); })  // M X + E once per segment
      .Case([&](SegmentStatePassOp) { return 4 * K * V; })
      .Case([&](AccumSegmentPassOp) { return (4 * K / C + 2 * K / (C * L)) * perKeyHead; })
      .Case([&](HypergradSegmentPassOp) {  // M's rank-1 updates 4K², e and the rerun 14K, the fold 2K²/(CL)
        return (4 * K * K + 14 * K + 2 * K * K / (C * L)) * perKeyHead;
      })
      .Case([&](DiagApplyOp) { return K * perKeyHead; })
      // Adjoints (ChunkGradOps.td): about twice their forward op's products.
      .Case([&](AddOp o) {
        return (o.getTerms().size() - 1.0) * bytesPerTokenHead(cast<ChunkTensorType>(o.getType()), at) / 4.0;
      })
      .Case([&](L2NormGradOp) { return 5 * K * perKeyHead; })
      .Case([&](GateCumsumGradOp o) { return cast<ChunkTensorType>(o.getType()).hasDim(Dim::K) ? K : 1.0; })
      .Case([&](KKTGradOp) { return 6 * C * K; })               // dK̂, dK̃ and dβ/dG, each 2C²K per chunk
      .Case([&](SolveTrilGradOp) { return 2 * C * C / 3; })     // two triangular products, ≈ 2C³/3 per chunk
      .Case([&](WYRecomputeGradOp) { return 4 * C * K + 4 * C * V; })
      .Case([&](GainScaleGradOp) { return 2 * V; })
      .Case([&](StatePassGradOp) { return 10 * K * V; })         // K̄ dS, dS v_new, S dv, W dvᵀ, dG
      .Case([&](QKAttnGradOp) { return 6 * C * K; })
      .Case([&](OutputGradOp) { return 4 * K * V + 4 * C * V; })  // dq, dh; dAqk, dv_new
      .Case([&](AccumScanGradOp) { return 6 * K * perKeyHead; })
      .Case([&](SquashApplyGradOp) { return 14 * K * perKeyHead; })
      .Case([&](HypergradScanGradOp) { return 16 * K * perKeyHead; })
      .Default([](Operation*) { return 0.0; });
}

CostPoint costPointOf(func::FuncOp fn) {
  CostPoint at;
  // 128 (the published models' head dim) when the spec supports it, so that plans of different
  // specs compare at the same point; otherwise the spec's largest dim.
  auto pointOf = [](Attribute a, int64_t dflt) {
    auto arr = dyn_cast_or_null<DenseI64ArrayAttr>(a);
    if (!arr || arr.empty()) return dflt;
    if (llvm::is_contained(arr.asArrayRef(), int64_t{128})) return int64_t{128};
    return *std::max_element(arr.asArrayRef().begin(), arr.asArrayRef().end());
  };
  at.K = pointOf(fn->getAttr(kKeyDimsAttr), at.K);
  at.V = pointOf(fn->getAttr(kValueDimsAttr), at.V);
  if (auto c = fn->getAttrOfType<IntegerAttr>(kChunkSizeAttr)) at.C = c.getInt();
  if (auto g = fn->getAttrOfType<IntegerAttr>(kGvaAttr)) at.gvaRatio = std::max<int64_t>(1, g.getInt());
  if (auto l = fn->getAttrOfType<IntegerAttr>(kSegmentChunksAttr)) {
    at.segmentChunks = std::max<int64_t>(1, l.getInt());
  } else {
    segment::SegmentRuleInputs rule;
    rule.chunksPerSeq = (32768 + at.C - 1) / at.C;
    rule.parallelWork = 16;
    rule.K = at.K, rule.C = at.C;
    at.segmentChunks = segment::chooseSegmentChunks(rule);
  }
  if (auto n = fn->getAttrOfType<IntegerAttr>(kHouseholderStepsAttr)) at.steps = std::max<int64_t>(1, n.getInt());
  return at;
}

/// Whether a global buffer of the plan is one of the launch contract's workspace buffers (DeviceTraffic
/// counts those); any other (e.g. the unfused per-token accumulator) has no place in it.
static bool isLibraryBuffer(Value v) {
  if (auto k = v.getDefiningOp<KernelOp>())  // a buffer: look at the value its kernel yields
    v = cast<YieldOp>(k.getBody().front().getTerminator()).getValues()[cast<OpResult>(v).getResultNumber()];
  Operation* def = v.getDefiningOp();
  // hypergrad_chunk_pass writes what hypergrad_pass writes (pst, pcoef); the chunked summary's R, a, Y and
  // log retention are held by the workspace as its per-chunk triangular block and vectors (hgtri, hgvec).
  return def && (isa<SolveTrilOp, QKAttnOp, AccumSummaryOp, AccumPassOp, HypergradPassOp, AccumSegmentPassOp,
                        HypergradSegmentPassOp, HypergradChunkSummaryOp, HypergradChunkPassOp>(def) ||
                 isPreconditionerApply(def));
}

PlanCost estimatePlan(func::FuncOp fn, const CostPoint& at, int writeKey) {
  PlanCost cost;
  cost.at = at;
  launch::TileConfig tile;
  tile.chunk = static_cast<int>(at.C);
  SmallVector<KernelOp> kernels(fn.getBody().getOps<KernelOp>());
  if (!kernels.empty()) {
    TileAttr t = kernels.front().getTile();
    tile = {static_cast<int>(t.getChunk()), static_cast<int>(t.getBlockV()), static_cast<int>(t.getWarps()),
            static_cast<int>(t.getStages())};
  }
  launch::FeatureSet features = featuresOf(fn);
  features.write_key = writeKey;
  DeviceTraffic traffic = deviceTraffic(features, precondInputsOf(fn), representativeShape(at), tile);
  cost.buffers = traffic.buffers;
  for (KernelOp kernel : kernels) {
    KernelCost kc;
    kc.role = kernel.getRole().str();
    for (const KernelCost& t : traffic.kernels)
      if (t.role == kc.role) kc.bytes = t.bytes;
    // A segmented plan's summary kernel has no library counterpart yet: it loads what state_output loads
    // (the chunk's operands, 𝒯, the preconditioner states) but writes no output (o, 2V bytes in bf16).
    if (kc.role == "segment_summary")
      for (const KernelCost& t : traffic.kernels)
        if (t.role == "state_output") kc.bytes = std::max(0.0, t.bytes - 2.0 * static_cast<double>(at.V));
    llvm::SetVector<Value> extraRead;
    kernel.getBody().walk([&](Operation* op) {
      kc.flops += flopsPerTokenHead(op, at);
      for (Value v : op->getOperands())
        if (!kernel.getBody().isAncestor(v.getParentRegion()) && !isLibraryBuffer(v)) extraRead.insert(v);
    });
    for (Value v : extraRead) kc.bytes += bytesPerTokenHead(cast<ChunkTensorType>(v.getType()), at);
    auto yield = cast<YieldOp>(kernel.getBody().front().getTerminator());
    for (auto [inner, r] : llvm::zip(yield.getValues(), kernel.getBuffers()))
      if (!isLibraryBuffer(inner)) {
        kc.bytes += bytesPerTokenHead(cast<ChunkTensorType>(r.getType()), at);
        std::string name;
        llvm::raw_string_ostream os(name);
        os << inner.getDefiningOp()->getName().getStringRef();
        cost.extraBuffers.push_back(os.str());
      }
    cost.kernels.push_back(kc);
  }
  return cost;
}

}  // namespace dgps
