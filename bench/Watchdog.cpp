#include "Watchdog.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace dgps {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  bool running = false;
  bool stop = false;
  double limit_s = 300;
  std::function<void(const std::string&)> on_hang;
  struct Entry {
    std::string what;
    Clock::time_point since;
  };
  std::vector<Entry> scopes;  // outermost first
};

State& state() {
  static State s;
  return s;
}

void loop() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  while (!s.stop) {
    s.cv.wait_for(lock, std::chrono::milliseconds(500));
    if (s.stop || s.scopes.empty()) continue;
    // The outermost scope is the oldest: it runs over first.
    const double waited = std::chrono::duration<double>(Clock::now() - s.scopes.front().since).count();
    if (waited < s.limit_s) continue;
    std::string what = s.scopes.back().what;
    if (s.scopes.size() > 1) what += " (during " + s.scopes.front().what + ")";
    auto on_hang = s.on_hang;
    lock.unlock();
    std::fprintf(stderr, "\ndgps-bench: %s has not finished after %.0f s (limit --dgps_hang_s=%.0f); giving up\n",
                 what.c_str(), waited, s.limit_s);
    std::fflush(stderr);
    if (on_hang) on_hang(what);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(3);  // the main thread is stuck inside the driver: no clean shutdown is possible
  }
}

}  // namespace

void Watchdog::start(double limit_seconds, std::function<void(const std::string&)> on_hang) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.running) return;
  s.limit_s = limit_seconds;
  s.on_hang = std::move(on_hang);
  s.stop = false;
  s.running = true;
  s.thread = std::thread(loop);
}

void Watchdog::stop() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.running) return;
    s.stop = true;
  }
  s.cv.notify_all();
  s.thread.join();
  std::lock_guard<std::mutex> lock(s.mu);
  s.running = false;
}

Watchdog::Scope::Scope(const std::string& what) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.scopes.push_back(State::Entry{what, Clock::now()});
}

Watchdog::Scope::~Scope() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.scopes.empty()) s.scopes.pop_back();
}

}  // namespace bench
}  // namespace dgps
