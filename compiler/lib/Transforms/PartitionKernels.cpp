// --chunk-partition-kernels: group the chunk ops of each forward function into the kernels of the
// plan (precond_summary, precond_scan, chunk_local, state_output), recompute cheap prologue ops where they are used,
// mark the values that cross kernels as device-memory buffers, attach tile parameters and report the
// cost estimate (PlanCost.h).
#include <algorithm>
#include <cmath>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/DGPS/IR/DGPS.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"
#include "Partitioner.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dgps {
#define GEN_PASS_DEF_PARTITIONKERNELS
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::chunk;

namespace {

// The launch contract's roles in launch order (dsl/include/dgps/dsl/LaunchContract.h).
// segment_summary and segment_fold exist only in a plan rewritten by --chunk-segment-state-pass; an ordinary
// plan has no ops for them and so no such kernels.
enum class Role {
  PrecondSummary = 0,
  PrecondScan = 1,
  ChunkLocal = 2,
  SegmentSummary = 3,
  SegmentFold = 4,
  StateOutput = 5,
  Recompute = dgps::kRecompute
};

/// Where an op runs:
///   precond_summary  per-chunk preconditioner summaries (parallel over chunks): the accumulator's, or
///                    the chunked hypergradient scan's (ChunkPrecondScanOps.td),
///   precond_scan     sequential pass producing chunk-start preconditioner states,
///   chunk_local      everything of a chunk that does not depend on the memory state (KKT, 𝒯, Aqk),
///   state_output     the sequential state pass with W, U formed on the fly, and the output.
/// A segmented plan (ChunkSegmentOps.td) adds segment_summary (per segment E and M, parallel over segments)
/// and segment_fold (sequential over segments); its state_output reruns every segment from its folded start,
/// and its precond_scan is the two-level scan of the preconditioner state.
/// Recompute ops are per-token or per-chunk work that is cheaper to redo than to store and re-read (loads,
/// normalisation, gate cumsums, and applying the diagonal preconditioner from its chunk-start state): they are
/// cloned into every kernel that uses them. The preconditioned write key P⊙k (ATK) or query P⊙q (ATQ) is
/// therefore rebuilt in chunk_local and again in state_output and never becomes a device-memory buffer
/// (runtime/device/dgps/tile/channel_scan.cuh; the state_output rebuild overlaps its warpgroup products).
Role roleOf(Operation* op, bool segmented) {
  return llvm::TypeSwitch<Operation*, Role>(op)
      .Case<AccumSummaryOp, HypergradChunkSummaryOp>([](auto) { return Role::PrecondSummary; })
      .Case<AccumScanOp, AccumPassOp, HypergradScanOp, HypergradPassOp, AccumSegmentPassOp,
            HypergradSegmentPassOp, HypergradChunkPassOp>([](auto) { return Role::PrecondScan; })
      .Case<SegmentSummaryOp>([](auto) { return Role::SegmentSummary; })
      .Case<SegmentFoldOp>([](auto) { return Role::SegmentFold; })
      .Case<KKTOp, SolveTrilOp, QKAttnOp>([](auto) { return Role::ChunkLocal; })
      .Case<StatePassOp, SegmentStatePassOp, OutputOp>([](auto) { return Role::StateOutput; })
      // W and U are formed on the fly from 𝒯 wherever the state pass runs (never materialised): in
      // state_output, and in a segmented plan also in segment_summary, which recomputes them.
      .Case<WYRecomputeOp, GainScaleOp>([&](auto) { return segmented ? Role::Recompute : Role::StateOutput; })
      // o of a multi-step recurrence is the output's last-step rows, written where the output is computed.
      .Case<GatherStepsOp>([](auto) { return Role::StateOutput; })
      .Default([](Operation*) { return Role::Recompute; });
}

/// The role table of a forward; `segmented`: it holds the ops of --chunk-segment-state-pass. A store of a
/// recomputed value (a kept W or U) then runs in state_output.
const dgps::RoleTable& forwardRoles(bool segmented) {
  static const std::vector<std::string> names = {"precond_summary", "precond_scan", "chunk_local",
                                                 "segment_summary", "segment_fold", "state_output"};
  static const dgps::RoleTable plain{names, [](Operation* op) { return static_cast<int>(roleOf(op, false)); },
                                     dgps::kRecompute};
  static const dgps::RoleTable seg{names, [](Operation* op) { return static_cast<int>(roleOf(op, true)); },
                                   static_cast<int>(Role::StateOutput)};
  return segmented ? seg : plain;
}

std::string formatBytes(double x) { return std::to_string(static_cast<int64_t>(std::llround(x))); }

struct PartitionKernelsPass : dgps::impl::PartitionKernelsBase<PartitionKernelsPass> {
  void runOnOperation() override {
    for (func::FuncOp fn : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      if (!fn->hasAttr(kChunkSizeAttr)) continue;  // not a lowered forward
      if (fn->hasAttr(kBackwardOfAttr)) continue;  // a derived backward: --chunk-partition-backward
      // The plan divides by chunk.chunk_size and chunk.gva_ratio and sizes tiles from chunk.tuning: make
      // sure the chunk dialect's attribute verifier has accepted them even when no verifier ran before
      // this pass (a module built or edited in code).
      if (failed(mlir::verify(fn))) return signalPassFailure();
      const bool segmented = !fn.getBody().getOps<SegmentSummaryOp>().empty();
      if (failed(dgps::partitionFunction(fn, forwardRoles(segmented)))) return signalPassFailure();
      dgps::CostPoint at = dgps::costPointOf(fn);
      dgps::PlanCost cost = dgps::estimatePlan(fn, at);
      int64_t bytes = std::llround(cost.bytes()), flops = std::llround(cost.flops());
      fn->setAttr(kPlanAttr, PlanAttr::get(fn.getContext(), bytes, flops, at.K, at.V));
      InFlightDiagnostic remark = fn.emitRemark();
      remark << "kernel plan for K=" << at.K << " V=" << at.V << " C=" << at.C << " HV/H=" << at.gvaRatio
             << ": " << bytes << " bytes and " << flops << " FLOPs per token-head (";
      for (size_t i = 0; i < cost.kernels.size(); ++i)
        remark << (i ? ", " : "") << cost.kernels[i].role << " " << formatBytes(cost.kernels[i].bytes) << " B";
      remark << "; workspace written+read:";
      for (const dgps::BufferTraffic& b : cost.buffers)
        remark << " " << b.name << " " << formatBytes(b.written + b.read) << " B";
      for (const std::string& e : cost.extraBuffers) remark << "; outside the launch contract's workspace: " << e;
      remark << ")";
      const dgps::launch::FeatureSet f = dgps::featuresOf(fn);
      if (dgps::launch::rebuildsKw(f) || dgps::launch::rebuildsQ(f))
        remark << "; the preconditioned operand counted rebuilt (the package's manifest counts the form dgpsc "
                  "compile --write-key gives its kernels)";
    }
  }
};

}  // namespace
