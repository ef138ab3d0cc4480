// The state-role tile emitter (TileEmitter.h emitTileStateKernel): a state_output tile function (one
// tile.state_walk) -> CUDA calling runtime/device/dgps/tile (state_frag, state_rows_product, value_residual,
// lower_readout, state_rank_update). The kernel keeps the launch contract's ABI, launch geometry and
// shared-memory layout (LaunchContract.h walkLayout of the function's tile.launch_features): each chunk's
// operands are staged by cp.async into stage c % STAGES, loaded one chunk ahead with two stages, and the
// walk's per-chunk steps are printed in the walk's order. The operand sources are checked against the
// layout here, so a walk that names a region the layout lacks is an error at the op, not a bad kernel.
// The same walk body serves the sequence-parallel state pass (emitTileSegmentKernel, emitTileFoldKernel): there
// a CTA walks one segment's chunks, may start from / end in a workspace segment region, or drop the value term
// (the transition product M); the fold calls tile/state_fold.cuh.
#include <sstream>

#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Emit/Package.h"
#include "dgps/Emit/TileEmitter.h"
#include "dgps/dsl/LaunchContract.h"
#include "ScanReadoutFunctor.h"

using namespace mlir;
using namespace dgps::tile;

namespace dgps {
namespace {

/// Checks that the walk's rescale (a producer warpgroup rebuilding the query or the write key) is the one the
/// layout of `f` provides for: its stage tiles (pst, the raw key) and its threads (LaunchContract.h
/// walkThreads). `segment`: a segment walk (FeatureSet::write_key may give it the stored write key).
LogicalResult checkRescale(StateWalkOp w, const launch::FeatureSet& f, bool segment) {
  if (!w.getRescale()) {
    // every walk reads the write key; only a walk that writes o reads the query (a segment summary's do not)
    if (launch::walkRebuildsKw(f, segment) || (launch::walkRebuildsQ(f) && w.getWriteOutput()))
      return w.emitOpError("is in a preconditioned forward (tile.launch_features) but has no rescale: the layout "
                           "stages the preconditioner's operand rebuild (LaunchContract.h walkLayout)");
    return success();
  }
  if (*w.getRescale() == WalkOperand::query && !w.getWriteOutput())
    return w.emitOpError("rescales the query but writes no o, which is the query's only reader");
  const bool query = *w.getRescale() == WalkOperand::query;
  if (f.precond != 1 || (query ? !launch::walkRebuildsQ(f) : !launch::walkRebuildsKw(f, segment)))
    return w.emitOpError() << "rescales the " << (query ? "query" : "write key")
                           << ", which the launch layout of tile.launch_features does not rebuild (DeviceFeatures.h "
                              "walkRebuildsQ / walkRebuildsKw)";
  if (*w.getProducerWarps() != launch::walkProducerWarps(f, segment))
    return w.emitOpError() << "producer_warps " << *w.getProducerWarps() << " differs from the launch's "
                           << launch::walkProducerWarps(f, segment)
                           << " (LaunchContract.h walkProducerWarps)";
  return success();
}

/// Checks that the layout of `f` holds every tile the walk reads.
LogicalResult checkLayout(StateWalkOp w, const launch::FeatureSet& f, bool segment) {
  if (failed(checkRescale(w, f, segment))) return failure();
  auto need = [&](bool ok, const char* what) -> LogicalResult {
    if (ok) return success();
    return w.emitOpError() << "reads " << what << ", which the launch layout of tile.launch_features lacks "
                           << "(LaunchContract.h walkLayout)";
  };
  if (failed(need(w.getQuery() != "opq" || launch::needOpQ(f), "the gated query \"opq\"")) ||
      failed(need(w.getQuery() != "q" || !launch::needOpQ(f), "the raw query \"q\" where the layout stages \"opq\"")) ||
      failed(need(!w.getReadKey() || *w.getReadKey() != "opk" || launch::needOpK(f), "the gated key \"opk\"")) ||
      failed(need(!w.getReadKey() || *w.getReadKey() != "k" || launch::rawKInKTile(f), "the raw key \"k\"")) ||
      failed(need(w.getWriteKey() != "opw" || launch::needOpW(f), "the gated write key \"opw\"")) ||
      failed(need(w.getWriteKey() != "pwk" || (launch::storesKw(f) && !launch::needOpW(f)),
                  "the stored write key \"pwk\"")) ||
      failed(need(w.getQuery() != "pwq" || launch::needPwq(f), "the stored query \"pwq\"")) ||
      failed(need(w.getWriteKey() != "k" || (launch::rawKInKTile(f) && !launch::needOpW(f)),
                  "the raw write key \"k\" where the layout stages \"opw\"")) ||
      failed(need(w.getValueForm() != ValueForm::residual_lower || f.solve == 1, "the solve block \"tb\"")) ||
      failed(need(w.getValueForm() != ValueForm::scaled || f.solve == 0,
                  "no solve block where the layout stages \"tb\" (value_form scaled in a delta-rule layout)")) ||
      failed(need(w.getCarry() != StateCarry::columns || f.decay == 2, "the per-chunk carry vector \"pdec\"")) ||
      failed(need(w.getCarry() != StateCarry::uniform || f.decay == 1, "a uniform carry without a scalar gate")))
    return failure();
  return success();
}

/// The walk's row map of q (`query`) or o as a t::RowMap initializer (row_map.cuh); empty without one.
std::string rowMapOf(StateWalkOp w, bool query) {
  if (!w.getRowSteps()) return "";
  return "t::RowMap{" + std::to_string(*w.getRowSteps()) + ", " +
         std::to_string(query ? *w.getQueryPhase() : *w.getOutputPhase()) + "}";
}

/// Whether the walk's raw q/k stage tiles may go by tensor copies (tile/stage_copy.cuh): only in a walk whose
/// consumers load every tile (no producer warps; their loads keep cp.async).
bool stageCopies(StateWalkOp w) { return !w.getRescale().has_value(); }

/// Which warps load a stage tile: without a rescale the consumers load everything; with one the producer loads
/// what its rebuild reads or rewrites (and the record, which it reads first), the consumers the rest.
enum class Loader { consumers, producer };

/// The loads of chunk c's stage `st` by one side (threads `ti` of `nt`), in the order the deleted hand-written
/// state_output kept (its PTX was matched load for load).
void emitStageLoads(std::ostringstream& os, StateWalkOp w, const launch::FeatureSet& f, Loader side, const char* ti,
                    const char* nt, const char* transSel = nullptr) {
  const bool rawK = (w.getReadKey() && *w.getReadKey() == "k") || w.getWriteKey() == "k";
  const bool re = w.getRescale().has_value();
  const bool reQ = re && *w.getRescale() == WalkOperand::query, reW = re && *w.getRescale() == WalkOperand::write_key;
  auto mine = [&](bool byProducer) { return (side == Loader::producer) == (re && byProducer); };
  const std::string th = std::string(", ") + ti + ", " + nt + ");\n";
  // raw q/k and workspace operand tiles by tensor copies (tile/stage_copy.cuh) in a walk without a producer
  const bool copies = stageCopies(w);
  auto rawTile = [&](const char* tile, const char* name, const char* base) {
    if (copies)
      return std::string("    t::load_core16<C, KP>(t::raw_copies(a), a.") + name + "_core, sbar, sq.bos + c * C, h, " +
             "dev::smem_at<uint16_t>(st, L." + tile + "), " + base + " + rows, H * K, Lr, K" + th;
    return std::string("    dev::load_tile16_core<C, KP>(dev::smem_at<uint16_t>(st, L.") + tile + "), " + base +
           " + rows, H * K, Lr, K" + th;
  };
  // a workspace operand tile chunk_local wrote (region [slots·HV·C][KP]; its chunk starts at row (sh0 + chunk)·C)
  auto wsTile = [&](const char* tile, const char* region, const char* map) {
    const std::string src = std::string("ws16(W.") + region + ", C * KP) + chunk * C * KP, KP, Lr, K" + th;
    if (copies)
      return std::string("    t::load_ws_core16<C, KP>(t::ws_copies(a), a.") + map + ", sbar, (sh0 + chunk) * C, " +
             "dev::smem_at<uint16_t>(st, L." + tile + "), " + src;
    return std::string("    dev::load_tile16_core<C, KP>(dev::smem_at<uint16_t>(st, L.") + tile + "), " + src;
  };
  os << "    unsigned char* const st = sm + (c % STAGES) * L.stage_bytes;\n";
  if (copies) os << "    uint64_t* const sbar = dev::smem_at<uint64_t>(st, L.bar);\n";
  os << "    const int64_t rows = c * C * H * K, chunk = c * HV;  // raw q/k element step, workspace row step\n";
  os << "    const int Lr = (int)dev::lmin(C, sq.len - c * C);\n";
  // the query and the read-out block only serve o (a segment summary's walks read neither)
  const bool out = w.getWriteOutput();
  if (out && mine(reQ) && w.getQuery() == "opq")
    os << wsTile("q", "opq", "wsq_core");
  else if (out && mine(false) && w.getQuery() == "pwq")  // the query chunk_local stored (P ⊙ q, bf16)
    os << wsTile("q", "pwq", "wsq_core");
  else if (out && mine(reQ) && w.getRowSteps())  // q has one row per token: the step rows of the query's phase
    os << "    t::load_rows16_mapped<C, KP, true>(dev::smem_at<uint16_t>(st, L.q), 0, "
          "static_cast<const uint16_t*>(a.q) + h * K, H * K, sq.bos + c * C, Lr, K, "
       << rowMapOf(w, true) << th;
  else if (out && mine(reQ))
    os << rawTile("q", "q", "q0");
  // the raw key in the k tile is the scan's input too: the producer loads it (DeviceFeatures.h rawKInKTile)
  if (w.getReadKey() && *w.getReadKey() == "opk") {
    if (mine(false))
      os << wsTile("k", "opk", "wsk_core");
  } else if ((rawK || (re && launch::rawKInKTile(f))) && mine(true)) {
    os << rawTile("k", "k", "k0");
  }
  if (re && launch::rawKOwnTile(f) && side == Loader::producer)
    os << "    dev::load_tile16_core<C, KP>(dev::smem_at<uint16_t>(st, L.kraw), k0 + rows, H * K, Lr, K" << th;
  if (w.getWriteKey() == "opw" && mine(reW))
    os << wsTile("kw", "opw", "wsw_core");
  // the write key chunk_local stored (P ⊙ k, bf16) into the write-key tile
  if (w.getWriteKey() == "pwk" && mine(false))
    os << wsTile("kw", "pwk", "wsw_core");
  if (re && side == Loader::producer)
    os << "    dev::load_tile32<1, KP>(dev::smem_at<float>(st, L.pst), KP, reinterpret_cast<const float*>(ws + "
          "W.pst) + ((s0 + c) * H + h) * K, K, 1, K"
       << th;
  if (mine(true))
    os << "    dev::load_tile32<C + 1, 8>(dev::smem_at<float>(st, L.tok), 8, reinterpret_cast<const "
          "float*>(ws16(W.tok, (C + 1) * 16)) + chunk * (C + 1) * 8, 8, C + 1, 8"
       << th;
  if (side == Loader::producer) return;
  const std::string value =
      (copies ? std::string("t::load_value16<C, BV>(t::value_copies(a), a.v_rows, sbar, sq.bos + c * C, hv, v0, ")
              : std::string("dev::load_tile16<C, BV>(")) +
      "dev::smem_at<uint16_t>(st, L.v), PV, vg + ((sq.bos + c * C) * HV + hv) * V + v0, HV * V, Lr, V - v0" + th;
  if (transSel)  // a merged summary walk: only the E walk loads values
    os << "    if (!" << transSel << ") " << value;
  else if (!w.getZeroValues())  // zero_values: the value tiles stay the zeros written before the walk
    os << "    " << value;
  if (w.getSolve())
    os << "    t::load_lower_tile<C, PC>(dev::smem_at<uint16_t>(st, L.tb), ws16(W.tb, C * C) + chunk * C * C" << th;
  if (out)
    os << "    t::load_lower_tile<C, PC>(dev::smem_at<uint16_t>(st, L.aqk), ws16(W.aqk, C * C) + chunk * C * C"
       << th;
  if (w.getCarry() == StateCarry::columns)
    os << "    dev::load_tile32<1, KP>(dev::smem_at<float>(st, L.dec), KP, reinterpret_cast<const float*>(ws16(W.pdec, "
          "K * 2)) + chunk * K, K, 1, K"
       << th;
}

/// The consumers' stage loader `stage(c)`: every tile the consumers load for chunk c.
void emitStageLoader(std::ostringstream& os, StateWalkOp w, const launch::FeatureSet& f, const char* transSel) {
  os << "  auto stage = [&](int64_t c) {\n";
  emitStageLoads(os, w, f, Loader::consumers, "ct", "NT", transSel);
  if (stageCopies(w)) os << "    t::stage_copy_arrive(wc, sbar, ct);\n";
  os << "  };\n";
}

/// The producer warps of a walk with a rescale: per chunk, its tiles (emitStageLoads), then P ⊙ X of the
/// rescaled operand (tile/channel_scan.cuh channel_scan_rescale), chunk c+1 while the consumers run chunk c
/// (tile/warp_split.cuh producer_loop); then they leave.
void emitProducer(std::ostringstream& os, StateWalkOp w, const launch::FeatureSet& f, const char* first) {
  const bool query = *w.getRescale() == WalkOperand::query;
  const ScanReadout r = *w.getScanReadout();
  os << "  if (Split::is_producer()) {\n";
  os << "    Split::producer_registers();\n";
  os << "    const int pt = Split::producer_thread();\n";
  ScanReadoutSpec ro;
  ro.kind = r;
  if (w.getScanBase()) ro.base = w.getScanBase()->convertToDouble();
  if (w.getScanEps()) ro.eps = w.getScanEps()->convertToDouble();
  if (w.getScanCenter()) ro.center = "a.precond_center != nullptr ? a.precond_center[h] : 0.f";
  if (w.getScanMin()) ro.min = w.getScanMin()->convertToDouble();
  if (w.getScanMax()) ro.max = w.getScanMax()->convertToDouble();
  printScanReadout(os, "    ", ro, "ro");
  os << "    auto produce = [&](int64_t c) {\n";
  std::ostringstream loads;
  emitStageLoads(loads, w, f, Loader::producer, "pt", "Split::NTP");
  // re-indent the stage's loads one level deeper
  std::string text = loads.str();
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    os << "  " << text.substr(at, nl - at + 1);
    at = nl + 1;
  }
  os << "      dev::cp_async_commit();\n      dev::cp_async_wait<0>();\n      Split::sync_producer();\n";
  os << "      float* const sTok = dev::smem_at<float>(st, L.tok);  // fields 4 and 5: the scan's a and b\n";
  // the target: the query in place (its own codec: bf16 opq or the raw input), the gated write key opw in place,
  // or the raw key's rows into the write-key tile
  const bool fromX = !query && w.getWriteKey() == "k";
  const char* tcodec = (query && w.getQuery() == "q") ? "Codec" : "dev::Act<false>";
  os << "      t::channel_scan_rescale<C, K, KP, Codec, " << tcodec
     << ", " << (fromX ? "true" : "false") << ">(dev::smem_at<uint16_t>(st, " << (query ? "L.q" : "L.kw")
     << "), dev::smem_at<float>(st, L.pst), t::RowVec{sTok + 4, 8}, t::RowVec{sTok + 5, 8}, "
        "dev::smem_at<uint16_t>(st, L.kraw), Lr, ro, pt, Split::NTP);\n";
  // the rescaled tile is written by ordinary stores and read by the consumers' warpgroup MMA (async proxy)
  os << "      if (kWG) dev::fence_proxy_async();\n";
  os << "    };\n";
  os << "    Split::producer_loop<STAGES>(" << first << ", nch, produce);\n";
  os << "    return;\n  }\n";
  os << "  Split::consumer_registers();\n";
}

/// `dgps_package::segment_summary_ctas_per_sm()`, the summary's CTAs per SM as the variant computes it
/// (launch_rules.h segmentSummaryCtasPerSm; warpgroup MMA, which the split product needs, only on sm_90a): the
/// kernel's launch bound, and whether its walks split the state product to fit the register cap that bound sets.
std::string summaryCtasPerSmCuda(bool producers) {
  return std::string("namespace dgps_package {\n"
                     "// segment-summary CTAs per SM: the launch bound of segment_summary (launch_rules.h)\n"
                     "DGPS_HD constexpr int segment_summary_ctas_per_sm() {\n"
                     "  using namespace dgps::cfg;\n"
                     "  return dgps::launch::segmentSummaryCtasPerSm(kSummaryPairs && DGPS_USE_WGMMA, ") +
         (producers ? "true" : "false") + ", KP, C, STAGES, kInputF16, BV);\n}\n}  // namespace dgps_package\n";
}

/// One chunk of the walk (tile.state_walk's formulas, in order). With a rescale the consumers meet the producer
/// at Split::sync_all and each other at Split::sync_consumers; otherwise both are __syncthreads.
void emitChunkStep(std::ostringstream& os, StateWalkOp w, const char* end, const char* first) {
  const bool delta = w.getValueForm() == ValueForm::residual_lower, out = w.getWriteOutput();
  const bool split = w.getRescale().has_value();
  const char* syncAll = split ? "Split::sync_all()" : "dev::sync_threads()";
  const char* syncCons = split ? "Split::sync_consumers()" : "dev::sync_threads()";
  // a rescaled query is bf16 already (the producer wrote it)
  const bool rawQ = w.getQuery() == "q" && !(split && *w.getRescale() == WalkOperand::query);
  const bool rawK = (w.getReadKey() && *w.getReadKey() == "k") || w.getWriteKey() == "k";
  os << "    unsigned char* const st = sm + (c % STAGES) * L.stage_bytes;\n";
  // the chunk's first token, taken at the top of the step: summed at the store instead, it was the one place
  // where kda's PTX differed from the deleted hand-written state_output's (the SASS then differed in its
  // uniform-datapath code)
  if (out) os << "    const int64_t t0 = sq.bos + c * C;\n";
  os << "    const int Lr = (int)dev::lmin(C, sq.len - c * C);\n";
  os << "    if (STAGES == 2) {\n      if (c + 1 < " << end << ") stage(c + 1);\n      dev::cp_async_commit();\n"
        "      dev::cp_async_wait<1>();\n    } else {\n      dev::cp_async_wait<0>();\n    }\n";
  // cp.async fills the tiles through the generic proxy; warpgroup MMA reads them through the async proxy
  os << "    if (kWG) dev::fence_proxy_async();\n";
  os << "    " << syncAll << ";\n";
  if (stageCopies(w))
    os << "    t::stage_copy_wait(wc, dev::smem_at<uint64_t>(st, L.bar), c, " << first << ", STAGES);\n";
  os << "    uint16_t* const sQ = dev::smem_at<uint16_t>(st, L.q);\n";
  os << "    uint16_t* const sK = dev::smem_at<uint16_t>(st, L.k);\n";
  os << "    const uint16_t* const sKw = dev::smem_at<uint16_t>(st, L.kw);  // == sK unless a gated write key is staged\n";
  os << "    uint16_t* const sV = dev::smem_at<uint16_t>(st, L.v);\n";
  os << "    const float* const sTok = dev::smem_at<float>(st, L.tok);  // record fields: 0 a_q, 1 c, 2 w, 3 b\n";
  os << "    (void)sQ;\n    (void)sK;\n";
  // fp16 inputs: the raw input tiles become bf16 tensor-core operands (workspace tiles are bf16 already)
  os << "    if (dgps::cfg::kInputF16) {\n";
  if (rawQ && out) os << "      dev::f16_to_bf16_lin(sQ, C * KP, ct, NT);\n";
  if (rawK) os << "      dev::f16_to_bf16_lin(sK, C * KP, ct, NT);\n";
  os << "      dev::f16_to_bf16_tile<C, BV>(sV, PV, ct, NT);\n";
  os << "      if (kWG) dev::fence_proxy_async();  // the converted tiles feed warpgroup MMA\n";
  os << "      " << syncCons << ";\n    }\n";
  // products with the state: XQ (read-out) and XR (residual), or XR alone without a read-out
  // a linear rule's transition product: N = 0 (no values), so only the carry acts
  const bool carryOnly = w.getZeroValues() && !delta;
  if (!carryOnly)
    os << "    float XQ[NCT][4], XR[NCT][4], N[NCT][4];\n    uint32_t NA[C / 16][4];\n    (void)XQ;\n    (void)XR;\n";
  if (out)
    os << "    t::state_times_rows<C, KP, kWG, " << (delta ? "true" : "false") << ">(XQ, XR, S, sQ, sK);\n";
  else if (delta)  // a walk without o (a segment summary's): kSplitProduct is in its prologue
    os << "    t::state_times_rows<C, KP, kWG, false, kSplitProduct>(XR, XQ, S, sK, sK);\n";
  if (delta)
    os << "    t::residual_lower<C, PV, PC, 8>(N, sV, w, sTok + 1, XR, dev::smem_at<uint16_t>(st, L.tb));\n";
  else if (!carryOnly)
    os << "    t::scaled_values<C, PV, 8>(N, sV, w, sTok + 3);\n";
  if (out) {
    os << "    t::lower_readout<C, PC, 8>(XQ, NA, N, sTok + 0, dev::smem_at<uint16_t>(st, L.aqk));\n";
    // rows of o that are not 32-byte aligned (V = 120) are stored whole by all threads after one barrier
    if (w.getRowSteps())  // o has one row per token: written from the step rows of the output's phase
      os << "    t::store_rows_mapped<C, PV, BV, (V * 2) % 32 != 0, Codec>(XQ, sV, w, og + hv * V, HV * V, "
            "t0, "
         << rowMapOf(w, false) << ", v0, V, Lr, ct, NT, [] { " << syncCons << "; });\n";
    else
      os << "    t::store_rows<C, PV, BV, (V * 2) % 32 != 0, Codec>(XQ, sV, w, og + (t0 * HV + hv) * V, "
          "HV * V, v0, V, Lr, ct, NT, [] { "
       << syncCons << "; });\n";
  }
  if (w.getCarry() == StateCarry::uniform)
    os << "    t::state_scale<KP>(S, sTok[C * 8 + 0]);\n";
  else if (w.getCarry() == StateCarry::columns)
    os << "    t::state_scale_columns<KP>(S, dev::smem_at<float>(st, L.dec));\n";
  if (carryOnly)
    os << "    (void)sKw;\n    (void)sV;\n    (void)sTok;\n";
  else
    os << "    t::state_rank_update<C, KP, 8, kWG>(S, NA, N, sTok + 2, sKw);\n";
  os << "    " << syncAll << ";  // this stage may be overwritten from here on\n";
  os << "    if (STAGES == 1 && c + 1 < " << end << ") {\n      stage(c + 1);\n      dev::cp_async_commit();\n    }\n";
}

}  // namespace

namespace {

/// The function's tile.launch_features as a FeatureSet; fails unless
/// the function has role `role`, grid `grid` and valid features (LaunchFeatures.h).
FailureOr<launch::FeatureSet> featuresOf(func::FuncOp fn, StringRef role, Grid grid) {
  auto r = fn->getAttrOfType<StringAttr>(kRoleAttr);
  auto g = fn->getAttrOfType<StringAttr>(kGridAttr);
  if (!r || r.getValue() != role || !g || g.getValue() != stringifyGrid(grid))
    return fn.emitOpError() << "is not a " << role << " tile function (needs " << kRoleAttr << " = \"" << role
                            << "\", " << kGridAttr << " = \"" << stringifyGrid(grid) << "\" and "
                            << kLaunchFeaturesAttr << ")";
  return launchFeaturesOf(fn);
}

/// The function's tile.state_walk ops, in order (at least one, at most `most`; nothing else but the return).
FailureOr<SmallVector<StateWalkOp>> walksOf(func::FuncOp fn, size_t most) {
  SmallVector<StateWalkOp> walks;
  for (Operation& op : fn.getBody().front()) {
    if (isa<func::ReturnOp>(op)) continue;
    auto w = dyn_cast<StateWalkOp>(op);
    if (!w || walks.size() == most)
      return op.emitOpError() << "has no " << fn->getAttrOfType<StringAttr>(kRoleAttr).getValue()
                              << " tile emitter (the function holds " << (most == 1 ? "one" : "at most two")
                              << " tile.state_walk)";
    walks.push_back(w);
  }
  if (walks.empty()) return fn.emitOpError("tile function without a tile.state_walk");
  return walks;
}

/// The walk: constants, the CTA's coordinates, the stage loader, the state's start, the chunk loop and the
/// end state. `segment`: the CTA is one of the walk's range `bid` of a segment grid and walks one segment's
/// chunks [c0, nch); otherwise one CTA per (sequence, value head, value tile) walks all of its chunks.
/// `transSel` (a segment summary's merged walk, mergedSummaryWalk): `walk` is the E walk, and the body takes the M
/// walk's start, value term, column count and end region where the bool variable `transSel` is true.
void emitWalkBody(std::ostringstream& os, StateWalkOp walk, const launch::FeatureSet& F, bool segment,
                  const char* transSel = nullptr) {
  const bool zero = walk.getZeroValues();
  const std::string sel = transSel ? transSel : "";
  os << "  namespace t = dgps::tile;\n  namespace dev = dgps::dev;\n";
  os << "  using Codec = dgps::dev::Act<dgps::cfg::kInputF16>;\n";
  os << "  constexpr int C = dgps::cfg::C, K = dgps::cfg::K, V = dgps::cfg::V, KP = dgps::cfg::KP, BV = dgps::cfg::BV;\n";
  os << "  constexpr int NCT = C / 8, STAGES = dgps::cfg::STAGES, PV = dgps::launch::bf16Pitch(BV), "
        "PC = dgps::launch::bf16Pitch(C);\n";
  os << "  constexpr int NT = " << launch::walkConsumerThreads().cuda() << ";  // consumer threads\n";
  os << "  // warpgroup MMA needs C = 32 or 64 (N of m64nCk16) and whole warpgroups (BV a multiple of 64)\n";
  os << "  constexpr bool kWG = DGPS_USE_WGMMA && (C == 32 || C == 64) && (BV / 16) % 4 == 0;\n";
  os << "  // The launch contract: the workspace and this walk's shared-memory layout (printed above).\n";
  os << (segment ? "  constexpr dgps_package::SegmentWalkSmem L = dgps_package::segment_walk_smem();\n"
                 : "  constexpr dgps_package::StateOutputSmem L = dgps_package::state_output_smem();\n");
  // A walk with a producer warpgroup (a rescale) runs under a register cap (168 at BV = 128, tile/warp_split.cuh):
  // with the host's offsets ptxas spilled OSDN's fp16 state_output (8 bytes, NVRTC 13.0), and its bf16 one was not
  // faster (374.6 against 376.8 us, docs/performance.md run 23), so it keeps computing the layout from the shape.
  if (walk.getRescale())
    os << "  const dgps_package::Workspace W = dgps_package::workspace_layout(dev::shape_of<void>(a), dev::tile_of(), "
       << (segment ? "a.segment_chunks" : "0") << ");\n";
  else
    os << workspaceOfCuda();
  if (!walk.getWriteOutput() && walk.getValueForm() == ValueForm::residual_lower) {
    // two summary CTAs on an SM cap a 256-thread CTA at 128 registers per thread: the state product then forms
    // its operand a part at a time (tile/state_rows_product.cuh kSplit)
    os << "  constexpr bool kSplitProduct = "
       << (segment ? "dgps_package::segment_summary_ctas_per_sm() * dgps_package::segment_summary_threads() >= 512"
                   : "false")
       << ";\n";
  }
  if (walk.getRescale()) {
    ArrayRef<int32_t> regs = *walk.getRegisters();
    os << "  // producer warps after the consumer warps rebuild the rescaled operand of chunk c+1 while the "
          "consumers run chunk c (tile/warp_split.cuh); registers per consumer / producer thread after the hand-over\n";
    os << "  using Split = t::WarpSplit<NT / 32, " << *walk.getProducerWarps() << ", " << regs[0] << ", " << regs[1]
       << ">;\n";
    os << "  static_assert(Split::NT == dgps_package::" << (segment ? "segment_state_output" : "state_output")
       << "_threads(), \"the launch's threads\");\n";
  }
  os << "  const int64_t H = a.heads_qk, HV = a.heads_v, ratio = HV / H;\n";
  if (!segment) {
    os << "  constexpr int64_t VT = (V + BV - 1) / BV;\n";
    os << "  const int64_t bid = dev::block_x();\n";
    os << "  const int64_t vt = bid % VT, nh = bid / VT, hv = nh % HV, n = nh / HV, h = hv / ratio;\n";
    os << "  const dev::Seq sq = dev::seq_of(a, n);\n";
    os << "  const int64_t s0 = dev::first_slot(a, n, sq.bos), nch = (sq.len + C - 1) / C;\n";
  } else {
    if (transSel) {
      os << "  // tiles of M's K columns (a K x K state) where " << sel << ", else of the V value columns\n";
      os << "  const int64_t VT = " << sel << " ? (K + BV - 1) / BV : (V + BV - 1) / BV;\n";
    } else {
      os << "  // tiles of " << (zero ? "M's K columns (a K x K state)" : "the V value columns") << "\n";
      os << "  constexpr int64_t VT = (" << (zero ? "K" : "V") << " + BV - 1) / BV;\n";
    }
    os << "  const int64_t Ls = a.segment_chunks;  // chunks per segment\n";
    os << "  const int64_t vt = bid % VT, sh = bid / VT, hv = sh % HV, slot = sh / HV, h = hv / ratio;\n";
    os << "  int64_t n = 0, seg = 0;\n";
    os << "  if (!t::slot_to_segment(a.cu_seqlens, a.num_seqs, a.seq_len, C, Ls, dgps::cfg::ROW_STEPS, slot, n, seg)) return;  // slack "
          "slot\n";
    os << "  const dev::Seq sq = dev::seq_of(a, n);\n";
    os << "  // the segment's chunks [c0, nch) of the sequence\n";
    os << "  const int64_t s0 = dev::first_slot(a, n, sq.bos), c0 = seg * Ls, "
          "nch = dev::lmin((sq.len + C - 1) / C, c0 + Ls);\n";
    os << "  (void)W;\n";
  }
  os << "  const int w = dev::warp(), ct = dev::tid(), v0 = (int)vt * BV, vw = v0 + 16 * w;\n";
  os << "  unsigned char* const sm = dev::dyn_smem();\n";
  os << "  unsigned char* const ws = static_cast<unsigned char*>(a.workspace);\n";
  os << "  const uint16_t* const vg = static_cast<const uint16_t*>(a.v);\n";
  os << "  uint16_t* const og = static_cast<uint16_t*>(a.o);\n";
  os << "  const uint16_t* const q0 = static_cast<const uint16_t*>(a.q) + (sq.bos * H + h) * K;\n";
  os << "  const uint16_t* const k0 = static_cast<const uint16_t*>(a.k) + (sq.bos * H + h) * K;\n";
  os << "  (void)og;\n  (void)q0;\n  (void)k0;\n";
  if (zero) os << "  (void)vg;\n";
  os << "  const int64_t sh0 = s0 * HV + hv;  // workspace row (slot·HV + hv) of chunk 0; chunk c adds c·HV\n";
  os << "  auto ws16 = [&](int64_t off, int64_t row_elems) {\n"
        "    return reinterpret_cast<const uint16_t*>(ws + off) + sh0 * row_elems;\n  };\n";
  if (stageCopies(walk)) os << "  const bool wc = t::stage_copies(a);  // raw q/k tiles by tensor copies\n";
  emitStageLoader(os, walk, F, transSel);
  if (walk.getRescale()) emitProducer(os, walk, F, segment ? "c0" : "0");
  if (zero || transSel) {
    os << "  // the value term is dropped: every stage's value tile is zero (the stage loader never writes it)\n";
    os << "  " << (transSel ? "if (" + sel + ") " : "") << "for (int s = 0; s < STAGES; ++s) {\n";
    os << "    uint16_t* const z = dev::smem_at<uint16_t>(sm + s * L.stage_bytes, L.v);\n";
    os << "    for (int i = ct; i < C * PV; i += NT) z[i] = 0;\n  }\n";
  }
  os << "  // the state Sᵀ of this warp's 16 value columns (tile/state_frag.cuh)\n";
  os << "  float S[KP / 8][4];\n";
  const std::string segState = "(slot * HV + hv) * (int64_t)K * ";
  if (transSel) os << "  if (" << sel << ") t::state_identity<KP>(S, K, K, vw);\n  else\n  ";
  switch (walk.getStart()) {
    case StateStart::argument:
      os << "  t::state_start<KP>(S, a.initial_state != nullptr ? a.initial_state + (n * HV + hv) * (int64_t)K * V : "
            "nullptr, K, V, vw);\n";
      break;
    case StateStart::zero:
      os << "  t::state_start<KP>(S, nullptr, K, V, vw);\n";
      break;
    case StateStart::identity:
      os << "  t::state_identity<KP>(S, K, " << (zero ? "K" : "V") << ", vw);\n";
      break;
    case StateStart::region:
      os << "  t::state_start<KP>(S, reinterpret_cast<const float*>(ws + W.seg_start) + " << segState
         << "V, K, V, vw);\n";
      break;
  }
  const char* first = segment ? "c0" : "0";
  if (stageCopies(walk)) os << "  t::stage_copy_init(wc, sm, L.stage_bytes, L.bar, STAGES);\n";
  os << "  if (nch > " << first << ") {\n    stage(" << first << ");\n    dev::cp_async_commit();\n  }\n";
  os << "  for (int64_t c = " << first << "; c < nch; ++c) {\n";
  emitChunkStep(os, walk, "nch", first);
  os << "  }\n";
  if (walk.getWriteFinal())
    os << "  if (a.final_state != nullptr) t::state_store<KP>(S, a.final_state + (n * HV + hv) * (int64_t)K * V, K, V, "
          "vw);\n";
  if (transSel)
    os << "  if (" << sel << ") t::state_store<KP>(S, reinterpret_cast<float*>(ws + W.seg_trans) + " << segState
       << "K, K, K, vw);\n  else\n  ";
  if (auto end = walk.getEndRegion()) {
    const char* width = zero ? "K" : "V";
    os << "  t::state_store<KP>(S, reinterpret_cast<float*>(ws + W." << (zero ? "seg_trans" : "seg_ext") << ") + "
       << segState
       << width << ", K, " << width << ", vw);\n";
  }
}

/// Checks that `e` and `m` are a segment summary's E walk (from zero, into "seg_ext") and M walk (from the identity
/// with the value term dropped, into "seg_trans") that agree on everything else, so one body can print both.
LogicalResult checkMergeable(StateWalkOp e, StateWalkOp m) {
  if (e.getStart() != StateStart::zero || e.getZeroValues() || e.getEndRegion() != std::optional<StringRef>("seg_ext"))
    return e.emitOpError("is not a segment summary's E walk (start zero, end_region \"seg_ext\")");
  if (m.getStart() != StateStart::identity || !m.getZeroValues() ||
      m.getEndRegion() != std::optional<StringRef>("seg_trans"))
    return m.emitOpError("is not a segment summary's M walk (start identity, zero_values, end_region \"seg_trans\")");
  // everything but start, zero_values and end_region must agree: compare the attribute dictionaries without them
  auto rest = [](StateWalkOp w) {
    SmallVector<NamedAttribute> kept;
    for (NamedAttribute a : w->getAttrDictionary())
      if (a.getName() != w.getStartAttrName() && a.getName() != w.getZeroValuesAttrName() &&
          a.getName() != w.getEndRegionAttrName())
        kept.push_back(a);
    return DictionaryAttr::get(w.getContext(), kept);
  };
  if (rest(e) != rest(m))
    return m.emitOpError("differs from the summary's E walk in more than its start, value term and end region");
  return success();
}

/// Checks what a walk may do in its grid: start, end state and output.
LogicalResult checkWalkKind(StateWalkOp w, bool segment) {
  const bool regions = w.getStart() == StateStart::region || w.getEndRegion();
  if (!segment && (regions || w.getStart() == StateStart::identity))
    return w.emitOpError("reads or writes a segment region, or starts from the identity, outside a segment grid");
  if (segment && (w.getStart() == StateStart::argument || w.getWriteFinal()))
    return w.emitOpError("reads initial_state or writes final_state in a segment grid (the fold owns both)");
  if (segment && !w.getWriteOutput() && !w.getEndRegion())
    return w.emitOpError("writes nothing a segment kernel keeps (o or an end_region)");
  return success();
}

}  // namespace

FailureOr<std::string> emitTileStateKernel(func::FuncOp fn, const std::string& symbol) {
  auto features = featuresOf(fn, "state_output", Grid::value_tile);
  if (failed(features)) return failure();
  auto walks = walksOf(fn, 1);
  if (failed(walks)) return failure();
  StateWalkOp walk = walks->front();
  if (failed(checkLayout(walk, *features, false)) || failed(checkWalkKind(walk, false))) return failure();
  std::ostringstream os;
  // one CTA per SM at this thread count fixes ptxas's register budget, as the launch contract assumes
  os << "extern \"C\" __global__ void __launch_bounds__(dgps_package::state_output_threads(), 1) " << symbol
     << "(DGPS_GRID_CONST dgps::ForwardArgs a) {\n";
  os << "  // Generated from tile IR (" << fn.getSymName().str()
     << ", grid value_tile: one CTA per sequence, value head and value tile; one warp per 16 value columns).\n";
  emitWalkBody(os, walk, *features, false);
  os << "}\n";
  return os.str();
}

FailureOr<std::string> emitTileSegmentKernel(func::FuncOp fn, const std::string& symbol) {
  auto role = fn->getAttrOfType<StringAttr>(kRoleAttr);
  if (role && role.getValue() == "segment_fold") return emitTileFoldKernel(fn, symbol);
  const bool summary = role && role.getValue() == "segment_summary";
  auto features = featuresOf(fn, summary ? "segment_summary" : "segment_state_output", Grid::segment);
  if (failed(features)) return failure();
  auto walks = walksOf(fn, 2);
  if (failed(walks)) return failure();
  for (StateWalkOp w : *walks)
    if (failed(checkLayout(w, *features, true)) || failed(checkWalkKind(w, true))) return failure();
  // the kernel's threads (the launch contract, LaunchContract.h segmentRoleLaunch): a walk with a rescale runs state_output's producer
  // warpgroup, so every walk of one kernel must agree on having one
  const bool producers = walks->front().getRescale().has_value();
  for (StateWalkOp w : *walks)
    if (w.getRescale().has_value() != producers)
      return w.emitOpError("differs from the kernel's other walk in having a rescale (one CTA shape per kernel)");
  if (summary ? producers != launch::walkRebuildsKw(*features, true)
              : producers != launch::walkRebuilds(*features, true))
    return walks->front().emitOpError() << "has " << (producers ? "a" : "no")
                                        << " rescale where the launch of tile.launch_features gives the kernel "
                                        << (producers ? "no" : "a")
                                        << " producer warpgroup (LaunchContract.h segmentRoleLaunch)";
  const std::string threads =
      std::string("dgps_package::") + (summary ? "segment_summary" : "segment_state_output") + "_threads()";
  std::ostringstream os;
  if (summary) os << summaryCtasPerSmCuda(producers);
  if (producers && walks->size() == 2) {
    // A producer warpgroup caps the kernel at 65536 / (NT + 128) registers per thread (168 at BV = 128), where
    // one split walk fits at K = 128 but two inlined ones spill (ptxas, sm_90a): the E and M walks, which differ
    // only in their start, value term, column count and end region, become one walk that picks those per CTA.
    if (failed(checkMergeable((*walks)[0], (*walks)[1]))) return failure();
    os << "static __device__ __forceinline__ void " << symbol
       << "_walk(const dgps::ForwardArgs& a, int64_t bid, bool trans) {\n";
    emitWalkBody(os, (*walks)[0], *features, true, "trans");
    os << "}\n";
    os << "extern \"C\" __global__ void __launch_bounds__(" << threads
       << ", dgps_package::segment_summary_ctas_per_sm()) " << symbol
       << "(DGPS_GRID_CONST dgps::ForwardArgs a) {\n";
    os << "  // Generated from tile IR (" << fn.getSymName().str()
       << ", grid segment: one CTA per segment slot, value head and tile; LaunchContract.h segmentRoleLaunch).\n";
    os << "  if (a.segment_chunks < 1) return;  // launched only with a segment length\n";
    os << "  const int64_t bid = dgps::dev::block_x();\n";
    os << "  // the E walk's CTAs (every segment slot x value head x value tile), then the M walk's\n";
    os << "  const int64_t range = dgps::tile::segment_slots(a.cu_seqlens != nullptr, a.num_seqs, a.seq_len, "
          "dgps::cfg::C, a.segment_chunks) * a.heads_v * ((dgps::cfg::V + dgps::cfg::BV - 1) / dgps::cfg::BV);\n";
    os << "  const bool trans = bid >= range;\n";
    os << "  " << symbol << "_walk(a, trans ? bid - range : bid, trans);\n";
    os << "}\n";
    return os.str();
  }
  // each walk is a device function over its own range of the grid's CTAs (TileDialect.td Grid segment)
  for (size_t i = 0; i < walks->size(); ++i) {
    os << "static __device__ __forceinline__ void " << symbol << "_walk" << i
       << "(const dgps::ForwardArgs& a, int64_t bid) {\n";
    emitWalkBody(os, (*walks)[i], *features, true);
    os << "}\n";
  }
  // a summary without a producer warpgroup may share its SM with a second one (launch_rules.h)
  os << "extern \"C\" __global__ void __launch_bounds__(" << threads << ", "
     << (summary ? "dgps_package::segment_summary_ctas_per_sm()" : "1") << ") " << symbol
     << "(DGPS_GRID_CONST dgps::ForwardArgs a) {\n";
  os << "  // Generated from tile IR (" << fn.getSymName().str()
     << ", grid segment: one CTA per segment slot, value head and tile; LaunchContract.h segmentRoleLaunch).\n";
  os << "  if (a.segment_chunks < 1) return;  // launched only with a segment length\n";
  os << "  int64_t bid = dgps::dev::block_x();\n";
  for (size_t i = 0; i < walks->size(); ++i) {
    if (i + 1 == walks->size()) {
      os << "  " << symbol << "_walk" << i << "(a, bid);\n";
      break;
    }
    // the CTAs of walk i: every segment slot x value head x tile of its state's columns
    os << "  {\n    const int64_t range = dgps::tile::segment_slots(a.cu_seqlens != nullptr, a.num_seqs, a.seq_len, "
          "dgps::cfg::C, a.segment_chunks) * a.heads_v * (("
       << ((*walks)[i].getZeroValues() ? "dgps::cfg::K" : "dgps::cfg::V") << " + dgps::cfg::BV - 1) / dgps::cfg::BV);\n";
    os << "    if (bid < range) {\n      " << symbol << "_walk" << i << "(a, bid);\n      return;\n    }\n";
    os << "    bid -= range;\n  }\n";
  }
  os << "}\n";
  return os.str();
}

FailureOr<std::string> emitTileFoldKernel(func::FuncOp fn, const std::string& symbol) {
  auto features = featuresOf(fn, "segment_fold", Grid::value_tile);
  if (failed(features)) return failure();
  StateFoldOp fold;
  for (Operation& op : fn.getBody().front()) {
    if (isa<func::ReturnOp>(op)) continue;
    auto f = dyn_cast<StateFoldOp>(op);
    if (!f || fold) return op.emitOpError("has no segment_fold tile emitter (the function holds one tile.state_fold)");
    fold = f;
  }
  if (!fold) return fn.emitOpError("segment_fold tile function without a tile.state_fold");
  std::ostringstream os;
  os << "extern \"C\" __global__ void __launch_bounds__(dgps::launch::kSegmentFoldThreads) " << symbol
     << "(DGPS_GRID_CONST dgps::ForwardArgs a) {\n";
  os << "  // Generated from tile IR (" << fn.getSymName().str()
     << ", one CTA per sequence, value head and slab of kSegmentFoldCols value columns; LaunchContract.h "
        "segmentRoleLaunch).\n";
  os << "  namespace t = dgps::tile;\n  namespace dev = dgps::dev;\n";
  os << "  constexpr int C = dgps::cfg::C, K = dgps::cfg::K, V = dgps::cfg::V;\n";
  os << "  constexpr int FC = dgps::launch::kSegmentFoldCols;\n";
  os << "  static_assert(FC == t::kFoldCols && dgps::launch::kSegmentFoldThreads == t::kFoldThreads, \"\");\n";
  os << "  const int64_t Ls = a.segment_chunks;  // chunks per segment\n";
  os << "  if (Ls < 1) return;  // launched only with a segment length\n";
  os << workspaceOfCuda();
  os << "  constexpr int64_t VT = (V + FC - 1) / FC;\n";
  os << "  const int64_t HV = a.heads_v, bid = dev::block_x();\n";
  os << "  const int64_t vt = bid % VT, nh = bid / VT, hv = nh % HV, n = nh / HV;\n";
  os << "  const dev::Seq sq = dev::seq_of(a, n);\n";
  os << "  unsigned char* const ws = static_cast<unsigned char*>(a.workspace);\n";
  os << "  t::state_fold<K>(reinterpret_cast<float*>(dev::dyn_smem()), "
        "reinterpret_cast<const float*>(ws + W.seg_trans), "
        "reinterpret_cast<const float*>(ws + W.seg_ext), a.initial_state, reinterpret_cast<float*>(ws + W.seg_start), "
     << (fold.getWriteFinal() ? "a.final_state" : "nullptr")
     << ", n, t::first_segment_slot(a.cu_seqlens, n, a.seq_len, C, Ls, dgps::cfg::ROW_STEPS), t::segment_count(sq.len, C, Ls), hv, HV, V, "
        "(int)vt * FC, dev::tid());\n";
  os << "}\n";
  return os.str();
}

}  // namespace dgps
