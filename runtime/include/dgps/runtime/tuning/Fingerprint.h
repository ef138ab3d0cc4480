// The identity of the GPU and toolchain a tuning result was measured on, plus the device limits the
// candidate pruner needs. A tuning record is only ever reused on a device whose identity matches
// exactly: a different GPU, SM count (MIG slice, binned part), driver, NVRTC or DGPS code generator
// can change which configuration is fastest (a toolchain upgrade made the same kernel
// 35% slower), so those records are reported as "foreign", never picked silently.
#pragma once

#include <cstdint>
#include <string>

namespace dgps::tuning {

struct DeviceFingerprint {
  // --- identity: every field below takes part in identityMatches() ---
  std::string name;                ///< cuDeviceGetName, e.g. "NVIDIA H200".
  std::string compute_capability;  ///< with the arch-specific suffix NVRTC targets, e.g. "9.0a", "8.9".
  int sm_count = 0;                ///< CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.
  std::string driver_version;      ///< cuDriverGetVersion rendered "major.minor", e.g. "13.0".
  std::string nvrtc_version;       ///< nvrtcVersion rendered "major.minor".
  std::string codegen_version;     ///< DGPS emitter + device-header version that produced the source.

  // --- limits for pruning only (not identity; they follow from the fields above) ---
  std::int64_t smem_per_block_optin = 0;  ///< bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN.
  std::int64_t smem_per_sm = 0;           ///< bytes, ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR.
  int regs_per_sm = 0;                    ///< 32-bit registers, ..._MAX_REGISTERS_PER_MULTIPROCESSOR.
  int max_threads_per_block = 0;          ///< ..._MAX_THREADS_PER_BLOCK.
  std::int64_t l2_bytes = 0;              ///< bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE.
};

/// True when records measured on `a` may be reused on `b` (all identity fields equal).
bool identityMatches(const DeviceFingerprint& a, const DeviceFingerprint& b);

/// Human-readable list of the identity fields that differ, e.g.
/// "nvrtc_version 12.8 != 13.0; codegen_version dgps-0.1.0 != dgps-0.2.0". Empty when they match.
std::string identityMismatch(const DeviceFingerprint& recorded, const DeviceFingerprint& current);

/// True when only the toolchain (driver, NVRTC, codegen) differs: the same physical GPU model and SM
/// count. Such a record is the natural performance baseline after an upgrade.
bool sameHardware(const DeviceFingerprint& a, const DeviceFingerprint& b);

}  // namespace dgps::tuning
