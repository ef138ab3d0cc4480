// Byte and FLOP estimate of a partitioned backward (PlanCost.h, estimateBackwardPlan). There is no
// GPU kernel for the backward yet, so bytes come from the IR itself: every value a kernel reads from
// device memory (an input, a cotangent, a kept forward value, or another kernel's buffer) counts once
// per kernel, every buffer it writes and every gradient it stores counts once; element sizes and the
// per-token conventions are those of bytesPerTokenHead. FLOPs: flopsPerTokenHead of every op in every
// kernel, recomputation included.
#include "dgps/Transforms/PlanCost.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace dgps::chunk;

namespace dgps {

BackwardCost estimateBackwardPlan(func::FuncOp fn, const CostPoint& at) {
  BackwardCost cost;
  cost.plan.at = at;
  llvm::StringSet<> saved;
  for (KernelOp kernel : fn.getBody().getOps<KernelOp>()) {
    KernelCost kc;
    kc.role = kernel.getRole().str();
    llvm::SetVector<Value> read;
    llvm::StringSet<> loaded;
    kernel.getBody().walk([&](Operation* op) {
      kc.flops += flopsPerTokenHead(op, at);
      if (auto load = dyn_cast<LoadOp>(op)) {
        // A load cloned into a kernel twice is still one read.
        if (loaded.insert(load.getName()).second)
          kc.bytes += bytesPerTokenHead(cast<ChunkTensorType>(load.getType()), at);
        if (load.getName().starts_with(kSavedPrefix) && saved.insert(load.getName()).second)
          cost.savedBytes += bytesPerTokenHead(cast<ChunkTensorType>(load.getType()), at);
      }
      if (auto store = dyn_cast<StoreOp>(op))
        kc.bytes += bytesPerTokenHead(cast<ChunkTensorType>(store.getValue().getType()), at);
      for (Value v : op->getOperands())
        if (!kernel.getBody().isAncestor(v.getParentRegion())) read.insert(v);
    });
    for (Value v : read) kc.bytes += bytesPerTokenHead(cast<ChunkTensorType>(v.getType()), at);
    for (Value r : kernel.getBuffers()) kc.bytes += bytesPerTokenHead(cast<ChunkTensorType>(r.getType()), at);
    cost.plan.kernels.push_back(kc);
  }
  return cost;
}

}  // namespace dgps
