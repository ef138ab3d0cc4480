#include "dgps/runtime/Log.h"

#include <iostream>
#include <mutex>

namespace dgps {
namespace {
std::mutex& handlerMutex() {
  static std::mutex m;
  return m;
}
WarningHandler& handlerSlot() {
  static WarningHandler h;
  return h;
}
}  // namespace

WarningHandler setWarningHandler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(handlerMutex());
  WarningHandler old = std::move(handlerSlot());
  handlerSlot() = std::move(handler);
  return old;
}

void warn(const std::string& message) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> lock(handlerMutex());
    h = handlerSlot();
  }
  if (h) {
    h(message);
  } else {
    std::cerr << "dgps: warning: " << message << std::endl;
  }
}

}  // namespace dgps
