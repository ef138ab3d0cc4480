// Force-included (-include) when a kernel variant is compiled for the CPU emulator: maps the CUDA
// qualifiers to plain C++ and selects the emulator hooks in platform.cuh.
#pragma once
#define DGPS_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#include <cstdint>
