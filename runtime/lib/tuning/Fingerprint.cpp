#include "dgps/runtime/tuning/Fingerprint.h"

namespace dgps::tuning {
namespace {

void compareField(std::string& out, const char* field, const std::string& recorded,
                  const std::string& current) {
  if (recorded == current) return;
  if (!out.empty()) out += "; ";
  out += std::string(field) + " '" + recorded + "' != '" + current + "'";
}

}  // namespace

bool sameHardware(const DeviceFingerprint& a, const DeviceFingerprint& b) {
  return a.name == b.name && a.compute_capability == b.compute_capability &&
         a.sm_count == b.sm_count;
}

bool identityMatches(const DeviceFingerprint& a, const DeviceFingerprint& b) {
  return sameHardware(a, b) && a.driver_version == b.driver_version &&
         a.nvrtc_version == b.nvrtc_version && a.codegen_version == b.codegen_version;
}

std::string identityMismatch(const DeviceFingerprint& recorded, const DeviceFingerprint& current) {
  std::string out;
  compareField(out, "name", recorded.name, current.name);
  compareField(out, "compute_capability", recorded.compute_capability, current.compute_capability);
  compareField(out, "sm_count", std::to_string(recorded.sm_count), std::to_string(current.sm_count));
  compareField(out, "driver_version", recorded.driver_version, current.driver_version);
  compareField(out, "nvrtc_version", recorded.nvrtc_version, current.nvrtc_version);
  compareField(out, "codegen_version", recorded.codegen_version, current.codegen_version);
  return out;
}

}  // namespace dgps::tuning
