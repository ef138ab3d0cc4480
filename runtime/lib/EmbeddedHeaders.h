// The device header library (runtime/device/dgps/device/**), embedded into the runtime at build time by
// runtime/cmake/EmbedFiles.cmake and handed to NVRTC as in-memory headers.
#pragma once

#include <cstddef>

namespace dgps {
namespace detail {

struct EmbeddedFile {
  const char* path;  ///< relative to runtime/device, e.g. "dgps/device/abi.h".
  const char* data;  ///< NUL-terminated contents.
  std::size_t size;  ///< bytes, without the NUL.
};

/// All embedded headers, sorted by path.
const EmbeddedFile* embeddedDeviceHeaders(std::size_t* count);

}  // namespace detail
}  // namespace dgps
