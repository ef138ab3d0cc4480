// The per-user tuning database: an append-only JSON Lines file of TuningRecords (TuningRecord.h).
//
// Location: $DGPS_TUNING_DB if set and non-empty; else $XDG_CACHE_HOME/dgps/tuning.jsonl when
// XDG_CACHE_HOME is an absolute path; else $HOME/.cache/dgps/tuning.jsonl.
//
// Concurrency and crash safety. Each append opens the file with O_APPEND, takes an exclusive flock,
// issues one write() of the whole line (looping only if the kernel writes it short), fsyncs, and
// unlocks; readers take a shared flock. Several processes and threads may therefore tune at once, and
// a crash mid-write leaves at most one torn last line. An append that finds the file not ending in a
// newline (a torn line from a crashed writer, or a hand edit) starts with a newline, so the torn
// fragment stays one bad line and never swallows the new record.
//
// Reading. Torn, corrupt, unknown-version or otherwise invalid lines are skipped; each becomes a
// DbWarning (path, 1-based line, reason) collected on the object. The library prints nothing unless
// setEchoWarnings(true). Files from several machines merge by plain concatenation: record order does
// not matter because the newest `date` wins for each (device identity, key); equal dates resolve to
// the later line.
//
// Trust. The file's folder must be a directory owned by this user that group and others cannot write,
// and the file (when it exists) a regular file with the same rule: anyone else who can write them could
// plant the records every lookup follows. An untrusted database is not read (load() succeeds empty with
// a DbWarning on line 0 saying why) and never written (append() returns an error). Missing folders are
// created with mode 0700. The file is read with a size limit (file_limits::kTuningDb, 64 MiB); a FIFO,
// a device or a larger file is an error from load(), never a hang or an exhausted memory.
//
// Lookup order: exact key -> nearest T bucket with every other key field equal (ties go to the longer
// bucket) -> the caller's heuristic default (from the package manifest). Only records whose device
// fingerprint identity matches (Fingerprint.h) are ever chosen; the others are returned as "foreign",
// with the reason, when asked.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dgps/runtime/tuning/Status.h"
#include "dgps/runtime/tuning/TuningRecord.h"

namespace dgps::tuning {

struct DbWarning {
  std::string path;
  int line = 0;         ///< 1-based line number in the file; 0 for the file as a whole.
  std::string message;  ///< for a record: "<field path>: expected <what>, got <what came> (... skipped)".
};

/// "<path>:<line>: warning: <message>" (the line left out when 0): the schema readers' one error style
/// (dsl Diagnostic.h formatFileProblem).
std::string format(const DbWarning& w);

struct ForeignRecord {
  TuningRecord record;
  std::string reason;  ///< which identity fields differ (identityMismatch()).
};

enum class LookupSource { Exact, NearestBucket, Default };
const char* toString(LookupSource);

struct LookupResult {
  LookupSource source = LookupSource::Default;
  TileConfig config;                    ///< the configuration to launch with.
  std::optional<TuningRecord> record;   ///< the record it came from (absent for Default).
  std::vector<ForeignRecord> foreign;   ///< filled only when asked: same key, other device/toolchain.
};

using EnvLookup = std::function<const char*(const char*)>;

/// The database path following the rules above. Returns nullopt and sets *error when no rule applies
/// (no DGPS_TUNING_DB, no usable XDG_CACHE_HOME, no HOME). `env` defaults to std::getenv.
std::optional<std::string> resolveDbPath(std::string* error, const EnvLookup& env = nullptr);

class TuningDb {
 public:
  explicit TuningDb(std::string path);

  const std::string& path() const { return path_; }

  /// (Re)read the whole file under a shared lock. A missing file is an empty database (success), and so
  /// is an untrusted one (with a warning); an unreadable, oversized or non-regular one is an error naming
  /// the path and the reason. Bad lines become warnings. Never throws.
  Status load();

  /// Append one record durably (see the header comment) and add it to the in-memory view. Creates
  /// missing parent directories. The record must carry a valid date (use utcNow()).
  Status append(const TuningRecord& record);

  /// The lookup described above. `fallback` is the manifest's heuristic default.
  LookupResult lookup(const DeviceFingerprint& device, const ProblemKey& key,
                      const TileConfig& fallback, bool collectForeign = false) const;

  /// Newest record for exactly this (device identity, key), if any.
  std::optional<TuningRecord> findExact(const DeviceFingerprint& device, const ProblemKey& key) const;

  /// Newest record for this key measured on the same hardware under a different toolchain
  /// (sameHardware() but not identityMatches()): the performance baseline after an upgrade.
  std::optional<TuningRecord> findToolchainBaseline(const DeviceFingerprint& device,
                                                    const ProblemKey& key) const;

  /// Every valid record, in file order (then appended order).
  const std::vector<TuningRecord>& records() const { return records_; }
  /// Problems found by the last load() and by append() since.
  const std::vector<DbWarning>& warnings() const { return warnings_; }
  /// Also print each new warning to stderr (off by default: libraries do not print).
  void setEchoWarnings(bool on) { echo_ = on; }

 private:
  void warn(int line, std::string message);
  void parseLines(const std::string& text);

  std::string path_;
  std::vector<TuningRecord> records_;
  std::vector<DbWarning> warnings_;
  bool echo_ = false;
};

/// Append `line` plus a newline to `path` atomically as described above (exposed for tools and
/// tests). `line` must not contain a newline.
Status appendLine(const std::string& path, const std::string& line);

}  // namespace dgps::tuning
