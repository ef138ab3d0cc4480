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

// The roles of the device library in launch order (runtime/device/dgps/device/launch_rules.h).
enum class Role { PrecondSummary = 0, PrecondScan = 1, ChunkLocal = 2, StateOutput = 3, Recompute = 4 };
constexpr int kNumKernels = 4;
const char* roleName(Role r) {
  switch (r) {
    case Role::PrecondSummary: return "precond_summary";
    case Role::PrecondScan: return "precond_scan";
    case Role::ChunkLocal: return "chunk_local";
    case Role::StateOutput: return "state_output";
    case Role::Recompute: break;
  }
  return "recompute";
}

/// Where an op runs:
///   precond_summary  per-chunk accumulator summaries (parallel over chunks),
///   precond_scan     sequential pass producing chunk-start preconditioner states,
///   chunk_local      everything of a chunk that does not depend on the memory state (KKT, 𝒯, Aqk),
///   state_output     the sequential state pass with W, U formed on the fly, and the output.
/// Recompute ops are per-token or per-chunk work that is cheaper to redo than to store and re-read (loads,
/// normalisation, gate cumsums, and applying the diagonal preconditioner from its chunk-start state): they are
/// cloned into every kernel that uses them. The preconditioned write key P⊙k (ATK) or query P⊙q (ATQ) is
/// therefore rebuilt in chunk_local and again in state_output and never becomes a device-memory buffer
/// (device library: precond_rebuild.cuh; the state_output rebuild overlaps its warpgroup products).
Role roleOf(Operation* op) {
  return llvm::TypeSwitch<Operation*, Role>(op)
      .Case<AccumSummaryOp>([](auto) { return Role::PrecondSummary; })
      .Case<AccumScanOp, AccumPassOp, HypergradScanOp, HypergradPassOp>([](auto) { return Role::PrecondScan; })
      .Case<KKTOp, SolveTrilOp, QKAttnOp>([](auto) { return Role::ChunkLocal; })
      .Case<WYRecomputeOp, GainScaleOp, StatePassOp, OutputOp>([](auto) { return Role::StateOutput; })
      .Default([](Operation*) { return Role::Recompute; });
}

/// The default point of the tuning space: the configuration the device library measured fastest on the
/// H200 at the anchor shapes (BV = 128, two pipeline stages; tests/gpu_kernels/results/NOTES.md), or the
/// nearest allowed value below it.
TileAttr defaultTile(func::FuncOp fn) {
  auto pick = [](ArrayRef<int64_t> allowed, int64_t preferred) -> int64_t {
    if (allowed.empty() || llvm::is_contained(allowed, preferred)) return preferred;
    int64_t best = allowed.front();
    for (int64_t v : allowed)
      if (v <= preferred) best = std::max(best, v);
    return best;
  };
  int64_t chunk = 64;
  if (auto c = fn->getAttrOfType<IntegerAttr>(kChunkSizeAttr)) chunk = c.getInt();
  auto tuning = fn->getAttrOfType<dgps::ir::TuningAttr>(kTuningAttr);
  if (!tuning) return TileAttr::get(fn.getContext(), chunk, 64, 4, 1);
  return TileAttr::get(fn.getContext(), chunk, pick(tuning.getBlockV().asArrayRef(), 128),
                       pick(tuning.getWarps().asArrayRef(), 4), pick(tuning.getStages().asArrayRef(), 2));
}

class Partitioner {
 public:
  explicit Partitioner(func::FuncOp fn) : fn_(fn) {}

  LogicalResult run() {
    Block& body = fn_.getBody().front();
    if (!body.getOps<KernelOp>().empty())
      return fn_.emitError() << "is already partitioned into kernels";
    SmallVector<Operation*> ops;
    for (Operation& op : body.without_terminator()) ops.push_back(&op);

    // 1. Roots: ops with a fixed kernel. Stores run where their value is produced.
    for (Operation* op : ops) {
      Role r = roleOf(op);
      if (auto store = dyn_cast<StoreOp>(op)) {
        Operation* def = store.getValue().getDefiningOp();
        r = def ? roleOf(def) : Role::Recompute;
        if (r == Role::Recompute)
          return store.emitError() << "stores a value no kernel computes (it would be a copy of an input)";
      }
      if (r != Role::Recompute) roots_[static_cast<int>(r)].push_back(op);
    }

    // 2. Per kernel: the recompute ops its roots need, and the buffers it reads from other kernels.
    for (int k = 0; k < kNumKernels; ++k) {
      llvm::SetVector<Operation*> members(roots_[k].begin(), roots_[k].end());
      SmallVector<Operation*> work(roots_[k].begin(), roots_[k].end());
      while (!work.empty()) {
        Operation* op = work.pop_back_val();
        for (Value v : op->getOperands()) {
          Operation* def = v.getDefiningOp();
          if (!def) return op->emitError() << "uses a block argument; chunk IR has none";
          Role r = roleOf(def);
          if (r == Role::Recompute) {
            if (members.insert(def)) work.push_back(def);
          } else if (static_cast<int>(r) != k) {
            if (static_cast<int>(r) > k)
              return op->emitError() << "in kernel " << roleName(static_cast<Role>(k))
                                     << " needs a value of the later kernel " << roleName(r);
            exported_[static_cast<int>(r)].insert(v);
          }
        }
      }
      members_[k] = std::move(members);
    }

    // Buffers in program order of their producers, so the printed IR reads top to bottom.
    llvm::DenseMap<Operation*, size_t> position;
    for (size_t i = 0; i < ops.size(); ++i) position[ops[i]] = i;
    for (auto& exported : exported_) {
      SmallVector<Value> sorted(exported.begin(), exported.end());
      llvm::stable_sort(sorted, [&](Value a, Value b) {
        size_t pa = position[a.getDefiningOp()], pb = position[b.getDefiningOp()];
        return pa != pb ? pa < pb : cast<OpResult>(a).getResultNumber() < cast<OpResult>(b).getResultNumber();
      });
      exported = llvm::SetVector<Value>(sorted.begin(), sorted.end());
    }

    // 3. Build the kernels in role order, then drop the flat ops.
    OpBuilder b(body.getTerminator());
    IRMapping toBuffer;  // value of an earlier kernel -> that kernel's result
    TileAttr tile = defaultTile(fn_);
    for (int k = 0; k < kNumKernels; ++k) {
      if (roots_[k].empty()) continue;
      SmallVector<Type> bufferTypes;
      for (Value v : exported_[k]) bufferTypes.push_back(cast<ChunkTensorType>(v.getType()).withGlobal(true));
      auto kernel = b.create<KernelOp>(fn_.getLoc(), bufferTypes, b.getStringAttr(roleName(static_cast<Role>(k))),
                                       tile);
      Block* kb = new Block();
      kernel.getBody().push_back(kb);
      OpBuilder kbuilder = OpBuilder::atBlockEnd(kb);
      IRMapping map = toBuffer;
      for (Operation* op : ops)  // program order is a topological order
        if (members_[k].contains(op)) kbuilder.clone(*op, map);
      SmallVector<Value> yielded;
      for (Value v : exported_[k]) yielded.push_back(map.lookup(v));
      kbuilder.create<YieldOp>(fn_.getLoc(), yielded);
      for (auto [v, r] : llvm::zip(exported_[k], kernel.getBuffers())) toBuffer.map(v, r);
    }
    for (Operation* op : llvm::reverse(ops)) {
      op->dropAllUses();
      op->erase();
    }
    return success();
  }

 private:
  func::FuncOp fn_;
  SmallVector<Operation*> roots_[kNumKernels];
  llvm::SetVector<Operation*> members_[kNumKernels];
  llvm::SetVector<Value> exported_[kNumKernels];
};

std::string formatBytes(double x) { return std::to_string(static_cast<int64_t>(std::llround(x))); }

struct PartitionKernelsPass : dgps::impl::PartitionKernelsBase<PartitionKernelsPass> {
  void runOnOperation() override {
    for (func::FuncOp fn : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      if (!fn->hasAttr(kChunkSizeAttr)) continue;  // not a lowered forward
      // The plan divides by chunk.chunk_size and chunk.gva_ratio and sizes tiles from chunk.tuning: make
      // sure the chunk dialect's attribute verifier has accepted them even when no verifier ran before
      // this pass (a module built or edited in code).
      if (failed(mlir::verify(fn))) return signalPassFailure();
      if (failed(Partitioner(fn).run())) return signalPassFailure();
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
      for (const std::string& e : cost.extraBuffers) remark << "; outside the library's workspace: " << e;
      remark << ")";
    }
  }
};

}  // namespace
