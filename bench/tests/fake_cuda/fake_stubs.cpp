// Weak fallbacks for every driver entry point the runtime loads (CudaDriver.h's X-list), so the fake
// driver keeps loading when the runtime starts using a new entry point: an entry point that
// fake_libcuda.cpp does not implement returns CUDA_ERROR_NOT_SUPPORTED (801). The symbols are emitted
// with top-level asm under their versioned names (<cuda.h> maps cuMemAlloc to cuMemAlloc_v2), so they
// need no prototypes; the strong definitions in fake_libcuda.cpp win at link time.
#include "dgps/runtime/CudaDriver.h"

#if defined(__x86_64__)
#define DGPS_FAKE_STR2(x) #x
#define DGPS_FAKE_STR(x) DGPS_FAKE_STR2(x)
#define DGPS_FAKE_STUB(name)                                   \
  asm(".text\n"                                                \
      ".weak " DGPS_FAKE_STR(name) "\n"                        \
      ".type " DGPS_FAKE_STR(name) ", @function\n"             \
      DGPS_FAKE_STR(name) ":\n"                                \
      "  movl $801, %eax\n"                                    \
      "  ret\n"                                                \
      ".size " DGPS_FAKE_STR(name) ", .-" DGPS_FAKE_STR(name) "\n");
DGPS_CUDA_DRIVER_FUNCTIONS(DGPS_FAKE_STUB)
#endif
