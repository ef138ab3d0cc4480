#include "dgps/dsl/Safetensors.h"

#include "dgps/dsl/FileRead.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

namespace dgps {
namespace {

using json = nlohmann::json;

// The safetensors reference implementation refuses headers above 100 MB; so do we, so that a corrupt
// length cannot make us allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

[[noreturn]] void fail(const std::string& source, const std::string& msg) {
  throw DataError(source + ": " + msg);
}

[[noreturn]] void failTensor(const std::string& source, const std::string& name, const std::string& msg) {
  throw DataError(source + ": tensor '" + name + "': " + msg);
}

// The JSON parser would keep the last of two equal keys and silently drop the other tensor, and would
// build (and later destroy, recursively) any nesting depth. This callback refuses both while parsing:
// a duplicate key (at any level) by name, and nesting deeper than a header can be
// ({name: {"shape": [..]}} is 3 levels).
struct HeaderGuard {
  std::string source;
  std::shared_ptr<std::vector<std::set<std::string>>> keys = std::make_shared<std::vector<std::set<std::string>>>();

  bool operator()(int depth, json::parse_event_t event, json& parsed) const {
    constexpr int kMaxDepth = 4;
    if (depth > kMaxDepth) {
      fail(source, "bad JSON header: nested deeper than " + std::to_string(kMaxDepth) +
                       " levels (expected {name: {dtype, shape, data_offsets}})");
    }
    switch (event) {
      case json::parse_event_t::object_start: keys->emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!keys->empty()) keys->pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys->empty() && !keys->back().insert(k).second) {
          fail(source, std::string("bad JSON header: duplicate key '") + k.substr(0, 80) + "'" +
                           (keys->size() == 1 ? " (two tensors of the same name)" : "") + "; expected each key once");
        }
        break;
      }
      default: break;
    }
    return true;
  }
};

std::uint64_t readLe64(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return n;
}

std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A JSON number that is a non-negative integer representable in 64 bits.
bool asUnsigned(const json& v, std::uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<std::uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    const std::int64_t s = v.get<std::int64_t>();
    if (s < 0) return false;
    out = static_cast<std::uint64_t>(s);
    return true;
  }
  return false;
}

struct Entry {
  std::string name;
  ScalarType dtype = ScalarType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Entry parseEntry(const std::string& source, const std::string& name, const json& v, std::uint64_t dataSize) {
  Entry e;
  e.name = name;
  if (!v.is_object()) failTensor(source, name, "header entry is not a JSON object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
      failTensor(source, name, "unknown header field '" + it.key() + "' (expected dtype, shape, data_offsets)");
    }
  }
  if (!v.contains("dtype") || !v["dtype"].is_string()) failTensor(source, name, "missing string field 'dtype'");
  const std::string dt = v["dtype"].get<std::string>();
  if (!scalarTypeFromSafetensors(dt, e.dtype)) {
    failTensor(source, name, "unsupported dtype '" + dt + "' (expected BF16, F16, F32, F64, I32 or I64)");
  }
  if (!v.contains("shape") || !v["shape"].is_array()) failTensor(source, name, "missing array field 'shape'");
  std::uint64_t numel = 1;
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / 16;
  for (const json& d : v["shape"]) {
    std::uint64_t u = 0;
    if (!asUnsigned(d, u) || u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      failTensor(source, name, "shape " + v["shape"].dump() + " has an entry that is not a non-negative integer");
    }
    if (u != 0 && numel > limit / u) failTensor(source, name, "shape " + v["shape"].dump() + " is too large");
    numel *= u;
    e.shape.push_back(static_cast<std::int64_t>(u));
  }
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 ||
      !asUnsigned(v["data_offsets"][0], e.begin) || !asUnsigned(v["data_offsets"][1], e.end)) {
    failTensor(source, name, "'data_offsets' must be [begin, end] with non-negative integers");
  }
  if (e.begin > e.end) {
    failTensor(source, name,
               "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] has begin > end");
  }
  if (e.end > dataSize) {
    failTensor(source, name,
               "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] out of range: the data buffer has " + std::to_string(dataSize) + " bytes");
  }
  const std::uint64_t want = numel * elementSize(e.dtype);
  if (e.end - e.begin != want) {
    failTensor(source, name,
               "byte size mismatch: " + dt + " shape " + shapeToString(e.shape) + " needs " + std::to_string(want) +
                   " bytes but data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " +
                   std::to_string(e.end - e.begin));
  }
  return e;
}

std::map<std::string, std::string> parseMetadata(const std::string& source, const json& v) {
  if (!v.is_object()) fail(source, "'__metadata__' is not a JSON object of strings");
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string()) fail(source, "'__metadata__' value for '" + it.key() + "' is not a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// Tensors must tile the data buffer exactly: no two share a byte and no byte is left over (what the
// safetensors reference implementation checks). Zero-size tensors are exempt from the overlap test.
void checkLayout(const std::string& source, std::vector<Entry> entries, std::uint64_t dataSize) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;
    if (prev && e.begin < prev->end) {
      fail(source, "tensors '" + prev->name + "' [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) +
                       ") and '" + e.name + "' [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       ") overlap");
    }
    if (e.begin > covered) {
      fail(source, "data bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                       ") belong to no tensor (gap before '" + e.name + "')");
    }
    covered = e.end;
    prev = &e;
  }
  if (covered != dataSize) {
    fail(source, "data buffer has " + std::to_string(dataSize) + " bytes but the tensors cover only " +
                     std::to_string(covered));
  }
}

}  // namespace

SafetensorsFile parseSafetensors(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 8) {
    fail(source, "truncated safetensors file: " + std::to_string(bytes.size()) +
                     " bytes, need at least 8 for the header length");
  }
  const std::uint64_t headerLen = readLe64(bytes);
  const std::uint64_t avail = bytes.size() - 8;
  if (headerLen > kMaxHeaderBytes) {
    fail(source, "bad header length " + std::to_string(headerLen) + " (limit " + std::to_string(kMaxHeaderBytes) +
                     " bytes); not a safetensors file?");
  }
  if (headerLen > avail) {
    fail(source, "bad header length " + std::to_string(headerLen) + ": the file has only " + std::to_string(avail) +
                     " bytes after the 8-byte length (truncated file?)");
  }
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(headerLen),
                         HeaderGuard{source});
  } catch (const json::exception& ex) {
    fail(source, std::string("bad JSON header: ") + ex.what());
  }
  if (!header.is_object()) fail(source, "bad JSON header: expected an object, got " + std::string(header.type_name()));

  const std::uint64_t dataSize = avail - headerLen;
  const std::size_t dataStart = 8 + static_cast<std::size_t>(headerLen);
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      out.metadata = parseMetadata(source, it.value());
      continue;
    }
    if (it.key().empty()) fail(source, "header has a tensor with an empty name");
    entries.push_back(parseEntry(source, it.key(), it.value(), dataSize));
  }
  checkLayout(source, entries, dataSize);
  for (const Entry& e : entries) {
    std::vector<std::uint8_t> raw(bytes.begin() + static_cast<std::ptrdiff_t>(dataStart + e.begin),
                                  bytes.begin() + static_cast<std::ptrdiff_t>(dataStart + e.end));
    out.tensors.emplace(e.name, Tensor::fromBytes(e.dtype, e.shape, std::move(raw)));
  }
  return out;
}

SafetensorsFile readSafetensors(const std::string& path) {
  // Bounded: a FIFO, a device (/dev/zero) or a file over the tensor-file limit is refused unread.
  FileReadResult file = readRegularFile(path, file_limits::kTensors, "a safetensors file");
  if (!file.ok) {
    // "cannot open: ENOENT" -> "cannot open the safetensors file: ENOENT"; "is a FIFO, ..." -> "the
    // safetensors file is a FIFO, ..."
    const std::size_t colon = file.error.find(':');
    throw DataError(path + ": " +
                    (file.error.rfind("cannot ", 0) == 0 && colon != std::string::npos
                         ? file.error.substr(0, colon) + " the safetensors file" + file.error.substr(colon)
                         : "the safetensors file " + file.error));
  }
  return parseSafetensors(file.data, path);
}

std::string serializeSafetensors(const SafetensorsFile& file) {
  json header = json::object();
  if (!file.metadata.empty()) {
    json meta = json::object();
    for (const auto& kv : file.metadata) meta[kv.first] = kv.second;
    header["__metadata__"] = meta;
  }
  std::uint64_t offset = 0;
  for (const auto& kv : file.tensors) {
    if (kv.first.empty() || kv.first == "__metadata__") {
      throw DataError("safetensors: invalid tensor name '" + kv.first + "'");
    }
    const Tensor& t = kv.second;
    json entry = json::object();
    entry["dtype"] = safetensorsName(t.dtype());
    entry["shape"] = t.shape();
    entry["data_offsets"] = {offset, offset + t.nbytes()};
    header[kv.first] = entry;
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out = le64(text.size());
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& kv : file.tensors) {
    out.append(reinterpret_cast<const char*>(kv.second.data()), kv.second.nbytes());
  }
  return out;
}

void writeSafetensors(const std::string& path, const SafetensorsFile& file) {
  const std::string bytes = serializeSafetensors(file);
  std::ofstream outFile(path, std::ios::binary | std::ios::trunc);
  if (!outFile) throw DataError(path + ": cannot open for writing");
  outFile.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  outFile.close();
  if (!outFile) throw DataError(path + ": write failed");
}

}  // namespace dgps
