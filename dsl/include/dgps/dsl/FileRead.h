#pragma once
// Bounded reading of untrusted files: every tool that opens a spec, manifest, tensor file, tuning
// database or cache entry goes through here, so a FIFO, a device (/dev/zero), a directory or a huge file
// is refused with one message instead of blocking forever or reading until memory runs out.

#include <cstdint>
#include <string>

namespace dgps {

/// Limits for the kinds of file DGPS reads. Text formats are small; tensor files and CUBINs are not.
namespace file_limits {
inline constexpr std::uint64_t kSpec = 1ull << 20;            ///< spec YAML: 1 MiB
inline constexpr std::uint64_t kManifest = 4ull << 20;        ///< package manifest / spec.yaml: 4 MiB
inline constexpr std::uint64_t kSource = 16ull << 20;         ///< generated kernels.cu: 16 MiB
inline constexpr std::uint64_t kTuningDb = 64ull << 20;       ///< tuning database (JSON lines): 64 MiB
inline constexpr std::uint64_t kCacheEntry = 256ull << 20;    ///< one binary-cache entry: 256 MiB
inline constexpr std::uint64_t kTensors = 64ull << 30;        ///< a safetensors file: 64 GiB
}  // namespace file_limits

/// The outcome of readRegularFile: `ok` with the bytes in `data`, or `error` saying what was wrong
/// ("is a FIFO, not a regular file", "is 2147483648 bytes; the limit for a spec is 1048576 bytes", ...).
struct FileReadResult {
  bool ok = false;
  std::string data;
  std::string error;  ///< without the path; callers prefix it ("<path>: <error>")
};

/// Reads the whole of `path` if it is a regular file (symbolic links are followed) of at most
/// `maxBytes` bytes. Never blocks on a FIFO (the file is opened non-blocking and checked with fstat
/// before any read), never allocates more than `maxBytes` + 1 bytes, and re-checks the size while
/// reading, so a file that grows under us is refused rather than read without bound.
/// `what` names the kind of file in the size message ("a spec", "a tuning database").
/// Does not throw (an allocation failure becomes an error result).
FileReadResult readRegularFile(const std::string& path, std::uint64_t maxBytes, const std::string& what);

}  // namespace dgps
