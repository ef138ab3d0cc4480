// Seeded mutation runs over the dsl parsers: the spec parser + validator (seeds: every specs/*.yaml) and
// the safetensors reader (seed: a file written by serializeSafetensors). A crash or hang fails the ctest
// (it has a timeout); an exception other than the documented one fails the test, naming the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "Mutator.h"
#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> shippedSpecPaths() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DGPS_SOURCE_DIR) + "/specs"))
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

constexpr int kSpecMutantsPerSeed = 60;
constexpr int kTensorMutants = 1500;

TEST(SpecMutations, EveryMutantIsParsedOrRejectedWithDiagnostics) {
  const std::vector<std::string> seeds = shippedSpecPaths();
  ASSERT_GE(seeds.size(), 10u) << "specs/*.yaml not found under " << DGPS_SOURCE_DIR;
  int accepted = 0, rejected = 0;
  for (std::size_t f = 0; f < seeds.size(); ++f) {
    const std::string text = readAll(seeds[f]);
    ASSERT_TRUE(parseSpecString(text, seeds[f]).ok()) << seeds[f] << " is not a valid seed";
    for (int i = 0; i < kSpecMutantsPerSeed; ++i) {
      const std::uint64_t seed = 1000003ull * f + static_cast<std::uint64_t>(i);
      const std::string mutant = test::Mutator(seed).mutate(text);
      try {
        const ParseResult r = parseSpecString(mutant, "mutant.yaml");
        if (r.ok()) {
          ++accepted;
          // An accepted spec must survive everything downstream of the parser.
          EXPECT_FALSE(hasErrors(validateSpec(*r.spec))) << seeds[f] << " seed " << seed;
          EXPECT_FALSE(canonicalYaml(*r.spec).empty());
          EXPECT_FALSE(specHash(*r.spec).empty());
        } else {
          ++rejected;
          ASSERT_FALSE(r.diagnostics.empty()) << seeds[f] << " seed " << seed << ": rejected without a diagnostic";
          for (const Diagnostic& d : r.diagnostics) ASSERT_FALSE(d.message.empty()) << seeds[f] << " seed " << seed;
        }
      } catch (const std::exception& e) {
        FAIL() << seeds[f] << " seed " << seed << ": exception escaped parseSpecString: " << e.what();
      }
    }
  }
  // The run must exercise both outcomes, or the mutations are too weak (or too strong) to test anything.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, accepted);
}

SafetensorsFile seedFile() {
  SafetensorsFile f;
  Tensor q(ScalarType::BF16, {1, 3, 2, 4});
  for (std::int64_t i = 0; i < q.numel(); ++i) q.set(i, 0.25 * static_cast<double>(i % 7) - 0.5);
  Tensor g(ScalarType::F32, {1, 3, 2});
  for (std::int64_t i = 0; i < g.numel(); ++i) g.set(i, -0.1 * static_cast<double>(i + 1));
  Tensor cu(ScalarType::I64, {3});
  cu.set(0, 0), cu.set(1, 1), cu.set(2, 3);
  f.tensors.emplace("q", q);
  f.tensors.emplace("g", g);
  f.tensors.emplace("cu_seqlens", cu);
  f.metadata["producer"] = "robustness";
  return f;
}

TEST(SafetensorsMutations, EveryMutantIsReadOrRejectedWithDataError) {
  const std::string bytes = serializeSafetensors(seedFile());
  ASSERT_EQ(parseSafetensors(bytes, "seed").tensors.size(), 3u);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < kTensorMutants; ++i) {
    const std::uint64_t seed = 77000000ull + static_cast<std::uint64_t>(i);
    const std::string mutant = test::Mutator(seed).mutate(bytes);
    try {
      const SafetensorsFile f = parseSafetensors(mutant, "mutant.safetensors");
      ++accepted;
      // What was accepted must round-trip: the reader's checks describe a consistent file.
      EXPECT_NO_THROW(parseSafetensors(serializeSafetensors(f), "roundtrip")) << "seed " << seed;
    } catch (const DataError& e) {
      ++rejected;
      EXPECT_EQ(std::string(e.what()).rfind("mutant.safetensors: ", 0), 0u) << "seed " << seed << ": " << e.what();
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": " << typeid(e).name() << " escaped parseSafetensors: " << e.what();
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, accepted);
}

}  // namespace
}  // namespace dgps
