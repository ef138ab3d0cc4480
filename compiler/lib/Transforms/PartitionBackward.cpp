// --chunk-partition-backward: group a derived backward function into kernel roles (Passes.td) with the
// forward's partitioner (Partitioner.h), and report its cost (BackwardCost.cpp).
#include <cmath>

#include "Partitioner.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dgps {
#define GEN_PASS_DEF_PARTITIONBACKWARD
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::chunk;

namespace {

/// Where a backward op runs (indices into kBackwardRoles):
///   0 bwd_precond_scan     the recomputed token-by-token accumulator or hypergradient d (sequential
///                          per sequence),
///   1 bwd_chunk_local      recomputed KKT, 𝒯 and Aqk (parallel over chunks),
///   2 bwd_state_fwd        recomputed W, U and the forward state pass (h, v_new),
///   3 bwd_output_grad      the output's adjoint: dq (inter-chunk), dAqk, dv_new (intra), dh per chunk,
///   4 bwd_state_reverse    the reverse state pass (dS carried backwards; dW, dU, dk̃),
///   5 bwd_chunk_grad       adjoints of qk_attn, wy_recompute, gain_scale, solve_tril and kkt,
///   6 bwd_precond_reverse  the squash's chain rule and the reverse accumulator scan, or the reverse
///                          hypergradient scan,
///   7 bwd_prologue_grad    l2norm and gate-cumsum adjoints and the gradient stores.
/// Loads (inputs, cotangents, kept values), l2norm, gate cumsums, the squash and diagonal applies (also
/// diag_apply's adjoint, itself a diag_apply) and cotangent sums
/// are recomputed where used.
int backwardRole(Operation* op) {
  return llvm::TypeSwitch<Operation*, int>(op)
      .Case<AccumScanOp, HypergradScanOp>([](auto) { return 0; })
      .Case<KKTOp, SolveTrilOp, QKAttnOp>([](auto) { return 1; })
      .Case<WYRecomputeOp, GainScaleOp, StatePassOp>([](auto) { return 2; })
      .Case<OutputGradOp>([](auto) { return 3; })
      .Case<StatePassGradOp>([](auto) { return 4; })
      .Case<QKAttnGradOp, WYRecomputeGradOp, GainScaleGradOp, SolveTrilGradOp, KKTGradOp>([](auto) { return 5; })
      .Case<SquashApplyGradOp, AccumScanGradOp, HypergradScanGradOp>([](auto) { return 6; })
      .Case<L2NormGradOp, GateCumsumGradOp>([](auto) { return 7; })
      .Default([](Operation*) { return dgps::kRecompute; });
}

const dgps::RoleTable& backwardRoles() {
  static const dgps::RoleTable table{
      std::vector<std::string>(std::begin(kBackwardRoles), std::end(kBackwardRoles)), backwardRole, 7};
  return table;
}

std::string rounded(double x) { return std::to_string(static_cast<int64_t>(std::llround(x))); }

struct PartitionBackwardPass : dgps::impl::PartitionBackwardBase<PartitionBackwardPass> {
  void runOnOperation() override {
    bool any = false;
    for (func::FuncOp fn : getOperation().getOps<func::FuncOp>()) {
      if (!fn->hasAttr(kBackwardOfAttr)) continue;
      any = true;
      if (failed(dgps::partitionFunction(fn, backwardRoles()))) return signalPassFailure();
      dgps::CostPoint at = dgps::costPointOf(fn);
      dgps::BackwardCost cost = dgps::estimateBackwardPlan(fn, at);
      int64_t bytes = std::llround(cost.plan.bytes()), flops = std::llround(cost.plan.flops());
      fn->setAttr(kPlanAttr, PlanAttr::get(fn.getContext(), bytes, flops, at.K, at.V));
      InFlightDiagnostic remark = fn.emitRemark();
      remark << "backward plan for K=" << at.K << " V=" << at.V << " C=" << at.C << " HV/H=" << at.gvaRatio << ": "
             << bytes << " bytes and " << flops << " FLOPs per token-head (";
      for (size_t i = 0; i < cost.plan.kernels.size(); ++i)
        remark << (i ? ", " : "") << cost.plan.kernels[i].role << " " << rounded(cost.plan.kernels[i].bytes) << " B";
      remark << "; the forward also writes " << rounded(cost.savedBytes) << " B of kept intermediates)";
    }
    if (!any) {
      getOperation().emitError() << "no backward function (func.func with chunk.backward_of); run "
                                    "--chunk-derive-backward first";
      signalPassFailure();
    }
  }
};

}  // namespace
