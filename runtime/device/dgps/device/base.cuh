// What every generated kernel needs, whatever emitted it: NVRTC integer typedefs and the kernel ABI (platform.cuh,
// abi.h), the compile-time tile configuration (config.cuh), the slot and pitch rules shared with the host
// (launch_rules.h) and the device primitives (common.cuh: thread indices, shared memory, cp.async, mma).
// It holds no recurrence: nothing here knows decay, gain, preconditioner or solve kinds. Every package is printed
// from the tile IR and includes this through dgps/tile/tile.cuh.
#pragma once

#include "dgps/device/platform.cuh"  // first: NVRTC integer typedefs, then abi.h
#include "dgps/device/config.cuh"
#include "dgps/device/launch_rules.h"
#include "dgps/device/common.cuh"
