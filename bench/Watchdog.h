// A hang guard for GPU waits. A kernel that never finishes would block cuEventSynchronize forever and
// the device machine's time limit would kill the run with nothing printed; instead, a wait that lasts
// longer than the limit prints what it was waiting for, lets the caller print the partial results
// table, and ends the process with exit code 3.
#pragma once

#include <functional>
#include <string>

namespace dgps {
namespace bench {

class Watchdog {
 public:
  /// Starts the guard thread. `on_hang` runs on that thread (print the table there), then _exit(3).
  static void start(double limit_seconds, std::function<void(const std::string& what)> on_hang);
  /// Stops the guard thread (idempotent).
  static void stop();

  /// Marks a GPU wait (or any step that must not hang) for its lifetime. Scopes nest (one thread);
  /// the limit applies to the outermost, the message names the innermost.
  class Scope {
   public:
    explicit Scope(const std::string& what);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };
};

}  // namespace bench
}  // namespace dgps
