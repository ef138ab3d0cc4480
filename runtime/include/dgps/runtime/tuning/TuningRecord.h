// One line of the tuning database: the winning configuration for one (device, key), with its timing.
//
// On disk each record is one JSON object on one line (JSON Lines), keys in a fixed readable order:
//   {"version":1,"fingerprint":{...},"key":{...},"config":{"chunk":64,"block_v":64,"warps":4,"stages":2},
//    "median_ms":0.412,"p20_ms":0.409,"p80_ms":0.417,"candidates_tried":24,
//    "date":"2025-06-01T10:00:00.123Z","host":"gpu-node-3"}
// Unknown extra fields are ignored on read, so later versions may add fields without breaking
// older readers; a record whose `version` is newer than kRecordVersion is skipped with a warning.
#pragma once

#include <string>

#include "dgps/runtime/tuning/Fingerprint.h"
#include "dgps/runtime/tuning/ProblemKey.h"
#include "dgps/runtime/tuning/TileConfig.h"

namespace dgps::tuning {

constexpr int kRecordVersion = 1;

struct TuningRecord {
  int version = kRecordVersion;
  DeviceFingerprint fingerprint;
  ProblemKey key;
  TileConfig config;
  double median_ms = 0;  ///< median kernel time over the final (interleaved) timing samples, ms.
  double p20_ms = 0;     ///< 20th percentile of the same samples, ms.
  double p80_ms = 0;     ///< 80th percentile, ms.
  int candidates_tried = 0;  ///< candidates that reached a trial (compile onwards), not the pruned ones.
  /// UTC time the record was written, ISO 8601 with milliseconds: "YYYY-MM-DDTHH:MM:SS.mmmZ". Fixed
  /// width, so string order is time order; the newest record for a (device, key) wins.
  std::string date;
  std::string host;  ///< gethostname() of the writer, for humans merging files from several machines.
};

/// The record as one line of compact JSON, without the trailing newline.
std::string toJsonLine(const TuningRecord& record);

/// Parse one line. On failure returns false and sets *error to what was wrong, field path first (the field
/// part of the schema readers' one error style, dsl Diagnostic.h), e.g.
/// "config.warps: expected an integer in [1, 1024], got \"four\"".
/// Refused besides wrong fields: a line over 64 KiB or nested deeper than 8 levels, a key given twice in
/// one object (named in the error), a date that is not a real calendar time (isRecordDate) or that is
/// later than now + 1 day. Never throws.
bool parseJsonLine(const std::string& line, TuningRecord* out, std::string* error);
/// The latest date a record may carry: now + 1 day, in the record's date format (clocks of machines
/// whose files are merged differ a little; a record from the far future would win every lookup forever).
std::string latestRecordDate();
/// The same with the latest accepted date given (a record date in the same format), for tests.
bool parseJsonLine(const std::string& line, TuningRecord* out, std::string* error, const std::string& latest_date);

/// Milliseconds rounded to whole nanoseconds, the precision records are stored with: far below
/// timing noise, and lines stay readable ("0.489859" rather than "0.489859014749527").
double roundToNs(double ms);

/// The current UTC time in the record's date format.
std::string utcNow();
/// True when `date` has the exact format "YYYY-MM-DDTHH:MM:SS.mmmZ" and is a real UTC time from 1970 on
/// (month 1-12, a day the month has, leap years included, hour <= 23, minute and second <= 59).
bool isRecordDate(const std::string& date);
/// This machine's host name, or "unknown".
std::string hostName();

}  // namespace dgps::tuning
