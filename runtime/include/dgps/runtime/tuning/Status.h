// A success flag with one clear message, for tuning-library calls that can fail on I/O or bad input.
// The library never throws across its API and never prints unless asked.
#pragma once

#include <string>
#include <utility>

namespace dgps::tuning {

struct Status {
  bool ok = true;
  std::string message;  ///< empty on success; otherwise what failed, where, and what was expected.

  static Status success() { return {}; }
  static Status error(std::string msg) { return Status{false, std::move(msg)}; }
  explicit operator bool() const { return ok; }
};

}  // namespace dgps::tuning
