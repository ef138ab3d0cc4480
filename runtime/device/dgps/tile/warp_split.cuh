// A CTA split into NWC consumer warps (warps 0 .. NWC−1) and NWP producer warps after them (0: no split). The
// state walk's producer prepares chunk c+1's operand tile in shared memory while the consumers run chunk c:
//   consumers, per chunk c:  wait for their own loads; sync_all (chunk c's tiles are complete) ... products ...;
//                            sync_all (the consumers are done with chunk c's stage)
//   producer (producer_loop): chunk 0 before the consumers' first sync_all; chunk c+1 between the two sync_all of
//                            chunk c with two stages (the other stage is free), after the second with one.
// The roles meet at named barriers (0 stays __syncthreads): kBarAll (every thread), kBarConsumers, kBarProducer.
// Without a producer every barrier is __syncthreads, so the walk's code is the same either way.
// Register hand-over: a kernel launched with __launch_bounds__(NT, 1) gives every thread the same share; with
// whole warpgroups on both sides and more than 256 threads the producer hands registers to the consumers
// (setmaxnreg: RP per producer thread, RC per consumer thread, RC·NTC + RP·NTP within the 64K register file).
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

template <int NWC, int NWP, int RC = 0, int RP = 0>
struct WarpSplit {
  static constexpr int NTC = NWC * 32, NTP = NWP * 32, NT = NTC + NTP;
  static constexpr int kBarAll = 1, kBarConsumers = 2, kBarProducer = 3;
  /// setmaxnreg moves registers between whole warpgroups only, and only a CTA over 256 threads is short of them.
  static constexpr bool kHandOver = NWP == 4 && NWC % 4 == 0 && NT > 256;

  DGPS_DEV static bool is_producer() { return dev::warp() >= NWC; }
  /// The producer's thread index in [0, NTP).
  DGPS_DEV static int producer_thread() { return dev::tid() - NTC; }
  DGPS_DEV static void sync_all() {
    if (NWP > 0)
      dev::bar_sync(kBarAll, NT);
    else
      dev::sync_threads();
  }
  DGPS_DEV static void sync_consumers() {
    if (NWP > 0)
      dev::bar_sync(kBarConsumers, NTC);
    else
      dev::sync_threads();
  }
  DGPS_DEV static void sync_producer() { dev::bar_sync(kBarProducer, NTP); }

  static_assert(!kHandOver || (RC > 0 && RP > 0 && RC * NTC + RP * NTP <= 65536),
                "a register hand-over needs budgets that fit the register file");

  DGPS_DEV static void producer_registers() {
    if constexpr (kHandOver) dev::regs_dec<RP>();
  }
  DGPS_DEV static void consumer_registers() {
    if constexpr (kHandOver) dev::regs_inc<RC>();
  }

  /// The producer's side of a walk over chunks [c0, nch): produce(c) fills chunk c's stage (STAGES 1 or 2), meeting
  /// the consumers' two sync_all per chunk.
  template <int STAGES, class Produce>
  DGPS_DEV static void producer_loop(int64_t c0, int64_t nch, Produce produce) {
    if (nch > c0) produce(c0);
    for (int64_t c = c0; c < nch; ++c) {
      sync_all();  // chunk c's tiles are complete
      if (STAGES == 2 && c + 1 < nch) produce(c + 1);
      sync_all();  // the consumers are done with chunk c
      if (STAGES == 1 && c + 1 < nch) produce(c + 1);
    }
  }
};

}  // namespace tile
}  // namespace dgps
