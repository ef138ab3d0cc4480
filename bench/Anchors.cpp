#include "Anchors.h"

#include <nlohmann/json.hpp>

#include "dgps/dsl/FileRead.h"

namespace dgps {
namespace bench {
namespace {

FlaTimes& registry() {
  static FlaTimes times;
  return times;
}

bool sameShape(const BenchShape& a, const BenchShape& b, std::int64_t heads_v) {
  return a.kind == b.kind && a.batch == b.batch && (a.kind == Kind::Decode || a.seq_len == b.seq_len) &&
         a.heads_qk == b.heads_qk && a.heads_v == heads_v && a.key_dim == b.key_dim && a.value_dim == b.value_dim;
}

}  // namespace

bool parseFlaTimes(const std::string& text, const std::string& path, FlaTimes* out, std::string* error) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    *error = path + ": not a JSON object (expected the output of scripts/fla_bench.py)";
    return false;
  }
  FlaTimes t;
  if (doc.contains("gpu") && doc["gpu"].is_string()) t.gpu = doc["gpu"].get<std::string>();
  if (!doc.contains("rows") || !doc["rows"].is_array()) {
    *error = path + ": no \"rows\" array";
    return false;
  }
  std::size_t i = 0;
  for (const auto& r : doc["rows"]) {
    const std::string where = path + ": rows[" + std::to_string(i++) + "]";
    if (!r.is_object()) {
      *error = where + ": not an object";
      return false;
    }
    if (r.contains("error")) continue;  // FLA failed at this shape; the script says why in its log
    auto str = [&](const char* key, std::string* dst) {
      if (!r.contains(key) || !r[key].is_string()) {
        *error = where + ": \"" + key + "\" must be a string";
        return false;
      }
      *dst = r[key].get<std::string>();
      return true;
    };
    auto dim = [&](const char* key, std::int64_t* dst) {
      if (!r.contains(key) || !r[key].is_number_integer() || r[key].get<std::int64_t>() < 1 ||
          r[key].get<std::int64_t>() > (1LL << 40)) {
        *error = where + ": \"" + key + "\" must be a positive integer";
        return false;
      }
      *dst = r[key].get<std::int64_t>();
      return true;
    };
    FlaRow row;
    std::string kind;
    if (!str("spec", &row.spec) || !str("op", &row.time.op) || !str("kind", &kind)) return false;
    if (kind != "forward" && kind != "decode") {
      *error = where + ": \"kind\" must be \"forward\" or \"decode\", got \"" + kind + "\"";
      return false;
    }
    row.shape.kind = kind == "forward" ? Kind::Forward : Kind::Decode;
    if (!dim("B", &row.shape.batch) || !dim("T", &row.shape.seq_len) || !dim("H", &row.shape.heads_qk) ||
        !dim("HV", &row.shape.heads_v) || !dim("K", &row.shape.key_dim) || !dim("V", &row.shape.value_dim)) {
      return false;
    }
    if (!r.contains("ms") || !r["ms"].is_number() || !(r["ms"].get<double>() > 0) || r["ms"].get<double>() > 1e7) {
      *error = where + ": \"ms\" must be a positive number of milliseconds";
      return false;
    }
    row.time.ms = r["ms"].get<double>();
    t.rows.push_back(std::move(row));
  }
  *out = std::move(t);
  return true;
}

bool loadFlaTimes(const std::string& path, FlaTimes* out, std::string* error) {
  FileReadResult f = readRegularFile(path, file_limits::kManifest, "an FLA timing file");
  if (!f.ok) {
    *error = path + ": " + f.error;
    return false;
  }
  return parseFlaTimes(f.data, path, out, error);
}

void setFlaTimes(FlaTimes times) { registry() = std::move(times); }
const FlaTimes& flaTimes() { return registry(); }

std::optional<FlaAnchor> flaAnchor(const std::string& spec_name, const BenchShape& shape, std::int64_t heads_v) {
  for (const FlaRow& r : registry().rows) {
    if (r.spec == spec_name && sameShape(r.shape, shape, heads_v)) return r.time;
  }
  return std::nullopt;
}

std::optional<double> flaRatio(const std::string& numerator, const std::string& denominator, const BenchShape& shape) {
  const std::int64_t hv = shape.heads_v > 0 ? shape.heads_v : shape.heads_qk;
  auto a = flaAnchor(numerator, shape, hv);
  auto b = flaAnchor(denominator, shape, hv);
  if (!a || !b) return std::nullopt;
  return a->ms / b->ms;
}

}  // namespace bench
}  // namespace dgps
