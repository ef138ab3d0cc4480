// JSON encoding of the tuning types (private to the library). Writers use ordered_json so records
// read top-down in a fixed, human-friendly field order; readers check every field's presence and
// type and say exactly which field was wrong.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dgps/runtime/tuning/Fingerprint.h"
#include "dgps/runtime/tuning/ProblemKey.h"
#include "dgps/runtime/tuning/TileConfig.h"

namespace dgps::tuning::json_codec {

nlohmann::ordered_json encode(const DeviceFingerprint& fp);
nlohmann::ordered_json encode(const ProblemKey& key);
nlohmann::ordered_json encode(const TileConfig& config);

/// Each decoder returns false and sets *error ("key.K: expected <what>, got <what came>": the field part of
/// the schema readers' one error style, dsl Diagnostic.h; TuningDb adds the file and line) on the first problem.
/// `where` is the field path prefix used in messages, e.g. "fingerprint".
bool decode(const nlohmann::json& j, const std::string& where, DeviceFingerprint* out,
            std::string* error);
bool decode(const nlohmann::json& j, const std::string& where, ProblemKey* out, std::string* error);
bool decode(const nlohmann::json& j, const std::string& where, TileConfig* out, std::string* error);

/// Field access with exact error messages, shared by the record decoder.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string where, std::string* error)
      : j_(object), where_(std::move(where)), error_(error) {}

  bool isObject();
  const nlohmann::json* object(const char* field);
  bool string(const char* field, std::string* out, bool allowEmpty = true);
  bool integer(const char* field, long long* out, long long min, long long max);
  bool optionalInteger(const char* field, long long* out, long long min, long long max);
  bool boolean(const char* field, bool* out);
  /// A finite number >= min.
  bool number(const char* field, double* out, double min);
  std::string path(const char* field) const;

 private:
  bool fail(const char* field, const std::string& expected, const nlohmann::json* got);

  const nlohmann::json& j_;
  std::string where_;
  std::string* error_;
};

}  // namespace dgps::tuning::json_codec
