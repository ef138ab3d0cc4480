// The emulator's schedules (emu.cpp schedule_order, DGPS_EMU_ORDER): two CTA-wide sums of fresh random values
// share one shared-memory scratch, 4 warps of 32 threads, each sum a warp shuffle tree, one partial per warp in the
// scratch, a barrier, and every thread adding the four partials.
//   with a barrier between the two sums: every order gives both sums (checked here in double);
//   without it: round robin (forward, reverse) still passes — every thread reads the first sum's partials before
//   any warp is one shuffle further — while greedy and greedy-reverse, which run one warp ahead until it waits at a
//   barrier, let it overwrite its partial before the other warps read it, and the first sum comes out wrong.
// That missing barrier is the kind the tile library's contract leaves to its caller (runtime/device/dgps/tile/
// reduce.cuh); this check keeps the emulator's greedy orders able to catch it.
//
//   dgps-emu-order-check        (DGPS_SEED=N fixes the seed)
#include "emu_prelude.h"
#include "dgps/device/platform.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

namespace dev = dgps::dev;

constexpr int kThreads = 128, kWarps = kThreads / 32;

/// x[0..127] and y[0..127]: the two sums' inputs; out[2t], out[2t+1]: thread t's two sums.
void kernel(const float* x, const float* y, float* out, bool barrier) {
  const int t = dev::tid();
  float* const scratch = reinterpret_cast<float*>(dev::dyn_smem());
  float sums[2];
  const float* in[2] = {x, y};
  for (int i = 0; i < 2; ++i) {
    if (i == 1 && barrier) dev::sync_threads();  // the second sum's writes wait for the first sum's readers
    float v = in[i][t];
    for (int m = 16; m >= 1; m /= 2) v += dev::shfl_xor(v, m);
    if (dev::lane() == 0) scratch[dev::warp()] = v;
    dev::sync_threads();
    float s = 0.f;
    for (int w = 0; w < kWarps; ++w) s += scratch[w];
    sums[i] = s;
  }
  out[2 * t] = sums[0];
  out[2 * t + 1] = sums[1];
}

/// Largest error of any thread's two sums against `want`, or infinity when the launch failed.
double run(const char* order, const std::vector<float>& x, const std::vector<float>& y, const double want[2],
           bool barrier) {
  setenv("DGPS_EMU_ORDER", order, 1);
  std::vector<float> out(2 * kThreads, std::nanf(""));
  char err[512] = {0};
  const bool ok = dgps_emu::launch([&] { kernel(x.data(), y.data(), out.data(), barrier); }, 1, kThreads,
                                   kWarps * sizeof(float), err, sizeof err);
  unsetenv("DGPS_EMU_ORDER");
  if (!ok) {
    std::fprintf(stderr, "launch under %s failed: %s\n", order, err);
    return INFINITY;
  }
  double worst = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < 2; ++i) {
      const double got = out[2 * t + i];
      worst = std::isfinite(got) ? std::fmax(worst, std::fabs(got - want[i])) : INFINITY;
    }
  return worst;
}

}  // namespace

int main() {
  const char* env = std::getenv("DGPS_SEED");
  const unsigned seed = env ? (unsigned)std::strtoul(env, nullptr, 10) : std::random_device{}();
  std::printf("dgps-emu-order-check: seed %u\n", seed);
  std::mt19937 rng(seed);
  // positive values well apart in size: a sum that took a wrong partial differs by far more than rounding
  std::uniform_real_distribution<float> u(1.f, 2.f);
  std::vector<float> x(kThreads), y(kThreads);
  double want[2] = {0, 0};
  for (int t = 0; t < kThreads; ++t) {
    x[t] = u(rng);
    y[t] = 100.f * u(rng);
    want[0] += x[t];
    want[1] += y[t];
  }
  const double tol = 1e-4 * want[1];
  int failures = 0;
  for (const char* order : {"forward", "reverse", "shuffle", "greedy", "greedy-reverse"}) {
    const double e = run(order, x, y, want, true);
    std::printf("with the barrier, %s: max error %.3g\n", order, e);
    if (!(e <= tol)) {
      std::fprintf(stderr, "FAIL: %s gives a wrong sum although the kernel is race-free\n", order);
      ++failures;
    }
  }
  for (const char* order : {"greedy", "greedy-reverse"}) {
    const double e = run(order, x, y, want, false);
    std::printf("without the barrier, %s: max error %.3g\n", order, e);
    if (e <= tol) {
      std::fprintf(stderr, "FAIL: %s did not expose the missing barrier between the two sums\n", order);
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
