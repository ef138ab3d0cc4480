// tile.launch_features (LaunchFeatures.h): the FeatureSet <-> attribute mapping, its verifier and its printing.
#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"

#include "dgps/Dialect/Tile/IR/Tile.h"

using namespace mlir;

namespace dgps::tile {

namespace {

/// One entry of the attribute: its name and its largest code (DeviceFeatures.h FeatureSet).
struct Entry {
  const char* name;
  int max;
};
constexpr Entry kEntries[kLaunchFeatureCount + 1] = {{"decay", 2},  {"gain", 1},  {"precond", 1}, {"side", 1},
                                                     {"source", 1}, {"solve", 1}, {"clamp", 1}, {"write_key", 2}};

launch::FeatureSet fromArray(ArrayRef<int32_t> v) {
  launch::FeatureSet f;
  f.decay = v[0];
  f.gain = v[1];
  f.precond = v[2];
  f.side = v[3];
  f.source = v[4];
  f.solve = v[5];
  f.clamp = v[6];
  f.write_key = v.size() > kLaunchFeatureCount ? v[kLaunchFeatureCount] : launch::kWriteKeyRebuilt;
  return f;
}

/// The function's body agrees with write_key (DeviceFeatures.h storesKw / walkRebuildsKw): a chunk_local
/// stores P ⊙ k̂ exactly when the features say so (tile.store_rows into "pwk", or the opw store of the scanned
/// key), and each walk of a key-side preconditioner takes the form the features give its role.
LogicalResult verifyWriteKeyRoles(Operation* op, const launch::FeatureSet& f) {
  auto role = op->getAttrOfType<StringAttr>(kRoleAttr);
  if (!role || op->getNumRegions() != 1 || op->getRegion(0).empty()) return success();
  const bool stores = launch::storesKw(f);
  if (role.getValue() == "chunk_local") {
    bool pwk = false, scannedOpw = false;
    op->walk([&](Operation* o) {
      if (auto st = dyn_cast<StoreRowsOp>(o)) pwk |= st.getInto() == "pwk";
      if (auto g = dyn_cast<StoreGatedRowsOp>(o))
        scannedOpw |= g.getInto() == "opw" && g.getX().getDefiningOp<ChannelScanOp>();
    });
    const bool stored = launch::needOpW(f) ? scannedOpw : pwk;
    if (stored == stores) return success();
    const char* what = launch::needOpW(f) ? "tile.store_gated_rows into \"opw\" of the scanned key (P ⊙ k)"
                                          : "tile.store_rows into \"pwk\"";
    return op->emitOpError() << kLaunchFeaturesAttr << ": write_key is " << f.write_key << " ("
                             << (stores ? "chunk_local stores" : "the walks rebuild")
                             << " the preconditioned write key) but the function has " << (stores ? "no " : "a ")
                             << what;
  }
  const bool segment = role.getValue() == "segment_summary" || role.getValue() == "segment_state_output";
  if (!segment && role.getValue() != "state_output") return success();
  const bool rebuild = launch::walkRebuildsKw(f, segment);
  LogicalResult result = success();
  op->walk([&](StateWalkOp w) {
    const bool stored = w.getWriteKeyForm() && *w.getWriteKeyForm() == WriteKeyForm::stored;
    const bool keySide = launch::rebuildsKw(f);
    if (keySide ? stored != !rebuild : stored) {
      result = w.emitOpError() << "takes the " << (stored ? "stored" : "rebuilt") << " write key where "
                               << kLaunchFeaturesAttr << " (write_key " << f.write_key << ") gives a "
                               << role.getValue() << " walk "
                               << (keySide ? (rebuild ? "the rebuilt one" : "the stored one") : "no preconditioned one")
                               << " (DeviceFeatures.h walkRebuildsKw)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result;
}

/// The function's body agrees with write_key for a query-side preconditioner (DeviceFeatures.h needPwq /
/// walkRebuildsQ): a chunk_local stores P ⊙ q̂ (tile.store_rows into "pwq") exactly when the features say so, and
/// each walk that writes o (the query's only reader) takes the stored query "pwq" exactly then.
LogicalResult verifyQueryRoles(Operation* op, const launch::FeatureSet& f) {
  auto role = op->getAttrOfType<StringAttr>(kRoleAttr);
  if (!role || op->getNumRegions() != 1 || op->getRegion(0).empty()) return success();
  const bool stores = launch::needPwq(f);
  if (role.getValue() == "chunk_local") {
    bool pwq = false;
    op->walk([&](StoreRowsOp st) { pwq |= st.getInto() == "pwq"; });
    if (pwq == stores) return success();
    return op->emitOpError() << kLaunchFeaturesAttr << ": write_key is " << f.write_key << " ("
                             << (stores ? "chunk_local stores" : "the walks rebuild")
                             << " the preconditioned query) but the function has " << (stores ? "no " : "a ")
                             << "tile.store_rows into \"pwq\"";
  }
  const bool segment = role.getValue() == "segment_summary" || role.getValue() == "segment_state_output";
  if (!segment && role.getValue() != "state_output") return success();
  LogicalResult result = success();
  op->walk([&](StateWalkOp w) {
    const bool stored = w.getQueryForm() && *w.getQueryForm() == WriteKeyForm::stored;
    if (stored != (stores && w.getWriteOutput())) {
      result = w.emitOpError() << "takes the " << (stored ? "stored" : "rebuilt") << " query where "
                               << kLaunchFeaturesAttr << " (write_key " << f.write_key << ") gives this "
                               << role.getValue() << " walk " << (stored ? "the rebuilt one" : "the stored one")
                               << " (DeviceFeatures.h needPwq)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result;
}

}  // namespace

DenseI32ArrayAttr launchFeaturesAttr(Builder& b, const launch::FeatureSet& f) {
  if (f.write_key != launch::kWriteKeyRebuilt)
    return b.getDenseI32ArrayAttr({f.decay, f.gain, f.precond, f.side, f.source, f.solve, f.clamp, f.write_key});
  return b.getDenseI32ArrayAttr({f.decay, f.gain, f.precond, f.side, f.source, f.solve, f.clamp});
}

LogicalResult verifyLaunchFeatures(Operation* op, Attribute value) {
  auto v = dyn_cast<DenseI32ArrayAttr>(value);
  if (!v || (v.size() != kLaunchFeatureCount && v.size() != kLaunchFeatureCount + 1))
    return op->emitOpError() << kLaunchFeaturesAttr << " must be array<i32: decay, gain, precond, side, source, "
                             << "solve, clamp[, write_key]> (DeviceFeatures.h FeatureSet), got " << value;
  for (int i = 0; i < (int)v.size(); ++i)
    if (v[i] < 0 || v[i] > kEntries[i].max)
      return op->emitOpError() << kLaunchFeaturesAttr << ": " << kEntries[i].name << " is " << v[i]
                               << "; expected 0 to " << kEntries[i].max << " (DeviceFeatures.h FeatureSet)";
  const launch::FeatureSet f = fromArray(v.asArrayRef());
  if (f.clamp == 1 && (f.precond != 1 || f.source != 1))
    return op->emitOpError() << kLaunchFeaturesAttr
                             << ": clamp is 1 without a hypergrad_ogd preconditioner (precond 1, source 1); only "
                                "its d-scan has a clamp";
  if (f.write_key != launch::kWriteKeyRebuilt && f.precond != 1)
    return op->emitOpError() << kLaunchFeaturesAttr << ": write_key is " << f.write_key
                             << " without a preconditioner (precond 1); only its walks rebuild an operand (the "
                                "write key or the query)";
  if (f.write_key == launch::kWriteKeyStoredSegments && launch::rebuildsQ(f))
    return op->emitOpError() << kLaunchFeaturesAttr
                             << ": write_key 2 (stored for the segment walks only) with a query-side preconditioner: "
                                "the segment summaries read no query; expected 0 or 1";
  if (f.write_key != launch::kWriteKeyRebuilt && launch::rebuildsQ(f) && launch::needOpQ(f))
    return op->emitOpError() << kLaunchFeaturesAttr << ": write_key is " << f.write_key
                             << " with a query-side preconditioner and per-channel decay: the stored query (pwq) "
                                "exists for scalar or no decay only; expected 0";
  if (f.write_key == launch::kWriteKeyStoredSegments && launch::needOpW(f))
    return op->emitOpError() << kLaunchFeaturesAttr
                             << ": write_key 2 (stored for the segment walks only) with per-channel decay: the "
                                "stored key lives in opw, which every walk reads, so state_output cannot rebuild it";
  if (failed(verifyWriteKeyRoles(op, f))) return failure();
  return launch::rebuildsQ(f) ? verifyQueryRoles(op, f) : success();
}

FailureOr<launch::FeatureSet> launchFeaturesOf(Operation* fn) {
  Attribute value = fn->getAttr(kLaunchFeaturesAttr);
  if (!value) return fn->emitOpError() << "has no " << kLaunchFeaturesAttr << " (DeviceFeatures.h FeatureSet)";
  if (failed(verifyLaunchFeatures(fn, value))) return failure();
  return fromArray(cast<DenseI32ArrayAttr>(value).asArrayRef());
}

}  // namespace dgps::tile
