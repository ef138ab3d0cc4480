// Warnings from the runtime (a corrupt cache entry that is being rebuilt, a CUDA header set that does
// not match the loaded NVRTC). They go to stderr as "dgps: warning: ..." unless a handler is installed.
#pragma once

#include <functional>
#include <string>

namespace dgps {

using WarningHandler = std::function<void(const std::string& message)>;

/// Installs `handler` (nullptr restores the stderr default); returns the previous one. Thread-safe.
WarningHandler setWarningHandler(WarningHandler handler);

/// Sends one warning to the current handler.
void warn(const std::string& message);

}  // namespace dgps
