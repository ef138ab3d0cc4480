// The on-disk cache of compiled kernel images (CUBIN or PTX), so a process does not re-run NVRTC for a
// package, tile configuration and GPU it has seen before.
//
// Location: $DGPS_CACHE_DIR, else $XDG_CACHE_HOME/dgps, else $HOME/.cache/dgps, else
// /tmp/dgps-cache-<euid>. Entries live at <dir>/v1/<key[0:2]>/<key>.bin, where key is the 64-hex-digit
// SHA-256 of everything that changes the binary (JitCompiler::cacheKey).
//
// Trust: the entry checksum only detects corruption (anyone who can write the folder can recompute it),
// so the folder itself must be private. The cache is used only when its folder is a directory owned by
// this user that group and others cannot write (a symbolic link to one is accepted, except for the
// /tmp fallback, which must be the directory itself), and each entry is a regular file with the same
// owner and rule. Folders are created with mode 0700 and checked after creation (lstat). A refused
// folder is reported once per process with warn() and the runtime compiles without caching.
//
// Safety: an entry is written to a unique temporary file in the same folder and renamed over the final
// name, so readers in other threads or processes see either no entry or a complete one. Each entry
// carries a header (magic "DGPSBIN\1", format version, its own key, section sizes, SHA-256 of the
// contents); an entry that is truncated, corrupt or holds another key is reported with warn() and treated
// as a miss, so the caller rebuilds and overwrites it. A cache that cannot be written only warns: the
// compiled image is still returned to the caller.
#pragma once

#include <optional>
#include <string>

namespace dgps {

struct CachedImage {
  std::string image;  ///< CUBIN bytes, or NUL-free PTX text when is_ptx.
  bool is_ptx = false;
  std::string log;    ///< NVRTC's log of the compile that produced the image (ptxas -v resource usage).
};

class BinaryCache {
 public:
  /// A cache rooted at `directory`; an empty string means defaultDirectory(). Nothing is created
  /// until the first store().
  explicit BinaryCache(std::string directory = "");

  /// $DGPS_CACHE_DIR, $XDG_CACHE_HOME/dgps, $HOME/.cache/dgps or /tmp/dgps-cache-<uid>.
  static std::string defaultDirectory();

  const std::string& directory() const { return dir_; }

  /// Whether the cache folder may be used (see "Trust" above). With `create` a missing folder is created
  /// (mode 0700); without it a missing folder is simply not usable (no warning). A refused folder warns
  /// once per process; `why` (optional) receives the reason.
  bool trusted(bool create, std::string* why = nullptr) const;
  /// <dir>/v1/<key[0:2]>/<key>.bin. `key` must be 64 lowercase hex digits (else InvalidArgument).
  std::string entryPath(const std::string& key) const;

  /// The entry for `key`, or nullopt when absent, untrusted or unusable (a corrupt or untrusted entry also
  /// warns). The entry is read with a size limit (file_limits::kCacheEntry).
  std::optional<CachedImage> load(const std::string& key) const;
  /// Writes the entry atomically. Returns false (after a warning) when the cache cannot be written.
  bool store(const std::string& key, const CachedImage& entry) const;

  /// Encodes / decodes the entry format (exposed for tests). decode returns nullopt and sets `why`.
  static std::string encode(const std::string& key, const CachedImage& entry);
  static std::optional<CachedImage> decode(const std::string& bytes, const std::string& key, std::string* why);

 private:
  std::string dir_;
  bool shared_place_ = false;  ///< the /tmp fallback: no symbolic link accepted
};

/// Creates `path` and its parents (like mkdir -p). Returns false and sets `why` on failure.
bool makeDirectories(const std::string& path, std::string* why);

}  // namespace dgps
