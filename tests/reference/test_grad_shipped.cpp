// Reference gradients of every shipped spec (specs/*.yaml) against central finite differences of the
// forward reference, over every element of every input, on small shapes: batched, varlen (with an
// empty sequence) and GVA. Fresh seeded inputs from the input generator; initial states and final-state
// cotangents wherever the spec has them.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>

#include "GradTestUtil.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps::test {
namespace {

const std::string kSpecs = std::string(DGPS_SOURCE_DIR) + "/specs/";

std::vector<std::string> shippedSpecNames() {
  std::vector<std::string> names;
  if (DIR* d = opendir(kSpecs.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".yaml") names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// The shipped spec with its K/V lists lifted: the recurrence does not depend on which K and V a
/// package supports, and finite differences over all elements need K, V of a few channels.
Spec loadRelaxed(const std::string& file) {
  ParseResult r = parseSpecFile(kSpecs + file);
  if (!r.ok()) throw DataError("cannot parse " + file);
  Spec s = *r.spec;
  s.key_dims.clear();
  s.value_dims.clear();
  return s;
}

void checkShape(const Spec& spec, const ReferenceProblem& shape, std::uint64_t seed) {
  ReferenceInputs in = inputs64(spec, shape, seed);
  keepOffBounds(spec, in);
  const TensorMap ct = randomCotangents(spec, shape, seed + 1);
  expectGradientsMatchFiniteDifferences(spec, in, ct, seed + 2);
}

TEST(ReferenceGradShipped, EverySpecMatchesFiniteDifferences) {
  DGPS_SEEDED(seed);
  const std::vector<std::string> names = shippedSpecNames();
  ASSERT_GE(names.size(), 12u) << "specs/ was not found at " << kSpecs;
  for (const std::string& file : names) {
    SCOPED_TRACE(file);
    const Spec spec = loadRelaxed(file);
    const std::int64_t H = spec.heads_qk > 0 ? spec.heads_qk : 2, HV = H * spec.gva_ratio;
    {
      SCOPED_TRACE("batched B=2 T=7");
      checkShape(spec, shapeOf(2, 7, H, HV, 4, 3), seed);
    }
    if (spec.varlen) {
      SCOPED_TRACE("varlen cu_seqlens = [0, 3, 3, 8]");
      checkShape(spec, shapeOf(1, 8, H, HV, 3, 4, {0, 3, 3, 8}), seed + 10);
    }
    // GVA: value heads share their key head's q, k and preconditioner (not hypergrad_ogd, whose state
    // needs one gain per key head).
    if (!usesHypergrad(spec)) {
      SCOPED_TRACE("GVA ratio 2");
      Spec gva = spec;
      gva.gva_ratio = 2;
      checkShape(gva, shapeOf(2, 5, H, 2 * H, 3, 2), seed + 20);
    }
  }
}

}  // namespace
}  // namespace dgps::test
