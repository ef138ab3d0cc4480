// Canonical form and hash: FNV-1a known answers, shortest round-trip numbers, invariance under
// spelling (key order, comments, whitespace, flow vs block, shorthand, list order, number spelling),
// change under every semantic field, and parse(canonical(s)) == s for random valid specs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "DslTestUtil.h"

namespace dgps {
namespace {

using test::expectSameFields;
using test::parseOk;

TEST(Fnv1a, KnownAnswers) {
  // Published FNV-1a 64-bit test vectors (Fowler/Noll/Vo reference suite).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(FormatNumber, ShortestSpellings) {
  EXPECT_EQ(formatNumber(1.5), "1.5");
  EXPECT_EQ(formatNumber(1e-6), "1e-6");
  EXPECT_EQ(formatNumber(-0.2), "-0.2");
  EXPECT_EQ(formatNumber(0.1), "0.1");
  EXPECT_EQ(formatNumber(2), "2");
  EXPECT_EQ(formatNumber(123456789), "123456789");
  EXPECT_EQ(formatNumber(1e20), "1e20");
  EXPECT_EQ(formatNumber(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(formatNumber(0.0), "0");
  EXPECT_EQ(formatNumber(-0.0), "0");
  EXPECT_EQ(formatNumber(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(formatNumber(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(formatNumber(std::numeric_limits<double>::denorm_min()), "5e-324");
}

TEST(FormatNumber, RoundTripsRandomDoubles) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isfinite(x)) continue;
    const std::string s = formatNumber(x);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), x == 0 ? 0.0 : x) << s;
    EXPECT_LE(s.size(), 24u) << s;
  }
}

// PGDN written four ways. All must give the same canonical form and hash.
const char* kBlock = R"(name: pgdn
description: Preconditioned Gated DeltaNet
decay:
  kind: scalar
gain:
  kind: scalar
  range: [0, 1]
precond:
  kind: diagonal
  side: key
  source: ema_sq_squash
  squash:
    x: 1.5
    eps: 1e-6
    center_init: -0.2
    gate: true
    gain: true
solve:
  kind: delta
normalize:
  qk_l2norm: true
  eps: 1e-6
dims:
  key: [64, 128]
  value: [64, 128]
tuning:
  chunk: [64]
  block_v: [32, 64]
)";

const char* kReordered = R"(tuning: {block_v: [64, 32], chunk: [64]}
solve: {kind: delta}
dims: {value: [128, 64], key: [128, 64]}
precond:
  squash: {gain: true, gate: true, center_init: -0.2, eps: 0.000001, x: 1.50}
  source: ema_sq_squash
  side: key
  kind: diagonal
normalize: {eps: 1.0e-6, qk_l2norm: true}
gain: {range: [0.0, 1.0], kind: scalar}
decay: {kind: scalar}
description: "Preconditioned Gated DeltaNet"
name: pgdn
)";

const char* kCommented = R"(# a comment before everything

name:    pgdn     # trailing comment
description: 'Preconditioned Gated DeltaNet'
decay: scalar          # shorthand for {kind: scalar}
gain:
    kind:   scalar
    range:
      - 0
      - 1
precond:
    kind: diagonal
    # side, source and every squash parameter left at their defaults
solve: delta

dims:
    key:   [ 64 , 128 ]
    value: [ 64 , 128 ]
tuning:
    chunk: [64]
    block_v: [32, 64]
    warps: [4, 8]        # the default, written out
    stages: [1, 2]
heads: {qk: any, gva_ratio: 1}
io: {initial_state: true, final_state: true, initial_precond_state: true, final_precond_state: true}
)";

TEST(Hash, InvariantUnderSpelling) {
  const Spec base = parseOk(kBlock);
  for (const char* text : {kReordered, kCommented}) {
    const Spec other = parseOk(text);
    expectSameFields(other, base);
    EXPECT_EQ(canonicalYaml(other), canonicalYaml(base));
    EXPECT_EQ(specHash(other), specHash(base));
  }
}

TEST(Hash, IgnoresDescriptionAndAllowUnstable) {
  const Spec base = parseOk(kBlock);
  Spec s = base;
  s.description = "something else entirely";
  EXPECT_EQ(specHash(s), specHash(base));
  EXPECT_NE(canonicalYaml(s), canonicalYaml(base));
  s.allow_unstable = true;
  EXPECT_EQ(specHash(s), specHash(base));
  EXPECT_FALSE(s == base);
}

/// Replaces the first occurrence of `from` in `text` (which must contain it).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(Hash, ChangesUnderEverySemanticTextEdit) {
  const std::string base = kBlock;
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"name: pgdn", "name: pgdn2"},
      {"decay:\n  kind: scalar", "decay:\n  kind: diagonal"},
      {"decay:\n  kind: scalar", "decay:\n  kind: none"},
      {"range: [0, 1]", "range: [0, 0.5]"},
      {"range: [0, 1]", "range: [0.25, 1]"},
      {"gain:\n  kind: scalar\n  range: [0, 1]", "gain:\n  kind: none"},
      {"side: key", "side: query"},
      {"x: 1.5", "x: 1.25"},
      {"eps: 1e-6\n    center", "eps: 1e-5\n    center"},
      {"center_init: -0.2", "center_init: -0.3"},
      {"gate: true", "gate: false"},
      {"gain: true", "gain: false"},
      {"solve:\n  kind: delta", "solve:\n  kind: linear"},
      {"qk_l2norm: true\n  eps: 1e-6", "qk_l2norm: true\n  eps: 1e-5"},
      {"normalize:", "scale: 0.125\nnormalize:"},
      {"normalize:", "heads: {qk: 8}\nnormalize:"},
      {"normalize:", "heads: {gva_ratio: 2}\nnormalize:"},
      {"key: [64, 128]", "key: [64, 120, 128]"},
      {"value: [64, 128]", "value: [128]"},
      {"normalize:", "dtypes: {inputs: [bf16]}\nnormalize:"},
      {"normalize:", "io: {initial_state: false}\nnormalize:"},
      {"normalize:", "io: {final_state: false}\nnormalize:"},
      {"normalize:", "io: {initial_precond_state: false}\nnormalize:"},
      {"normalize:", "io: {final_precond_state: false}\nnormalize:"},
      {"normalize:", "io: {varlen: false}\nnormalize:"},
      {"normalize:", "kernels: [decode]\nnormalize:"},
      {"chunk: [64]", "chunk: [32, 64]"},
      {"block_v: [32, 64]", "block_v: [64]"},
      {"tuning:", "tuning:\n  warps: [4]"},
      {"tuning:", "tuning:\n  stages: [2]"},
  };
  std::set<std::string> hashes = {specHash(parseOk(base))};
  for (const auto& e : edits) {
    const Spec s = parseOk(replaced(base, e.first, e.second));
    EXPECT_TRUE(hashes.insert(specHash(s)).second) << "edit did not change the hash: " << e.second;
  }
  // The OSDN fields, on an OSDN spec.
  const std::string osdn = test::readText(test::specsDir() + "/osdn.yaml");
  const std::vector<std::pair<std::string, std::string>> osdnEdits = {
      {"eta: 1", "eta: 0.5"},          {"retention: false", "retention: true"},
      {"timing: pre", "timing: post"}, {"init: 1", "init: 0.5"},
      {"clamp: none", "clamp: [0, 2]"}, {"clamp: none", "clamp: [0.1, inf]"},
  };
  std::set<std::string> osdnHashes = {specHash(parseOk(osdn))};
  for (const auto& e : osdnEdits) {
    const Spec s = parseOk(replaced(osdn, e.first, e.second));
    EXPECT_TRUE(osdnHashes.insert(specHash(s)).second) << "edit did not change the hash: " << e.second;
  }
}

TEST(Hash, FieldsThatDoNotApplyAreLeftOut) {
  // A Spec built in code may carry values in parts it does not use; they cannot reach a kernel, so
  // they change neither the canonical form nor the hash.
  const Spec base = parseOk(kBlock);  // ema_sq_squash: hypergrad parameters are unused
  Spec s = base;
  s.precond.hypergrad.eta = 0.25;
  s.precond.hypergrad.clamp_max = 3.0;
  EXPECT_EQ(canonicalYaml(s), canonicalYaml(base));
  Spec none = parseOk(test::readText(test::specsDir() + "/gdn.yaml"));
  Spec none2 = none;
  none2.precond.squash.x = 4;
  none2.precond.side = PrecondSide::Query;
  none2.initial_precond_state = !none2.initial_precond_state;
  EXPECT_EQ(specHash(none2), specHash(none));
}

// solve.steps reaches the kernels (k, v, beta have T·n_h rows), so it is in the hash; steps: 1 is the
// default and is left out, so a single-step spec written with or without it has one hash.
TEST(Hash, HouseholderStepsAreHashedAndOneStepIsTheDefault) {
  const std::string gdn = test::readText(test::specsDir() + "/gdn.yaml");
  const Spec plain = parseOk(gdn);
  std::string withOne = gdn, withTwo = gdn, withThree = gdn;
  const std::string solve = "solve:\n  kind: delta\n";
  ASSERT_NE(gdn.find(solve), std::string::npos);
  withOne.replace(withOne.find(solve), solve.size(), "solve: {kind: delta, steps: 1}\n");
  withTwo.replace(withTwo.find(solve), solve.size(), "solve: {kind: delta, steps: 2}\n");
  withThree.replace(withThree.find(solve), solve.size(), "solve:\n  steps: 3\n  kind: delta\n");
  const Spec one = parseOk(withOne), two = parseOk(withTwo), three = parseOk(withThree);
  EXPECT_EQ(one.solve.steps, 1);
  EXPECT_EQ(two.solve.steps, 2);
  EXPECT_EQ(three.solve.steps, 3);
  EXPECT_EQ(canonicalYaml(one), canonicalYaml(plain));
  EXPECT_EQ(specHash(one), specHash(plain));
  EXPECT_EQ(canonicalYaml(plain).find("steps:"), std::string::npos);
  EXPECT_NE(canonicalYaml(two).find("solve:\n  kind: delta\n  steps: 2\n"), std::string::npos) << canonicalYaml(two);
  EXPECT_NE(specHash(two), specHash(plain));
  EXPECT_NE(specHash(three), specHash(two));
  const Spec back = parseOk(canonicalYaml(three));
  EXPECT_TRUE(back == three);
  EXPECT_EQ(back.solve.steps, 3);
}

// ---- random valid specs: parse(canonical(s)) == s ----

template <class T>
T pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

template <class T>
std::vector<T> subset(std::mt19937_64& rng, const std::vector<T>& from) {
  std::vector<T> out;
  for (const T& x : from)
    if (rng() % 2) out.push_back(x);
  if (out.empty()) out.push_back(pick(rng, from));
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

/// A random spec whose inapplicable fields keep their defaults (as the parser leaves them).
Spec randomSpec(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Spec s;
  s.name = "rand_" + std::to_string(rng() % 100000);
  s.description = pick<std::string>(rng, {"", "plain", "quote \" and backslash \\", "two\nlines",
                                          "tab\tand: colon # hash", "unicode: k\u0302 \u2264 0"});
  s.decay.kind = pick(rng, std::vector<DecayKind>{DecayKind::None, DecayKind::Scalar, DecayKind::Diagonal});
  s.solve.kind = pick(rng, std::vector<SolveKind>{SolveKind::Linear, SolveKind::Delta});
  s.gain.kind = pick(rng, std::vector<GainKind>{GainKind::None, GainKind::Scalar});
  if (s.gain.kind == GainKind::Scalar) {
    s.gain.lo = pick(rng, std::vector<double>{0.0, 0.0, 1e-3, 0.1});
    s.gain.hi = pick(rng, std::vector<double>{1.0, 2.0, 0.5 + u(rng), std::numeric_limits<double>::infinity()});
  }
  s.precond.kind = pick(rng, std::vector<PrecondKind>{PrecondKind::None, PrecondKind::Diagonal});
  if (s.precond.kind == PrecondKind::Diagonal) {
    s.precond.source = pick(rng, std::vector<PrecondSource>{PrecondSource::EmaSqSquash,
                                                           PrecondSource::HypergradOgd});
    s.precond.side = pick(rng, std::vector<PrecondSide>{PrecondSide::Key, PrecondSide::Query});
    if (s.precond.source == PrecondSource::EmaSqSquash) {
      s.precond.squash.x = 1.0 + 3.0 * u(rng) + 1e-9;
      s.precond.squash.eps = std::pow(10.0, -1 - 8 * u(rng));
      s.precond.squash.center_init = -2.0 * u(rng);
      s.precond.squash.has_gate = rng() % 2;
      s.precond.squash.has_gain = rng() % 2;
    } else {
      HypergradParams& h = s.precond.hypergrad;
      h.eta = 2.0 * u(rng);
      h.has_retention = rng() % 2;
      h.timing = rng() % 2 ? WriteTiming::Pre : WriteTiming::Post;
      h.init = 0.5 + u(rng);
      if (rng() % 2) h.clamp_min = 0.25 * u(rng);
      if (rng() % 2) h.clamp_max = 1.5 + 2.0 * u(rng);
    }
  }
  s.qk_l2norm = rng() % 4 != 0;
  if (s.qk_l2norm) s.l2norm_eps = std::pow(10.0, -3 - 9 * u(rng));
  if (rng() % 2) s.scale = 0.01 + u(rng);
  s.heads_qk = rng() % 2 ? 0 : 1 + static_cast<int>(rng() % 64);
  s.gva_ratio = 1 + static_cast<int>(rng() % 8);
  s.key_dims = subset<int>(rng, {16, 32, 60, 64, 100, 120, 128, 256});
  s.value_dims = subset<int>(rng, {16, 32, 64, 120, 128, 200, 256});
  s.input_dtypes = subset<DType>(rng, {DType::BF16, DType::F16});
  s.kernels = subset<KernelKind>(rng, {KernelKind::ChunkForward, KernelKind::Decode});
  s.initial_state = rng() % 2;
  s.final_state = rng() % 2;
  if (hasPrecond(s)) {
    s.initial_precond_state = rng() % 2;
    s.final_precond_state = rng() % 2;
  } else {
    s.initial_precond_state = s.final_precond_state = false;
  }
  s.varlen = hasKernel(s, KernelKind::ChunkForward) && rng() % 2;
  s.tuning.chunk = subset<int>(rng, {16, 32, 64});
  s.tuning.block_v = subset<int>(rng, {16, 32, 64, 128});
  s.tuning.warps = subset<int>(rng, {2, 4, 8});
  s.tuning.stages = subset<int>(rng, {1, 2});
  s.allow_unstable = rng() % 2;
  return s;
}

void sortLists(Spec& s) {
  std::sort(s.key_dims.begin(), s.key_dims.end());
  std::sort(s.value_dims.begin(), s.value_dims.end());
  std::sort(s.input_dtypes.begin(), s.input_dtypes.end(),
            [](DType a, DType b) { return a == DType::BF16 && b != DType::BF16; });
  std::sort(s.kernels.begin(), s.kernels.end());
  for (auto* v : {&s.tuning.chunk, &s.tuning.block_v, &s.tuning.warps, &s.tuning.stages})
    std::sort(v->begin(), v->end());
}

TEST(Canonical, RandomValidSpecsRoundTrip) {
  std::mt19937_64 rng(std::random_device{}());
  int valid = 0;
  for (int i = 0; i < 3000; ++i) {
    Spec s = randomSpec(rng);
    if (hasErrors(validateSpec(s))) continue;  // e.g. hypergrad with solve linear
    ++valid;
    const std::string canon = canonicalYaml(s);
    ParseResult r = parseSpecString(canon, "canonical");
    ASSERT_TRUE(r.ok()) << test::allDiagnostics(r) << canon;
    Spec expected = s;
    sortLists(expected);
    expectSameFields(*r.spec, expected);
    EXPECT_EQ(canonicalYaml(*r.spec), canon);
    EXPECT_EQ(specHash(*r.spec), specHash(s));
    if (HasFailure()) {
      ADD_FAILURE() << "spec:\n" << canon;
      return;
    }
  }
  EXPECT_GT(valid, 500);  // the generator mostly produces valid specs
}

}  // namespace
}  // namespace dgps

namespace dgps {
namespace {

// The canonical text is a persistent format: hashes key kernel caches and package manifests. A change
// to it must be deliberate (update the golden files and say so in docs/spec.md).
TEST(Canonical, MatchesGoldenFiles) {
  for (const char* stem : {"pgdn", "osdn_apf", "mamba2"}) {
    const std::string golden = test::readText(test::testDir() + "/golden/" + stem + ".canonical.yaml");
    ASSERT_FALSE(golden.empty()) << stem;
    ParseResult r = parseSpecFile(test::specsDir() + "/" + stem + ".yaml");
    ASSERT_TRUE(r.ok()) << test::allDiagnostics(r);
    EXPECT_EQ(canonicalYaml(*r.spec), golden) << stem;
    // The hash is FNV-1a of the canonical text without its description and allow_unstable lines,
    // recomputed here from the golden text alone.
    std::string hashed;
    std::istringstream in(golden);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("description:", 0) != 0 && line.rfind("allow_unstable:", 0) != 0) hashed += line + "\n";
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(hashed)));
    EXPECT_EQ(specHash(*r.spec), hex) << stem;
  }
}

}  // namespace
}  // namespace dgps
