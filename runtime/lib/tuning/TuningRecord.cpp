#include "dgps/runtime/tuning/TuningRecord.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "JsonCodec.h"

namespace dgps::tuning {

using nlohmann::json;
using nlohmann::ordered_json;

double roundToNs(double ms) { return std::round(ms * 1e6) / 1e6; }

std::string toJsonLine(const TuningRecord& r) {
  ordered_json j;
  j["version"] = r.version;
  j["fingerprint"] = json_codec::encode(r.fingerprint);
  j["key"] = json_codec::encode(r.key);
  j["config"] = json_codec::encode(r.config);
  j["median_ms"] = roundToNs(r.median_ms);
  j["p20_ms"] = roundToNs(r.p20_ms);
  j["p80_ms"] = roundToNs(r.p80_ms);
  j["candidates_tried"] = r.candidates_tried;
  j["date"] = r.date;
  j["host"] = r.host;
  // Replace invalid UTF-8 (e.g. an odd host name) instead of throwing.
  return j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

bool parseJsonLine(const std::string& line, TuningRecord* out, std::string* error) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (error) *error = "not a complete JSON object (torn write or hand edit)";
    return false;
  }
  json_codec::FieldReader r(j, "", error);
  if (!r.isObject()) return false;

  TuningRecord rec;
  long long version = 0;
  if (!r.integer("version", &version, 1, INT_MAX)) return false;
  if (version > kRecordVersion) {
    if (error)
      *error = "record version " + std::to_string(version) + " is newer than this reader (" +
               std::to_string(kRecordVersion) + "); written by a newer DGPS";
    return false;
  }
  rec.version = static_cast<int>(version);

  const json* fp = r.object("fingerprint");
  if (!fp || !json_codec::decode(*fp, "fingerprint", &rec.fingerprint, error)) return false;
  const json* key = r.object("key");
  if (!key || !json_codec::decode(*key, "key", &rec.key, error)) return false;
  const json* config = r.object("config");
  if (!config || !json_codec::decode(*config, "config", &rec.config, error)) return false;

  long long tried = 0;
  if (!r.number("median_ms", &rec.median_ms, 0) || !r.number("p20_ms", &rec.p20_ms, 0) ||
      !r.number("p80_ms", &rec.p80_ms, 0) || !r.integer("candidates_tried", &tried, 0, INT_MAX) ||
      !r.string("date", &rec.date) || !r.string("host", &rec.host))
    return false;
  rec.candidates_tried = static_cast<int>(tried);
  if (!(rec.p20_ms <= rec.median_ms && rec.median_ms <= rec.p80_ms)) {
    if (error) *error = "timings out of order: expected p20_ms <= median_ms <= p80_ms";
    return false;
  }
  if (!isRecordDate(rec.date)) {
    if (error)
      *error = "field 'date': expected UTC time \"YYYY-MM-DDTHH:MM:SS.mmmZ\", got \"" + rec.date + "\"";
    return false;
  }
  *out = rec;
  return true;
}

std::string utcNow() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];  // roomy: the compiler cannot bound tm fields
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

bool isRecordDate(const std::string& d) {
  static const char kPattern[] = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (d.size() != sizeof kPattern - 1) return false;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(d[i])) != 0;
    if (kPattern[i] == 'd' ? !digit : d[i] != kPattern[i]) return false;
  }
  return true;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

}  // namespace dgps::tuning
