// Safetensors: round trip of every dtype through a real file, and corrupt files, each rejected with an
// error naming the file (and tensor) and the problem; random corruption never crashes the reader.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "dgps/dsl/Safetensors.h"
#include "TestUtil.h"

namespace dgps::test {
namespace {

std::string tempPath(const std::string& stem) {
  return ::testing::TempDir() + "dgps_" + stem + "_" + std::to_string(freshSeed() % 1000000007) + ".safetensors";
}

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file image with the given header text and `dataBytes` bytes of data.
std::string image(const std::string& header, std::size_t dataBytes) {
  return le64(header.size()) + header + std::string(dataBytes, '\x11');
}

// Expects parseSafetensors(bytes) to fail with a message containing each of `parts`.
void expectRejected(const std::string& bytes, std::initializer_list<std::string> parts) {
  try {
    parseSafetensors(bytes, "corrupt.safetensors");
    FAIL() << "accepted a corrupt file";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("corrupt.safetensors"), std::string::npos) << msg;
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
  }
}

TEST(Safetensors, RoundTripEveryDtypeThroughAFile) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 10.0);
  SafetensorsFile f;
  const ScalarType all[] = {ScalarType::F32, ScalarType::F64, ScalarType::BF16,
                            ScalarType::F16, ScalarType::I32, ScalarType::I64};
  for (ScalarType t : all) {
    Tensor x(t, {3, 1 + static_cast<std::int64_t>(rng() % 5), 2});
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, nd(rng));
    f.tensors[std::string("t_") + toString(t)] = x;
  }
  f.tensors["scalar"] = Tensor::fromDoubles(ScalarType::F32, {}, {3.25});
  f.tensors["empty"] = Tensor(ScalarType::F16, {0, 4});
  Tensor big(ScalarType::I64, {1});
  big.setInt(0, -(std::int64_t{1} << 60) - 7);
  f.tensors["big"] = big;
  f.metadata["format"] = "pt";
  f.metadata["note"] = "dgps test";

  const std::string path = tempPath("roundtrip");
  writeSafetensors(path, f);
  const SafetensorsFile g = readSafetensors(path);
  std::remove(path.c_str());
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (const auto& kv : f.tensors) {
    SCOPED_TRACE(kv.first);
    const Tensor& y = g.tensors.at(kv.first);
    EXPECT_EQ(y.dtype(), kv.second.dtype());
    EXPECT_EQ(y.shape(), kv.second.shape());
    EXPECT_EQ(y.bytes(), kv.second.bytes());
  }
  EXPECT_EQ(g.tensors.at("big").getInt(0), -(std::int64_t{1} << 60) - 7);

  // The header is JSON with the documented fields, padded to 8 bytes, followed by the data.
  const std::string bytes = serializeSafetensors(f);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_NE(header.find("\"dtype\":\"BF16\""), std::string::npos) << header;
  EXPECT_NE(header.find("\"data_offsets\""), std::string::npos);
  EXPECT_NE(header.find("\"__metadata__\""), std::string::npos);
}

TEST(Safetensors, TruncatedFile) {
  expectRejected(std::string("\x10\0\0", 3), {"truncated", "3 bytes"});
  SafetensorsFile f;
  f.tensors["w"] = Tensor::fromDoubles(ScalarType::F32, {2}, {1.0, 2.0});
  std::string good = serializeSafetensors(f);
  expectRejected(good.substr(0, good.size() - 1), {"tensor 'w'", "out of range"});
}

TEST(Safetensors, BadHeaderLength) {
  expectRejected(le64(1000) + "{}", {"bad header length 1000", "only 2 bytes"});
  expectRejected(le64(~0ull) + "{}", {"bad header length"});
}

TEST(Safetensors, BadJson) {
  expectRejected(image("{\"w\": {\"dtype\": \"F32\",", 0), {"bad JSON header"});
  expectRejected(image("[1, 2, 3]", 0), {"bad JSON header", "expected an object", "array"});
  expectRejected(image("{\"w\": 5}", 0), {"tensor 'w'", "not a JSON object"});
  expectRejected(image("{\"__metadata__\": {\"a\": 1}}", 0), {"__metadata__", "not a string"});
}

TEST(Safetensors, OffsetsOutOfRangeOrInconsistent) {
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", 8),
                 {"tensor 'w'", "data_offsets [0, 16] out of range", "8 bytes"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 4]}})", 8),
                 {"tensor 'w'", "begin > end"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                 {"tensor 'w'", "size mismatch", "needs 12 bytes", "span 8"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, -8]}})", 8),
                 {"tensor 'w'", "data_offsets"});
  expectRejected(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                       12),
                 {"'a'", "'b'", "overlap"});
  expectRejected(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
                 {"belong to no tensor", "'a'"});
  expectRejected(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8),
                 {"cover only 4"});
}

TEST(Safetensors, BadEntries) {
  expectRejected(image(R"({"w": {"dtype": "Q8", "shape": [2], "data_offsets": [0, 2]}})", 2),
                 {"tensor 'w'", "unsupported dtype 'Q8'"});
  expectRejected(image(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8), {"tensor 'w'", "dtype"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8),
                 {"tensor 'w'", "not a non-negative integer"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", 8),
                 {"tensor 'w'", "not a non-negative integer"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8),
                 {"tensor 'w'", "[begin, end]"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}})", 8),
                 {"tensor 'w'", "unknown header field 'x'"});
  expectRejected(image(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})", 8),
                 {"tensor 'w'", "too large"});
}

TEST(Safetensors, MissingFileNamesThePath) {
  try {
    readSafetensors("/nonexistent/dir/x.safetensors");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.safetensors: cannot open"), std::string::npos) << e.what();
  }
  SafetensorsFile f;
  EXPECT_THROW(writeSafetensors("/nonexistent/dir/y.safetensors", f), DataError);
  f.tensors["__metadata__"] = Tensor(ScalarType::F32, {1});
  EXPECT_THROW(serializeSafetensors(f), DataError);
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  SafetensorsFile f;
  f.tensors["a"] = Tensor::fromDoubles(ScalarType::BF16, {2, 3}, {1, 2, 3, 4, 5, 6});
  f.tensors["b"] = Tensor::fromDoubles(ScalarType::I64, {2}, {7, 8});
  const std::string good = serializeSafetensors(f);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 3) {
        case 0: bad[rng() % bad.size()] = static_cast<char>(rng()); break;
        case 1: bad.resize(rng() % (bad.size() + 1)); break;
        default: bad.insert(rng() % (bad.size() + 1), 1, static_cast<char>(rng())); break;
      }
      if (bad.empty()) break;
    }
    try {
      parseSafetensors(bad, "fuzz");
    } catch (const DataError& e) {
      ++rejected;
      EXPECT_EQ(std::string(e.what()).rfind("fuzz: ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(rejected, 2000);
}

}  // namespace
}  // namespace dgps::test
