// Tensor copies (TMA, sm_90): one thread copies a whole box of a tensor map (abi.h TmaDescriptor) from global into
// shared memory, and an mbarrier in shared memory counts the copied bytes in. With platform.cuh, the only place
// with inline PTX. A copy replaces one cp.async per 16-byte piece per thread: the copy engine walks the box,
// so a tile costs one instruction to issue, and rows at any 16-byte offset cost the SM no extra L1 requests.
//
// The protocol (one phase per use):
//   thread 0: mbar_init(bar, 1) ... for each copy: mbar_expect_tx(bar, bytes); tensor_copy_3d(dst, map, ..., bar)
//             ... mbar_arrive(bar)        (its expect_tx calls come first, so the phase cannot end early)
//   all:      sync_threads() (the barrier is initialised), then mbar_wait(bar, phase & 1).
// The wait makes the copied bytes visible to the waiting thread.
#pragma once

#include "dgps/device/platform.cuh"

#if defined(DGPS_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define DGPS_HAS_TMA 1
#else
#define DGPS_HAS_TMA 0
#endif

namespace dgps {
namespace dev {

#if defined(DGPS_EMU)
DGPS_DEV void mbar_init(uint64_t* bar, int count) { dgps_emu::mbar_init(bar, count); }
DGPS_DEV void mbar_expect_tx(uint64_t* bar, uint32_t bytes) { dgps_emu::mbar_expect_tx(bar, bytes); }
DGPS_DEV void mbar_arrive(uint64_t* bar) { dgps_emu::mbar_arrive(bar); }
DGPS_DEV void mbar_wait(uint64_t* bar, uint32_t parity) { dgps_emu::mbar_wait(bar, parity); }
/// The box of `map` at coordinates (c0, c1, c2) (innermost first) into dst; out-of-bounds elements read as 0.
DGPS_DEV void tensor_copy_3d(void* dst, const TmaDescriptor* map, int c0, int c1, int c2, uint64_t* bar) {
  const int c[3] = {c0, c1, c2};
  dgps_emu::tensor_copy(dst, map->opaque, c, 3, bar);
}
DGPS_DEV void tensor_copy_4d(void* dst, const TmaDescriptor* map, int c0, int c1, int c2, int c3, uint64_t* bar) {
  const int c[4] = {c0, c1, c2, c3};
  dgps_emu::tensor_copy(dst, map->opaque, c, 4, bar);
}
#elif DGPS_HAS_TMA
DGPS_DEV void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
  // the copy engine (the async proxy) must see the initialised barrier before a copy completes on it
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
DGPS_DEV void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
DGPS_DEV void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_u32(bar))
               : "memory");
}
DGPS_DEV void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
/// The box of `map` (a kernel parameter: DGPS_GRID_CONST) at coordinates (c0, c1, c2) (innermost first) into
/// dst (128-byte aligned); out-of-bounds elements read as 0. Completes `box bytes` of transactions on bar.
DGPS_DEV void tensor_copy_3d(void* dst, const TmaDescriptor* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}
DGPS_DEV void tensor_copy_4d(void* dst, const TmaDescriptor* map, int c0, int c1, int c2, int c3, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}
#else
// Before sm_90 there is no copy engine: callers test DGPS_HAS_TMA at compile time, so these never run; they
// exist so that both branches compile.
DGPS_DEV void mbar_init(uint64_t*, int) {}
DGPS_DEV void mbar_expect_tx(uint64_t*, uint32_t) {}
DGPS_DEV void mbar_arrive(uint64_t*) {}
DGPS_DEV void mbar_wait(uint64_t*, uint32_t) {}
DGPS_DEV void tensor_copy_3d(void*, const TmaDescriptor*, int, int, int, uint64_t*) {}
DGPS_DEV void tensor_copy_4d(void*, const TmaDescriptor*, int, int, int, int, uint64_t*) {}
#endif

/// The issuing side of the protocol above for one tile: thread t == 0 announces `bytes` on `bar`, then issues
/// `copy()` (a tensor copy that completes those bytes on `bar`); other threads do nothing.
template <class Copy>
DGPS_DEV void announced_copy(uint64_t* bar, uint32_t bytes, int t, Copy&& copy) {
  if (t != 0) return;
  mbar_expect_tx(bar, bytes);
  copy();
}

}  // namespace dev
}  // namespace dgps
