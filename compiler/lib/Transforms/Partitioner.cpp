// Groups the ops of a function into chunk.kernel regions by role (Partitioner.h); shared by the forward
// (--chunk-partition-kernels) and the backward (--chunk-partition-backward) partitions.
#include "Partitioner.h"

#include <algorithm>

#include "dgps/Dialect/DGPS/IR/DGPS.h"
#include "dgps/dsl/LaunchContract.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace dgps::chunk;

namespace dgps {

namespace {
/// Whether the decay is per channel (a gate cumsum over [B, T, HV, K]): chunk_local then rebuilds the gated
/// key/query operands for every block row, a latency-bound loop that twice the warps halve.
bool hasPerChannelDecay(func::FuncOp fn) {
  bool found = false;
  fn.walk([&](GateCumsumOp op) {
    if (cast<ChunkTensorType>(op.getGate().getType()).hasDim(Dim::K)) found = true;
  });
  return found;
}
}  // namespace

/// The default point of the tuning space: the configuration measured fastest on the
/// H200 at B=8, T=4096 (BV = 128, two pipeline stages; 8 warps with per-channel decay, 4 otherwise:
/// docs/performance.md, run 5), or the nearest allowed value below it.
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
  // Without a tuning space: the launch contract's defaults (launch_rules.h TileConfig, config.cuh).
  const launch::TileConfig d;
  if (!tuning) return TileAttr::get(fn.getContext(), chunk, d.block_v, d.warps, d.stages);
  return TileAttr::get(fn.getContext(), chunk, pick(tuning.getBlockV().asArrayRef(), 128),
                       pick(tuning.getWarps().asArrayRef(), hasPerChannelDecay(fn) ? 8 : 4),
                       pick(tuning.getStages().asArrayRef(), 2));
}

namespace {

class Partitioner {
 public:
  Partitioner(func::FuncOp fn, const RoleTable& roles)
      : fn_(fn), roles_(roles), n_(static_cast<int>(roles.names.size())), roots_(n_), members_(n_), exported_(n_) {}

  LogicalResult run() {
    Block& body = fn_.getBody().front();
    if (!body.getOps<KernelOp>().empty())
      return fn_.emitError() << "is already partitioned into kernels";
    SmallVector<Operation*> ops;
    for (Operation& op : body.without_terminator()) ops.push_back(&op);

    // 1. Roots: ops with a fixed kernel. Stores run where their value is produced.
    for (Operation* op : ops) {
      int r = roles_.roleOf(op);
      if (auto store = dyn_cast<StoreOp>(op)) {
        Operation* def = store.getValue().getDefiningOp();
        r = def ? roles_.roleOf(def) : kRecompute;
        if (r == kRecompute) r = roles_.storeFallback;
        if (r == kRecompute)
          return store.emitError() << "stores a value no kernel computes (it would be a copy of an input)";
      }
      if (r != kRecompute) roots_[r].push_back(op);
    }

    // 2. Per kernel: the recompute ops its roots need, and the buffers it reads from other kernels.
    for (int k = 0; k < n_; ++k) {
      llvm::SetVector<Operation*> members(roots_[k].begin(), roots_[k].end());
      SmallVector<Operation*> work(roots_[k].begin(), roots_[k].end());
      while (!work.empty()) {
        Operation* op = work.pop_back_val();
        for (Value v : op->getOperands()) {
          Operation* def = v.getDefiningOp();
          if (!def) return op->emitError() << "uses a block argument; chunk IR has none";
          int r = roles_.roleOf(def);
          if (r == kRecompute) {
            if (members.insert(def)) work.push_back(def);
          } else if (r != k) {
            if (r > k)
              return op->emitError() << "in kernel " << roles_.names[k] << " needs a value of the later kernel "
                                     << roles_.names[r];
            exported_[r].insert(v);
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
    for (int k = 0; k < n_; ++k) {
      if (roots_[k].empty()) continue;
      SmallVector<Type> bufferTypes;
      for (Value v : exported_[k]) bufferTypes.push_back(cast<ChunkTensorType>(v.getType()).withGlobal(true));
      auto kernel = b.create<KernelOp>(fn_.getLoc(), bufferTypes, b.getStringAttr(roles_.names[k]),
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
  const RoleTable& roles_;
  int n_;
  std::vector<SmallVector<Operation*>> roots_;
  std::vector<llvm::SetVector<Operation*>> members_;
  std::vector<llvm::SetVector<Value>> exported_;
};

}  // namespace

LogicalResult partitionFunction(func::FuncOp fn, const RoleTable& roles) { return Partitioner(fn, roles).run(); }

}  // namespace dgps
