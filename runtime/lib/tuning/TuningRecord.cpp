#include "dgps/runtime/tuning/TuningRecord.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <vector>

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

namespace {

// `s` as a JSON string for messages, cut to 40 bytes (a cut UTF-8 sequence is replaced, never thrown on).
std::string quotedJson(const std::string& s) {
  const json j = s.size() > 40 ? json(s.substr(0, 40) + "...") : json(s);
  return j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

// Records are ~600 bytes; a line far longer than any record (or nested deeper than one) is not one, and
// bounding both keeps parsing cheap on a hostile file.
constexpr std::size_t kMaxLineBytes = 64 * 1024;
constexpr int kMaxDepth = 8;

// Parses with a callback that sees every key of every object: nlohmann::json keeps the last of
// duplicate keys silently, and a record with two "config" entries must not mean whichever came last.
json parseStrict(const std::string& line, std::string* error) {
  if (line.size() > kMaxLineBytes) {
    if (error) *error = "line of " + std::to_string(line.size()) + " bytes; a record is at most " +
                        std::to_string(kMaxLineBytes) + " bytes";
    return json(json::value_t::discarded);
  }
  std::vector<std::vector<std::string>> keys;  // per open object: keys seen so far
  std::string duplicate, path;
  bool too_deep = false;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxDepth) too_deep = true;
    switch (event) {
      case json::parse_event_t::object_start: keys.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string()) {
          const std::string& k = parsed.get_ref<const std::string&>();
          auto& seen = keys.back();
          if (duplicate.empty() && std::find(seen.begin(), seen.end(), k) != seen.end()) duplicate = k;
          seen.push_back(k);
        }
        break;
      default: break;
    }
    return true;
  };
  json j = json::parse(line, callback, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (error) *error = "not a complete JSON object (torn write or hand edit)";
    return j;
  }
  if (too_deep) {
    if (error) *error = "nested deeper than " + std::to_string(kMaxDepth) + " levels; not a tuning record";
    return json(json::value_t::discarded);
  }
  if (!duplicate.empty()) {
    if (error) *error = "duplicate key " + quotedJson(duplicate) + " (a record names each field once)";
    return json(json::value_t::discarded);
  }
  return j;
}

}  // namespace

std::string latestRecordDate() {
  using namespace std::chrono;
  const std::time_t secs = system_clock::to_time_t(system_clock::now() + hours(24));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.999Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

bool parseJsonLine(const std::string& line, TuningRecord* out, std::string* error) {
  return parseJsonLine(line, out, error, latestRecordDate());
}

bool parseJsonLine(const std::string& line, TuningRecord* out, std::string* error, const std::string& latest_date) {
  const json j = parseStrict(line, error);
  if (j.is_discarded()) return false;
  json_codec::FieldReader r(j, "", error);
  if (!r.isObject()) return false;

  TuningRecord rec;
  long long version = 0;
  if (!r.integer("version", &version, 1, INT_MAX)) return false;
  if (version > kRecordVersion) {
    if (error)
      *error = "version: expected at most " + std::to_string(kRecordVersion) + " (this reader's record version), got " +
               std::to_string(version) + " (written by a newer DGPS)";
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
    if (error)
      *error = "median_ms: expected p20_ms <= median_ms <= p80_ms, got " + json(rec.p20_ms).dump() + ", " +
               json(rec.median_ms).dump() + ", " + json(rec.p80_ms).dump() + " (timings out of order)";
    return false;
  }
  if (!isRecordDate(rec.date)) {
    if (error) *error = "date: expected a real UTC time \"YYYY-MM-DDTHH:MM:SS.mmmZ\", got " + quotedJson(rec.date);
    return false;
  }
  if (rec.date > latest_date) {
    if (error)
      *error = "date: expected a time no later than " + latest_date + " (now + 1 day), got " + rec.date +
               ", in the future; a wrong clock or an edited record would otherwise win every lookup";
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
  auto num = [&](std::size_t at, std::size_t n) {
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) v = v * 10 + (d[at + i] - '0');
    return v;
  };
  const int year = num(0, 4), month = num(5, 2), day = num(8, 2);
  const int hour = num(11, 2), minute = num(14, 2), second = num(17, 2);
  if (year < 1970 || month < 1 || month > 12 || day < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int days = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  return day <= days && hour <= 23 && minute <= 59 && second <= 59;
}
std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

}  // namespace dgps::tuning
