#include "dgps/dsl/LaunchManifest.h"

#include <cstdio>
#include <sstream>

#include "dgps/dsl/LaunchContract.h"

namespace dgps {
namespace {

using launch::FeatureSet;

// The let names the contract's formulas read (LaunchExpr.h): KP, the key dim padded to the 16-wide MMA tile;
// slots, chunk slots (launch_rules.h chunkSlots: with varlen the device-side bound cdiv(T, C) + N); BV, the
// value tile one walk CTA covers (launch_rules.h valueTile).
const char* const kLets[][2] = {
    {"KP", "align_up(K, 16)"},
    {"slots", "select(varlen, cdiv(T, chunk) + N, B * cdiv(T, chunk))"},
    {"BV", "min(block_v, align_up(V, 16))"},
};

/// One kernel's line: the contract's grid, threads and shared-memory size as formulas.
void writeKernel(std::ostringstream& os, const std::string& symbol, const launch::RoleLaunch& r) {
  os << "symbol: " << symbol << ", grid: [\"" << r.grid.formula() << "\", \"1\", \"1\"], block: [\""
     << r.threads.formula() << "\", \"1\", \"1\"], smem: \"" << launch::smemBytes(r.smem).formula() << "\"}\n";
}

/// The contract's Role for a plan role name; -1 when the contract has none.
int forwardRole(const std::string& role) {
  for (int r = 0; r < launch::kMaxRoles; ++r)
    if (role == launch::roleName(r)) return r;
  return -1;
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
    for (const std::string& role : r.forward_roles)
      if (forwardRole(role) < 0) {
        *error = "kernel role '" + role +
                 "' has no launch contract (known: precond_summary, precond_scan, chunk_local, state_output; "
                 "dsl/lib/LaunchContract.cpp)";
        return false;
      }
    os << "  forward:\n";
    for (const std::string& role : r.forward_roles) {
      os << "    - {role: " << role << ", ";
      writeKernel(os, "dgps_" + r.name + "_fwd_" + role, launch::forwardRoleLaunch(forwardRole(role), f));
    }
    os << "  workspace:\n    align: 256\n    buffers:\n";
    for (const auto& b : r.workspace) os << "      - {name: " << b.first << ", bytes: \"" << b.second << "\"}\n";
    if (r.segmented) {
      // the plain roles up to state_output, then the three kernels that replace it
      os << "  forward_segmented:\n    kernels:\n";
      for (const std::string& role : r.forward_roles) {
        if (role == "state_output") break;
        os << "      - {role: " << role << ", ";
        writeKernel(os, "dgps_" + r.name + "_fwd_" + role, launch::forwardRoleLaunch(forwardRole(role), f));
      }
      for (int role = 0; role < launch::kSegmentRoles; ++role) {
        const std::string name = launch::segmentRoleName(role);
        os << "      - {role: " << name << ", ";
        writeKernel(os, "dgps_" + r.name + "_fwd_" + name, launch::segmentRoleLaunch(role, f));
      }
      os << "    buffers:\n";
      for (const auto& b : r.segment_workspace) os << "      - {name: " << b.first << ", bytes: \"" << b.second << "\"}\n";
    }
  }
  if (r.decode) {
    os << "  decode: {";
    writeKernel(os, "dgps_" + r.name + "_decode", launch::decodeLaunch(f));
  }
  *yaml = os.str();
  return true;
}

}  // namespace dgps
