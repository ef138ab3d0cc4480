#include "dgps/dsl/LaunchManifest.h"

#include <cstdio>
#include <sstream>

namespace dgps {
namespace {

using launch::FeatureSet;

// A sum of terms, printed as "a + b + c"; empty terms are skipped so feature-dependent parts vanish.
std::string sum(std::initializer_list<std::string> terms) {
  std::string s;
  for (const std::string& t : terms)
    if (!t.empty()) s += (s.empty() ? "" : " + ") + t;
  return s.empty() ? "0" : s;
}

std::string when(bool b, const std::string& term) { return b ? term : std::string(); }

struct Geometry {
  std::string grid, block, smem;
};

// The let names every formula below reads. KP: the key dim padded to the 16-wide MMA tile; slots: chunk
// slots (launch_rules.h chunkSlots: with varlen the device-side bound cdiv(T, C) + N); BV: the value tile
// one state_output CTA covers (launch_rules.h valueTile).
const char* const kLets[][2] = {
    {"KP", "align_up(K, 16)"},
    {"slots", "select(varlen, cdiv(T, chunk) + N, B * cdiv(T, chunk))"},
    {"BV", "min(block_v, align_up(V, 16))"},
};

// launch_rules.h chunkLocalSmem: q, k (and the asymmetric write key) tiles with a 16-byte pad per row;
// with per-channel decay the per-block-pair channel multipliers, the gated column copy (when the key is also a
// row operand), the per-channel cumsum and a separate KKT block, else the KKT block aliases the operand tiles;
// then per-token scalars and the preconditioner state.
std::string chunkLocalSmem(const FeatureSet& f) {
  const bool asym = f.precond == 1 && f.side == 0;
  const std::string tiles = std::string(asym ? "3" : "2") + " * chunk * (KP + 8) * 2";
  const std::string kkt = "chunk * (chunk + 4) * 4";
  const std::string operands =
      f.decay == 2 ? sum({tiles, "chunk / 16 * (chunk / 16 + 1) / 2 * KP * 2",
                          when(!asym && f.solve == 1, "chunk * (KP + 8) * 2"), "chunk * KP * 4", kkt})
                   : "max(" + tiles + ", " + kkt + ")";
  return sum({operands, "chunk * 48 + 64", when(f.precond == 1, "KP * 4")});
}

// launch_rules.h stateOutputSmem: one 128-aligned pipeline stage times `stages`; `segment`: a segment walk's
// (FeatureSet::write_key may give it the stored write key where state_output rebuilds it).
std::string stateOutputSmem(const FeatureSet& f, bool segment = false) {
  const bool opw = f.decay == 2;
  const bool kw = opw || launch::rebuildsKw(f);
  const bool kraw = launch::rawKOwnTile(f, segment);
  const int key_tiles = 2 + (kw ? 1 : 0) + (kraw ? 1 : 0);
  const std::string stage =
      sum({std::to_string(key_tiles) + " * chunk * KP * 2", "chunk * (BV + 8) * 2",
           std::string(f.solve == 1 ? "2" : "1") + " * chunk * (chunk + 8) * 2", "(chunk + 1) * 32",
           when(launch::walkRebuilds(f, segment), "KP * 4"), when(f.decay == 2, "KP * 4")});
  return "align_up(" + stage + ", 128) * stages";
}

// launch_rules.h stateOutputThreads: one consumer warp per 16 value columns, plus a producer warpgroup where the
// walk rebuilds a preconditioned operand (walkRebuilds; `segment`: the corrected walk segment_state_output).
std::string walkThreads(const FeatureSet& f, bool segment) {
  return launch::walkRebuilds(f, segment) ? "(BV / 16 + 4) * 32" : "BV / 16 * 32";
}

// launch_rules.h hypergradSummarySmem: uT [KP][C+4] f32; the raw key tile aliased with 𝒢/𝒯 [C][C+4] f32;
// per-token scalars [8C+8].
const char* const kHypergradSummarySmem =
    "KP * (chunk + 4) * 4 + max(chunk * (KP + 8) * 2, chunk * (chunk + 4) * 4) + (8 * chunk + 8) * 4";
// launch_rules.h hypergradPassSmem: two stages of {key tile, hgtri, hgvec}, then d, w, c and one partial sum
// per thread.
const std::string kHypergradPassSmem = "2 * (chunk * (KP + 8) * 2 + chunk * (chunk + 1) * 2 + (2 * chunk + 4) * 4) + KP * 4 + " +
                                       std::string("chunk * 8 + ") + std::to_string(launch::kHypergradPassThreads * 4);

bool forwardGeometry(const std::string& role, const FeatureSet& f, Geometry* g) {
  const bool chunkedScan = launch::hypergradChunked(f);
  if (role == "precond_summary") {
    // ema_sq_squash: the accumulator's chunk summary; hypergrad_ogd (chunked): the chunk's triangular block.
    *g = chunkedScan ? Geometry{"slots * H", "warps * 32", kHypergradSummarySmem}
                     : Geometry{"slots * H", "warps * 32", "chunk * (KP + 8) * 2 + chunk * 16"};
  } else if (role == "precond_scan") {
    // hypergrad_ogd chunked: one CTA per (sequence, key head) over its chunks; with a clamp: one warp per
    // (sequence, key head), 4 per CTA, 32 key rows per warp in shared memory; ema_sq_squash: one thread per
    // key channel.
    *g = chunkedScan     ? Geometry{"N * H", std::to_string(launch::kHypergradPassThreads), kHypergradPassSmem}
         : f.source == 1 ? Geometry{"cdiv(N * H, 4)", "128", "256 * (KP + 8)"}
                         : Geometry{"N * H", "max(32, align_up(KP, 32))", "0"};
  } else if (role == "chunk_local") {
    *g = {"slots * HV", "warps * 32", chunkLocalSmem(f)};
  } else if (role == "state_output") {
    *g = {"N * HV * cdiv(V, BV)", walkThreads(f, false), stateOutputSmem(f)};
  } else {
    return false;
  }
  return true;
}

// The segment slots of launch_rules.h segmentSlots, over the symbol L (chunks per segment, >= 1 on the
// segmented path). Inline in each formula, not a let: lets are evaluated on the plain path too, where L = 0.
const char* const kSegmentSlots = "select(varlen, T / (chunk * L) + N, N * cdiv(cdiv(T, chunk), L))";

// launch_rules.h segmentGeometry: the summary walks E over value tiles then M over tiles of M's K columns with
// state_output's block and stages; the fold one CTA per (sequence, value head, slab of kSegmentFoldCols value
// columns), kSegmentFoldThreads threads, segmentFoldSmem bytes; the corrected walk as state_output over segment
// slots.
bool segmentGeometry(const std::string& role, const FeatureSet& f, Geometry* g) {
  const std::string slots = std::string(kSegmentSlots) + " * HV";
  // one consumer warp per 16 value columns, plus state_output's producer warpgroup where the walk rebuilds an
  // operand it reads: the write key in both kernels (unless FeatureSet::write_key gives the segment walks the
  // stored one), the query only in the corrected walk (it alone writes o; unless write_key 1 gives it the
  // stored query pwq)
  const std::string consumers = "BV / 16 * 32", withProducers = "(BV / 16 + 4) * 32";
  if (role == "segment_summary") {
    *g = {slots + " * (cdiv(V, BV) + cdiv(K, BV))", launch::walkRebuildsKw(f, true) ? withProducers : consumers,
          stateOutputSmem(f, true)};
  } else if (role == "segment_fold") {
    const std::string cols = std::to_string(launch::kSegmentFoldCols);
    *g = {"N * HV * cdiv(V, " + cols + ")", std::to_string(launch::kSegmentFoldThreads),
          "(2 * K * (K + 4) + 2 * K * " + cols + ") * 4"};
  } else if (role == "segment_state_output") {
    *g = {slots + " * cdiv(V, BV)", walkThreads(f, true), stateOutputSmem(f, true)};
  } else {
    return false;
  }
  return true;
}

void writeKernel(std::ostringstream& os, const std::string& symbol, const Geometry& g) {
  os << "symbol: " << symbol << ", grid: [\"" << g.grid << "\", \"1\", \"1\"], block: [\"" << g.block
     << "\", \"1\", \"1\"], smem: \"" << g.smem << "\"}\n";
}

}  // namespace

std::string layerSectionYaml(const Spec& s) {
  const bool gate = (usesSquash(s) && s.precond.squash.has_gate) || (usesHypergrad(s) && s.precond.hypergrad.has_retention);
  const bool gain = usesSquash(s) && s.precond.squash.has_gain;
  const bool center = usesSquash(s);
  std::string scale = "auto";
  if (s.scale) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", *s.scale);
    scale = buf;
  }
  auto b = [](bool x) { return x ? "true" : "false"; };
  std::ostringstream os;
  os << "layer: {heads_qk: " << s.heads_qk << ", gva_ratio: " << s.gva_ratio << ", scale: " << scale
     << ", precond_inputs: {gate: " << b(gate) << ", gain: " << b(gain) << ", center: " << b(center) << "}}\n";
  return os.str();
}

const char* deviceLayoutHash() { return DGPS_DEVICE_LAYOUT_HASH; }

bool launchSectionYaml(const LaunchSectionRequest& r, std::string* yaml, std::string* error) {
  const FeatureSet& f = r.features;
  std::ostringstream os;
  os << "launch:\n  device_layout: \"" << deviceLayoutHash() << "\"\n  let:\n";
  for (const auto& l : kLets) os << "    - {name: " << l[0] << ", value: \"" << l[1] << "\"}\n";
  if (!r.forward_roles.empty()) {
    os << "  forward:\n";
    for (const std::string& role : r.forward_roles) {
      Geometry g;
      if (!forwardGeometry(role, f, &g)) {
        *error = "kernel role '" + role +
                 "' has no launch formulas (known: precond_summary, precond_scan, chunk_local, state_output; "
                 "dsl/lib/LaunchManifest.cpp)";
        return false;
      }
      os << "    - {role: " << role << ", ";
      writeKernel(os, "dgps_" + r.name + "_fwd_" + role, g);
    }
    os << "  workspace:\n    align: 256\n    buffers:\n";
    for (const auto& b : r.workspace) os << "      - {name: " << b.first << ", bytes: \"" << b.second << "\"}\n";
    if (r.segmented) {
      // the plain roles up to state_output, then the three kernels that replace it
      os << "  forward_segmented:\n    kernels:\n";
      for (const std::string& role : r.forward_roles) {
        if (role == "state_output") break;
        Geometry g;
        forwardGeometry(role, f, &g);
        os << "      - {role: " << role << ", ";
        writeKernel(os, "dgps_" + r.name + "_fwd_" + role, g);
      }
      for (const char* role : {"segment_summary", "segment_fold", "segment_state_output"}) {
        Geometry g;
        segmentGeometry(role, f, &g);
        os << "      - {role: " << role << ", ";
        writeKernel(os, "dgps_" + r.name + "_fwd_" + role, g);
      }
      os << "    buffers:\n";
      for (const auto& b : r.segment_workspace) os << "      - {name: " << b.first << ", bytes: \"" << b.second << "\"}\n";
    }
  }
  if (r.decode) {
    // One CTA per (row, key head) when preconditioned (it owns the key head's preconditioner state),
    // else per (row, value head, 32-column value tile); k̂, write key, query, decay, partial sums in smem.
    const Geometry g{f.precond == 1 ? "B * H" : "B * HV * cdiv(V, 32)", "128", "(4 * KP + 288) * 4"};
    os << "  decode: {";
    writeKernel(os, "dgps_" + r.name + "_decode", g);
  }
  *yaml = os.str();
  return true;
}

}  // namespace dgps
