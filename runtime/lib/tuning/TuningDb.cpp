#include "dgps/runtime/tuning/TuningDb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>

#include "../OwnedFolder.h"
#include "FileLock.h"
#include "dgps/dsl/Diagnostic.h"
#include "dgps/dsl/FileRead.h"

namespace dgps::tuning {
namespace {

bool nonEmpty(const char* s) { return s && *s; }

/// True when record a (at index ia) supersedes record b (at index ib): newer date, or the same date
/// and later in the file.
bool supersedes(const TuningRecord& a, std::size_t ia, const TuningRecord& b, std::size_t ib) {
  if (a.date != b.date) return a.date > b.date;
  return ia > ib;
}

int bucketDistance(TBucket a, TBucket b) {
  const int d = static_cast<int>(a) - static_cast<int>(b);
  return d < 0 ? -d : d;
}

std::string folderOf(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Why the database at `path` must not be used ("" when it may): its folder and, when it exists, the
// file itself must belong to this user and be writable by nobody else (OwnedFolder.h). Anyone else who
// can write them can plant the records every later lookup follows.
std::string trustProblem(const std::string& path) {
  bool exists = true;
  std::string problem = detail::folderProblem(folderOf(path), /*follow_symlink=*/true, &exists);
  if (!problem.empty() || !exists) return problem;
  // The file itself (a symbolic link is followed: only we can have made one in our own folder). A
  // directory, FIFO or device is not a trust question: reading it fails with its own message.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return detail::ownershipProblem(st, path, "file");
}

}  // namespace

std::string format(const DbWarning& w) {
  return formatFileProblem(Severity::Warning, w.path, w.line, 0, "", w.message);
}

const char* toString(LookupSource s) {
  switch (s) {
    case LookupSource::Exact: return "exact";
    case LookupSource::NearestBucket: return "nearest-T-bucket";
    case LookupSource::Default: return "default";
  }
  return "?";
}

std::optional<std::string> resolveDbPath(std::string* error, const EnvLookup& env) {
  auto get = [&](const char* name) -> const char* { return env ? env(name) : std::getenv(name); };
  if (const char* p = get("DGPS_TUNING_DB"); nonEmpty(p)) return std::string(p);
  // The XDG base-directory spec says relative values must be ignored.
  if (const char* x = get("XDG_CACHE_HOME"); nonEmpty(x) && x[0] == '/')
    return std::string(x) + "/dgps/tuning.jsonl";
  if (const char* h = get("HOME"); nonEmpty(h)) return std::string(h) + "/.cache/dgps/tuning.jsonl";
  if (error)
    *error = "no tuning database location: set DGPS_TUNING_DB to a file path (or XDG_CACHE_HOME / HOME)";
  return std::nullopt;
}

Status appendLine(const std::string& path, const std::string& line) {
  if (line.find('\n') != std::string::npos)
    return Status::error("tuning database record for '" + path + "' contains a newline");
  if (std::string err = detail::makePrivateFolder(folderOf(path), /*follow_symlink=*/true); !err.empty())
    return Status::error("tuning database '" + path + "' is not written: " + err);
  if (std::string err = trustProblem(path); !err.empty())
    return Status::error("tuning database '" + path + "' is not written: " + err);
  struct stat pre {};
  if (::stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode))
    return Status::error("tuning database '" + path + "' is not a regular file");

  // O_RDWR, not O_WRONLY: the last byte is read back below.
  posix::LockedFile file(path, O_RDWR | O_APPEND | O_CREAT | O_NONBLOCK, /*exclusive=*/true);
  if (!file.ok()) return Status::error(file.error());

  // Under the exclusive lock nobody else appends, so the end we inspect is the end we write to.
  std::string data;
  struct stat st {};
  if (::fstat(file.fd(), &st) == 0 && st.st_size > 0) {
    // If the last byte cannot be read, a spare newline costs only a blank line (skipped on read).
    char last = 0;
    if (::pread(file.fd(), &last, 1, st.st_size - 1) != 1 || last != '\n') data = "\n";
  }
  data += line;
  data += '\n';
  if (std::string err = posix::writeAll(file.fd(), data); !err.empty())
    return Status::error("cannot write tuning database '" + path + "': " + err);
  if (::fsync(file.fd()) != 0)
    return Status::error("cannot fsync tuning database '" + path + "': " + std::strerror(errno));
  return Status::success();
}

TuningDb::TuningDb(std::string path) : path_(std::move(path)) {}

void TuningDb::warn(int line, std::string message) {
  warnings_.push_back({path_, line, std::move(message)});
  if (echo_) {
    const DbWarning& w = warnings_.back();
    std::cerr << "dgps: " << format(w) << "\n";
  }
}

Status TuningDb::load() {
  records_.clear();
  warnings_.clear();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0 && errno == ENOENT) return Status::success();  // no database yet: empty
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A directory, FIFO or device: an error naming what it is (readRegularFile never blocks or reads it).
    const FileReadResult r = readRegularFile(path_, file_limits::kTuningDb, "a tuning database");
    return Status::error("cannot read tuning database '" + path_ + "': " + r.error);
  }
  if (std::string problem = trustProblem(path_); !problem.empty()) {
    // Not an error: the tuner still runs (and refuses to append); lookups fall back to defaults.
    warn(0, "not used: " + problem + "; its records are ignored and nothing is written to it");
    return Status::success();
  }
  // O_NONBLOCK: a FIFO must not block the open; readRegularFile below refuses anything not regular.
  posix::LockedFile file(path_, O_RDONLY | O_NONBLOCK, /*exclusive=*/false);
  if (file.errnum() == ENOENT) return Status::success();
  if (!file.ok()) return Status::error(file.error());
  FileReadResult read = readRegularFile(path_, file_limits::kTuningDb, "a tuning database");
  if (!read.ok) return Status::error("cannot read tuning database '" + path_ + "': " + read.error);
  const std::string& text = read.data;
  try {
    parseLines(text);
  } catch (const std::bad_alloc&) {
    records_.clear();
    return Status::error("tuning database '" + path_ + "': out of memory while reading its records");
  }
  return Status::success();
}

void TuningDb::parseLines(const std::string& text) {
  // A damaged file may hold millions of bad lines: the first kMaxLineWarnings are named, the rest counted.
  constexpr int kMaxLineWarnings = 20;
  int bad = 0;
  const std::string latest = latestRecordDate();
  std::size_t start = 0;
  int lineNo = 0;
  while (start < text.size()) {
    ++lineNo;
    std::size_t end = text.find('\n', start);
    const bool terminated = end != std::string::npos;
    if (!terminated) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;

    TuningRecord rec;
    std::string error;
    if (parseJsonLine(line, &rec, &error, latest)) {
      records_.push_back(std::move(rec));
    } else if (++bad > kMaxLineWarnings) {
      continue;
    } else if (!terminated) {
      warn(lineNo, error + " (torn last line skipped: no newline at end of file; a writer probably crashed)");
    } else {
      warn(lineNo, error + " (invalid record skipped)");
    }
  }
  if (bad > kMaxLineWarnings)
    warn(lineNo, "and " + std::to_string(bad - kMaxLineWarnings) + " more invalid line(s) skipped");
}

Status TuningDb::append(const TuningRecord& record) {
  if (!isRecordDate(record.date))
    return Status::error("refusing to append a tuning record without a valid date (got \"" +
                         record.date + "\"; use utcNow())");
  Status s = appendLine(path_, toJsonLine(record));
  if (s) records_.push_back(record);
  return s;
}

std::optional<TuningRecord> TuningDb::findExact(const DeviceFingerprint& device,
                                                const ProblemKey& key) const {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const TuningRecord& r = records_[i];
    if (r.key != key || !identityMatches(r.fingerprint, device)) continue;
    if (!best || supersedes(r, i, records_[*best], *best)) best = i;
  }
  if (!best) return std::nullopt;
  return records_[*best];
}

std::optional<TuningRecord> TuningDb::findToolchainBaseline(const DeviceFingerprint& device,
                                                            const ProblemKey& key) const {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const TuningRecord& r = records_[i];
    if (r.key != key || !sameHardware(r.fingerprint, device) ||
        identityMatches(r.fingerprint, device))
      continue;
    if (!best || supersedes(r, i, records_[*best], *best)) best = i;
  }
  if (!best) return std::nullopt;
  return records_[*best];
}

LookupResult TuningDb::lookup(const DeviceFingerprint& device, const ProblemKey& key,
                              const TileConfig& fallback, bool collectForeign) const {
  LookupResult result;
  result.config = fallback;

  if (collectForeign) {
    for (const TuningRecord& r : records_)
      if (r.key == key && !identityMatches(r.fingerprint, device))
        result.foreign.push_back({r, identityMismatch(r.fingerprint, device)});
  }

  if (auto exact = findExact(device, key)) {
    result.source = LookupSource::Exact;
    result.config = exact->config;
    result.record = std::move(exact);
    return result;
  }

  // Nearest T bucket: smallest bucket distance; equal distance prefers the longer bucket (its
  // tiles were chosen under more work per block, the safer side for throughput); then newest.
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const TuningRecord& r = records_[i];
    if (!sameExceptT(r.key, key) || !identityMatches(r.fingerprint, device)) continue;
    if (!best) {
      best = i;
      continue;
    }
    const TuningRecord& b = records_[*best];
    const int dr = bucketDistance(r.key.t_bucket, key.t_bucket);
    const int db = bucketDistance(b.key.t_bucket, key.t_bucket);
    if (dr != db) {
      if (dr < db) best = i;
    } else if (r.key.t_bucket != b.key.t_bucket) {
      if (r.key.t_bucket > b.key.t_bucket) best = i;
    } else if (supersedes(r, i, b, *best)) {
      best = i;
    }
  }
  if (best) {
    result.source = LookupSource::NearestBucket;
    result.config = records_[*best].config;
    result.record = records_[*best];
    return result;
  }
  result.source = LookupSource::Default;
  return result;
}

}  // namespace dgps::tuning
