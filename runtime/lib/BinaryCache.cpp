#include "dgps/runtime/BinaryCache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "OwnedFolder.h"
#include "Sha256.h"
#include "dgps/dsl/FileRead.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Log.h"

namespace dgps {
namespace {

constexpr char kMagic[8] = {'D', 'G', 'P', 'S', 'B', 'I', 'N', '\1'};
constexpr std::uint32_t kFormatVersion = 1;
// magic, version, kind, key length, image length, log length, checksum
constexpr std::size_t kHeaderFixed = 8 + 4 + 4 + 8 + 8 + 8 + 32;

void putU32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
void putU64(std::string& s, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
std::uint64_t getU(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(std::uint8_t(s[at + i])) << (8 * i);
  return v;
}

std::string checksum(const std::string& key, std::uint32_t kind, const std::string& image, const std::string& log) {
  detail::Sha256 h;
  h.field(key);
  h.field(std::to_string(kind));
  h.field(image);
  h.field(log);
  auto d = h.digest();
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

bool isHexKey(const std::string& key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A name no other thread or process uses at the same time: pid, thread id and a per-process counter.
std::string uniqueSuffix() {
  static std::atomic<unsigned long long> counter{0};
  std::ostringstream os;
  os << ::getpid() << "." << std::hash<std::thread::id>()(std::this_thread::get_id()) << "." << counter++;
  return os.str();
}

std::string fallbackDirectory() { return "/tmp/dgps-cache-" + std::to_string(::geteuid()); }

// One warning per message per process: a refused folder is reported once, not for every kernel.
void warnOnce(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!said.insert(message).second) return;
  }
  warn(message);
}

}  // namespace

bool makeDirectories(const std::string& path, std::string* why) {
  if (path.empty()) {
    if (why) *why = "empty path";
    return false;
  }
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      if (why) *why = "cannot create " + partial + ": " + std::strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (why) *why = path + " exists but is not a directory";
    return false;
  }
  return true;
}

BinaryCache::BinaryCache(std::string directory) : dir_(directory.empty() ? defaultDirectory() : std::move(directory)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  shared_place_ = dir_ == fallbackDirectory();
}

bool BinaryCache::trusted(bool create, std::string* why) const {
  std::string problem;
  bool exists = true;
  if (create) {
    problem = detail::makePrivateFolder(dir_, !shared_place_);
  } else {
    problem = detail::folderProblem(dir_, !shared_place_, &exists);
    if (!exists) {
      if (why) *why = "folder " + dir_ + " does not exist";
      return false;
    }
  }
  if (problem.empty()) return true;
  if (why) *why = problem;
  warnOnce("binary cache not used: " + problem + "; kernels are compiled and not cached (use a folder of your "
           "own with mode 0700 or 0755, e.g. DGPS_CACHE_DIR=$HOME/.cache/dgps)");
  return false;
}

std::string BinaryCache::defaultDirectory() {
  std::string d = envOr("DGPS_CACHE_DIR");
  if (!d.empty()) return d;
  d = envOr("XDG_CACHE_HOME");
  if (!d.empty()) return d + "/dgps";
  d = envOr("HOME");
  if (!d.empty()) return d + "/.cache/dgps";
  return fallbackDirectory();
}

std::string BinaryCache::entryPath(const std::string& key) const {
  if (!isHexKey(key)) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "binary cache key must be 64 lowercase hex digits, got \"" + key + "\"");
  }
  return dir_ + "/v1/" + key.substr(0, 2) + "/" + key + ".bin";
}

std::string BinaryCache::encode(const std::string& key, const CachedImage& e) {
  std::uint32_t kind = e.is_ptx ? 1 : 0;
  std::string s;
  s.reserve(kHeaderFixed + key.size() + e.image.size() + e.log.size());
  s.append(kMagic, sizeof(kMagic));
  putU32(s, kFormatVersion);
  putU32(s, kind);
  putU64(s, key.size());
  putU64(s, e.image.size());
  putU64(s, e.log.size());
  s += checksum(key, kind, e.image, e.log);
  s += key;
  s += e.image;
  s += e.log;
  return s;
}

std::optional<CachedImage> BinaryCache::decode(const std::string& b, const std::string& key, std::string* why) {
  auto fail = [&](const std::string& m) -> std::optional<CachedImage> {
    if (why) *why = m;
    return std::nullopt;
  };
  if (b.size() < kHeaderFixed) return fail("truncated header (" + std::to_string(b.size()) + " bytes)");
  if (std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0) return fail("bad magic (not a DGPS cache entry)");
  std::uint64_t version = getU(b, 8, 4);
  if (version != kFormatVersion) return fail("format version " + std::to_string(version) + ", expected 1");
  std::uint64_t kind = getU(b, 12, 4);
  if (kind > 1) return fail("unknown image kind " + std::to_string(kind));
  std::uint64_t key_len = getU(b, 16, 8), image_len = getU(b, 24, 8), log_len = getU(b, 32, 8);
  std::uint64_t body = b.size() - kHeaderFixed;
  // Compare without overflow: each length must fit in what remains.
  if (key_len > body || image_len > body - key_len || log_len > body - key_len - image_len ||
      key_len + image_len + log_len != body) {
    return fail("size mismatch (header promises " + std::to_string(key_len) + "+" + std::to_string(image_len) +
                "+" + std::to_string(log_len) + " bytes, file has " + std::to_string(body) + "): truncated or corrupt");
  }
  std::string stored_key = b.substr(kHeaderFixed, key_len);
  if (stored_key != key) return fail("entry holds key " + stored_key + ", expected " + key);
  CachedImage e;
  e.is_ptx = kind == 1;
  e.image = b.substr(kHeaderFixed + key_len, image_len);
  e.log = b.substr(kHeaderFixed + key_len + image_len, log_len);
  if (checksum(key, std::uint32_t(kind), e.image, e.log) != b.substr(40, 32)) return fail("checksum mismatch");
  if (e.image.empty()) return fail("empty image");
  return e;
}

std::optional<CachedImage> BinaryCache::load(const std::string& key) const {
  const std::string path = entryPath(key);
  if (!trusted(/*create=*/false, nullptr)) return std::nullopt;
  // Every folder below the root and the entry itself follow the same rule: a planted subfolder or
  // file is as dangerous as a planted root.
  const std::string v1 = dir_ + "/v1", shard = v1 + "/" + key.substr(0, 2);
  for (const std::string& folder : {v1, shard}) {
    bool exists = true;
    const std::string problem = detail::folderProblem(folder, false, &exists);
    if (!exists) return std::nullopt;  // a miss
    if (!problem.empty()) {
      warnOnce("binary cache entries under " + folder + " are not used: " + problem);
      return std::nullopt;
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;  // a miss
  if (std::string problem = detail::fileProblem(path); !problem.empty()) {
    warnOnce("binary cache entry not used: " + problem + "; recompiling");
    return std::nullopt;
  }
  FileReadResult f = readRegularFile(path, file_limits::kCacheEntry, "a binary-cache entry");
  if (!f.ok) {
    warn("binary cache entry " + path + " is unusable (" + f.error + "); recompiling and replacing it");
    return std::nullopt;
  }
  std::string why;
  auto e = decode(f.data, key, &why);
  if (!e) warn("binary cache entry " + path + " is unusable (" + why + "); recompiling and replacing it");
  return e;
}
bool BinaryCache::store(const std::string& key, const CachedImage& entry) const {
  std::string path = entryPath(key);
  std::string folder = path.substr(0, path.rfind('/'));
  std::string why;
  if (!trusted(/*create=*/true, &why)) return false;  // trusted() has warned
  for (const std::string& f : {dir_ + "/v1", folder}) {
    why = detail::makePrivateFolder(f, false);
    if (!why.empty()) {
      warnOnce("binary cache " + dir_ + " is not usable (" + why + "); the compiled kernel is not cached");
      return false;
    }
  }
  why.clear();
  std::string tmp = folder + "/." + key + ".tmp." + uniqueSuffix();
  std::string bytes = encode(key, entry);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    warn("cannot create " + tmp + ": " + std::strerror(errno) + "; the compiled kernel is not cached");
    return false;
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      why = std::strerror(errno);
      break;
    }
    done += std::size_t(n);
  }
  bool closed = ::close(fd) == 0;
  bool ok = done == bytes.size() && closed;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (why.empty()) why = std::strerror(errno);
    ::unlink(tmp.c_str());
    warn("cannot write binary cache entry " + path + " (" + why + "); the compiled kernel is not cached");
    return false;
  }
  return true;
}

}  // namespace dgps
