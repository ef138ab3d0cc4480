// A CPU stand-in for the GPU trial backend. Each "kernel" computes a scalar gated linear recurrence
//   y_t = a_t * y_{t-1} + x_t   (t = 0..T-1, y_{-1} = 0)
// in float, in chunkwise form: within a chunk a local scan from zero plus the carried state times the
// running product of gates (the same split as the WY state pass, docs/math.md §2). validate() compares with
// a float64 token-by-token reference. Outputs are poisoned with NaN before every run.
//
// Per-config behaviours simulate the failures the tuner must survive: compile errors, hanging
// compiles, faults (isolated or context-killing), real numerical bugs, spills, bad timings.
#pragma once

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "dgps/runtime/tuning/TrialBackend.h"

namespace dgps::tuning::test {

enum class Bug {
  None,
  DropCarry,  ///< forgets the state carried across chunk boundaries: wrong for T > chunk.
  SkipTail,   ///< never computes the last partial chunk: leaves poison.
};

struct Behaviour {
  double ms = 1.0;  ///< true mean time per launch.
  bool compile_error = false;
  bool compile_throws = false;
  bool compile_hangs = false;  ///< blocks until cancelled or the deadline passes.
  bool compile_kills_context = false;  ///< module load hits a sticky error.
  bool faults = false;         ///< screen() faults (isolated: context survives).
  bool kills_context = false;  ///< a fault that also leaves contextHealthy() false.
  Bug bug = Bug::None;
  double claimed_err = -1;     ///< >= 0: validate() claims ok with this error (a lenient backend).
  long long local_bytes = 0;
  bool timing_fails = false;
};

struct ConfigLess {
  bool operator()(const TileConfig& a, const TileConfig& b) const {
    return std::tie(a.chunk, a.block_v, a.warps, a.stages) <
           std::tie(b.chunk, b.block_v, b.warps, b.stages);
  }
};

class FakeBackend : public TrialBackend {
 public:
  FakeBackend(std::map<TileConfig, Behaviour, ConfigLess> behaviours, unsigned long long seed,
              double noise = 0.002, int T = 203)
      : behaviours_(std::move(behaviours)), rng_(seed), noise_(noise) {
    std::uniform_real_distribution<double> gate(0.55, 0.999), val(-1.0, 1.0);
    a_.resize(T);
    x_.resize(T);
    ref_.resize(T);
    double y = 0;
    for (int t = 0; t < T; ++t) {
      a_[t] = static_cast<float>(gate(rng_));
      x_[t] = static_cast<float>(val(rng_));
      y = static_cast<double>(a_[t]) * y + static_cast<double>(x_[t]);
      ref_[t] = y;
    }
    out_.assign(T, 0.0f);
  }

  CompileResult compile(const TileConfig& c, const CompileControl& control) override {
    ++compiles;
    const Behaviour& b = behaviour(c);
    if (b.compile_throws) throw std::runtime_error("simulated NVRTC crash");
    if (b.compile_hangs) {
      while (!control.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return {TrialStatus::Timeout, "cancelled", -1, -1};
    }
    if (b.compile_kills_context) {
      dead_ = true;
      return {TrialStatus::CompileError, "cuModuleLoadData: CUDA_ERROR_LAUNCH_FAILED", -1, -1};
    }
    if (b.compile_error) return {TrialStatus::CompileError, "error: too many resources requested\nmore", -1, -1};
    return {TrialStatus::Ok, "", 96, b.local_bytes};
  }

  RunResult runOnce(const TileConfig& c) override {
    ++runs;
    const Behaviour& b = behaviour(c);
    std::fill(out_.begin(), out_.end(), std::numeric_limits<float>::quiet_NaN());  // poison
    if (b.faults) {
      if (b.kills_context) dead_ = true;
      return {TrialStatus::Fault, "CUDA_ERROR_ILLEGAL_ADDRESS (simulated)"};
    }
    const int T = static_cast<int>(a_.size());
    float carry = 0.0f;
    for (int start = 0; start < T; start += c.chunk) {
      const int end = std::min(T, start + c.chunk);
      if (b.bug == Bug::SkipTail && end - start < c.chunk) break;
      if (b.bug == Bug::DropCarry) carry = 0.0f;
      float local = 0.0f, prod = 1.0f;
      for (int t = start; t < end; ++t) {
        local = a_[t] * local + x_[t];
        prod *= a_[t];
        out_[t] = local + prod * carry;
      }
      carry = out_[end - 1];
    }
    return {TrialStatus::Ok, ""};
  }

  Validation validate(const TileConfig& c) override {
    ++validations;
    const Behaviour& b = behaviour(c);
    double scale = 0;
    for (double r : ref_) scale = std::max(scale, std::abs(r));
    const double floorAbs = 0.1 * scale;  // relative error, floored near zero crossings
    double worst = 0;
    for (std::size_t t = 0; t < out_.size(); ++t) {
      if (!std::isfinite(out_[t])) {
        worst = std::numeric_limits<double>::quiet_NaN();
        break;
      }
      worst = std::max(worst, std::abs(out_[t] - ref_[t]) / std::max(std::abs(ref_[t]), floorAbs));
    }
    if (b.claimed_err >= 0) return {true, b.claimed_err, "lenient backend"};
    const bool ok = worst <= 1e-4;  // NaN compares false
    return {ok, worst, ok ? "" : "disagrees with the float64 reference"};
  }

  TimingResult time(const TileConfig& c, int warmup, int reps) override {
    std::lock_guard<std::mutex> lock(mutex_);
    timeCalls.push_back(c);
    const Behaviour& b = behaviour(c);
    if (b.timing_fails) return {TrialStatus::TimingError, {}, "event timing failed (simulated)"};
    warmups += warmup;
    std::normal_distribution<double> n(0.0, noise_);
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) ms.push_back(static_cast<float>(b.ms * (1.0 + n(rng_))));
    return {TrialStatus::Ok, ms, ""};
  }

  bool contextHealthy() override { return !dead_; }

  int timesTimed(const TileConfig& c) const {
    int n = 0;
    for (const TileConfig& t : timeCalls) n += t == c;
    return n;
  }
  int totalCalls() const { return compiles + runs + validations + static_cast<int>(timeCalls.size()); }

  std::atomic<int> compiles{0};
  std::atomic<int> runs{0};
  std::atomic<int> validations{0};
  int warmups = 0;
  std::vector<TileConfig> timeCalls;

 private:
  const Behaviour& behaviour(const TileConfig& c) const {
    auto it = behaviours_.find(c);
    if (it == behaviours_.end()) throw std::logic_error("test asked about an unknown config " + toString(c));
    return it->second;
  }

  std::map<TileConfig, Behaviour, ConfigLess> behaviours_;
  std::mt19937_64 rng_;
  double noise_;
  std::vector<float> a_, x_, out_;
  std::vector<double> ref_;
  std::mutex mutex_;
  std::atomic<bool> dead_{false};
};

}  // namespace dgps::tuning::test
