#include "JsonCodec.h"

#include <climits>
#include <cmath>

namespace dgps::tuning::json_codec {

using nlohmann::json;
using nlohmann::ordered_json;

// ---- FieldReader ----

std::string FieldReader::path(const char* field) const {
  return where_.empty() ? std::string(field) : where_ + "." + field;
}

bool FieldReader::fail(const char* field, const std::string& expected, const json* got) {
  if (error_) {
    std::string shown = got ? got->dump() : std::string("nothing (field missing)");
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    *error_ = path(field) + ": expected " + expected + ", got " + shown;
  }
  return false;
}

bool FieldReader::isObject() {
  if (j_.is_object()) return true;
  if (error_) *error_ = (where_.empty() ? std::string("record") : where_) + ": expected a JSON object, got " +
                        std::string(j_.type_name());
  return false;
}

const json* FieldReader::object(const char* field) {
  auto it = j_.find(field);
  if (it == j_.end() || !it->is_object()) {
    fail(field, "an object", it == j_.end() ? nullptr : &*it);
    return nullptr;
  }
  return &*it;
}

bool FieldReader::string(const char* field, std::string* out, bool allowEmpty) {
  auto it = j_.find(field);
  if (it == j_.end() || !it->is_string() || (!allowEmpty && it->get_ref<const std::string&>().empty()))
    return fail(field, allowEmpty ? "a string" : "a non-empty string", it == j_.end() ? nullptr : &*it);
  *out = it->get<std::string>();
  return true;
}

bool FieldReader::integer(const char* field, long long* out, long long min, long long max) {
  auto it = j_.find(field);
  const std::string expected =
      "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (it == j_.end() || !it->is_number_integer()) return fail(field, expected, it == j_.end() ? nullptr : &*it);
  long long v = 0;
  if (it->is_number_unsigned()) {
    const auto u = it->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(LLONG_MAX)) return fail(field, expected, &*it);
    v = static_cast<long long>(u);
  } else {
    v = it->get<long long>();
  }
  if (v < min || v > max) return fail(field, expected, &*it);
  *out = v;
  return true;
}

bool FieldReader::optionalInteger(const char* field, long long* out, long long min, long long max) {
  if (j_.find(field) == j_.end()) return true;
  return integer(field, out, min, max);
}

bool FieldReader::boolean(const char* field, bool* out) {
  auto it = j_.find(field);
  if (it == j_.end() || !it->is_boolean()) return fail(field, "true or false", it == j_.end() ? nullptr : &*it);
  *out = it->get<bool>();
  return true;
}

bool FieldReader::number(const char* field, double* out, double min) {
  auto it = j_.find(field);
  const std::string expected = "a finite number >= " + json(min).dump();
  if (it == j_.end() || !it->is_number()) return fail(field, expected, it == j_.end() ? nullptr : &*it);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < min) return fail(field, expected, &*it);
  *out = v;
  return true;
}

// ---- encoders ----

ordered_json encode(const DeviceFingerprint& fp) {
  ordered_json j;
  j["name"] = fp.name;
  j["compute_capability"] = fp.compute_capability;
  j["sm_count"] = fp.sm_count;
  j["driver_version"] = fp.driver_version;
  j["nvrtc_version"] = fp.nvrtc_version;
  j["codegen_version"] = fp.codegen_version;
  j["smem_per_block_optin"] = fp.smem_per_block_optin;
  j["smem_per_sm"] = fp.smem_per_sm;
  j["regs_per_sm"] = fp.regs_per_sm;
  j["max_threads_per_block"] = fp.max_threads_per_block;
  j["l2_bytes"] = fp.l2_bytes;
  return j;
}

ordered_json encode(const ProblemKey& key) {
  ordered_json j;
  j["spec"] = key.spec_hash;
  j["K"] = key.K;
  j["V"] = key.V;
  j["H"] = key.H;
  j["HV"] = key.HV;
  j["t_bucket"] = toString(key.t_bucket);
  j["waves"] = toString(key.waves);
  j["dtype"] = toString(key.dtype);
  j["varlen"] = key.varlen;
  j["kind"] = toString(key.kind);
  j["precision"] = key.precision;
  return j;
}

ordered_json encode(const TileConfig& c) {
  ordered_json j;
  j["chunk"] = c.chunk;
  j["block_v"] = c.block_v;
  j["warps"] = c.warps;
  j["stages"] = c.stages;
  if (c.segment_chunks >= 0) j["segment_chunks"] = c.segment_chunks;  // absent: the runtime's rule
  return j;
}

// ---- decoders ----

bool decode(const json& j, const std::string& where, DeviceFingerprint* out, std::string* error) {
  FieldReader r(j, where, error);
  if (!r.isObject()) return false;
  DeviceFingerprint fp;
  long long sm = 0, optin = 0, persm = 0, regs = 0, threads = 0, l2 = 0;
  if (!r.string("name", &fp.name, false) ||
      !r.string("compute_capability", &fp.compute_capability, false) ||
      !r.integer("sm_count", &sm, 1, INT_MAX) ||
      !r.string("driver_version", &fp.driver_version, false) ||
      !r.string("nvrtc_version", &fp.nvrtc_version, false) ||
      !r.string("codegen_version", &fp.codegen_version, false) ||
      !r.optionalInteger("smem_per_block_optin", &optin, 0, LLONG_MAX) ||
      !r.optionalInteger("smem_per_sm", &persm, 0, LLONG_MAX) ||
      !r.optionalInteger("regs_per_sm", &regs, 0, INT_MAX) ||
      !r.optionalInteger("max_threads_per_block", &threads, 0, INT_MAX) ||
      !r.optionalInteger("l2_bytes", &l2, 0, LLONG_MAX))
    return false;
  fp.sm_count = static_cast<int>(sm);
  fp.smem_per_block_optin = optin;
  fp.smem_per_sm = persm;
  fp.regs_per_sm = static_cast<int>(regs);
  fp.max_threads_per_block = static_cast<int>(threads);
  fp.l2_bytes = l2;
  *out = fp;
  return true;
}

namespace {

template <typename E>
bool decodeEnum(FieldReader& r, const char* field, std::optional<E> (*parse)(const std::string&),
                const char* allowed, E* out, std::string* error) {
  std::string s;
  if (!r.string(field, &s)) return false;
  auto v = parse(s);
  if (!v) {
    if (error) *error = r.path(field) + ": expected one of " + allowed + ", got \"" + s + "\"";
    return false;
  }
  *out = *v;
  return true;
}

}  // namespace

bool decode(const json& j, const std::string& where, ProblemKey* out, std::string* error) {
  FieldReader r(j, where, error);
  if (!r.isObject()) return false;
  ProblemKey k;
  long long K = 0, V = 0, H = 0, HV = 0;
  if (!r.string("spec", &k.spec_hash, false) || !r.integer("K", &K, 1, INT_MAX) ||
      !r.integer("V", &V, 1, INT_MAX) || !r.integer("H", &H, 1, INT_MAX) ||
      !r.integer("HV", &HV, 1, INT_MAX) ||
      !decodeEnum(r, "t_bucket", &parseTBucket,
                  "\"<=64\", \"<=256\", \"<=1024\", \"<=4096\", \"<=16384\", \">16384\"",
                  &k.t_bucket, error) ||
      !decodeEnum(r, "waves", &parseWaveBucket, "\"<0.5\", \"<1\", \"<2\", \"<4\", \">=4\"",
                  &k.waves, error) ||
      !decodeEnum(r, "dtype", &parseInputDType, "\"f32\", \"f16\", \"bf16\"", &k.dtype, error) ||
      !r.boolean("varlen", &k.varlen) ||
      !decodeEnum(r, "kind", &parseKernelFamily, "\"forward\", \"decode\"", &k.kind, error) ||
      !r.string("precision", &k.precision, false))
    return false;
  k.K = static_cast<int>(K);
  k.V = static_cast<int>(V);
  k.H = static_cast<int>(H);
  k.HV = static_cast<int>(HV);
  *out = k;
  return true;
}

bool decode(const json& j, const std::string& where, TileConfig* out, std::string* error) {
  FieldReader r(j, where, error);
  if (!r.isObject()) return false;
  long long chunk = 0, bv = 0, warps = 0, stages = 0, segment = -1;
  if (!r.integer("chunk", &chunk, 1, 1 << 20) || !r.integer("block_v", &bv, 1, 1 << 20) ||
      !r.integer("warps", &warps, 1, 1024) || !r.integer("stages", &stages, 1, 64) ||
      !r.optionalInteger("segment_chunks", &segment, 0, 1LL << 30))
    return false;
  *out = TileConfig{static_cast<int>(chunk), static_cast<int>(bv), static_cast<int>(warps),
                    static_cast<int>(stages), static_cast<int>(segment)};
  return true;
}

}  // namespace dgps::tuning::json_codec
