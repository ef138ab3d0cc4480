// The DGPS device header library: the one header a generated package includes.
//
//   #include "dgps/device/dgps.cuh"
//   namespace { struct Traits { ... }; }   // the spec's axes as compile-time constants (README.md)
//   extern "C" __global__ void dgps_<name>_fwd_<role>(dgps::ForwardArgs a) { dgps::fwd_<role><Traits>(a); }
//   extern "C" __global__ void dgps_<name>_decode(dgps::DecodeArgs a) { dgps::decode<Traits>(a); }
//
// Roles, their order and launch geometry: launch_rules.h. Tile/dtype macros: config.cuh. Compiles with NVRTC
// (no standard headers) and nvcc, for sm_80 and newer (mma.sync, ldmatrix, cp.async); tuned for sm_90a.
#pragma once

#include "dgps/device/platform.cuh"  // first: NVRTC integer typedefs, then abi.h

#if defined(__CUDACC__) && !defined(DGPS_EMU)
// Traits members a spec does not use are normal in generated code.
#pragma nv_diag_suppress 177
#endif
#include "dgps/device/base.cuh"
#include "dgps/device/fwd_precond.cuh"
#include "dgps/device/fwd_chunk_local.cuh"
#include "dgps/device/fwd_state_output.cuh"
#include "dgps/device/decode.cuh"
