// Helpers shared by the spec-language tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace test {

inline std::string specsDir() { return DGPS_SPECS_DIR; }
inline std::string testDir() { return DGPS_DSL_TEST_DIR; }

/// Every spec we ship, by file stem.
inline const std::vector<std::string>& shippedSpecs() {
  static const std::vector<std::string> v = {"linear_attention", "mamba2", "deltanet", "gdn",
                                             "kda",              "pdn",    "pgdn",     "pkda",
                                             "osdn",             "osdn_apf", "atq",
                                             "gated_deltaproduct", "gdn_gva"};
  return v;
}

inline std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string allDiagnostics(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.diagnostics) out += formatDiagnostic(d) + "\n";
  return out;
}

/// Parses text that must be valid; fails the test (and returns a default Spec) otherwise.
inline Spec parseOk(const std::string& text, const std::string& name = "<test>") {
  ParseResult r = parseSpecString(text, name);
  EXPECT_TRUE(r.ok()) << allDiagnostics(r) << "\n--- text:\n" << text;
  return r.ok() ? *r.spec : Spec{};
}

/// Field-by-field equality of everything but source locations, written out here so that it does not
/// rely on the canonical form it is used to test.
inline void expectSameFields(const Spec& a, const Spec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.decay.kind, b.decay.kind);
  EXPECT_EQ(a.gain.kind, b.gain.kind);
  EXPECT_EQ(a.gain.lo, b.gain.lo);
  EXPECT_EQ(a.gain.hi, b.gain.hi);
  EXPECT_EQ(a.precond.kind, b.precond.kind);
  EXPECT_EQ(a.precond.side, b.precond.side);
  EXPECT_EQ(a.precond.source, b.precond.source);
  EXPECT_EQ(a.precond.squash.x, b.precond.squash.x);
  EXPECT_EQ(a.precond.squash.eps, b.precond.squash.eps);
  EXPECT_EQ(a.precond.squash.center_init, b.precond.squash.center_init);
  EXPECT_EQ(a.precond.squash.has_gate, b.precond.squash.has_gate);
  EXPECT_EQ(a.precond.squash.has_gain, b.precond.squash.has_gain);
  EXPECT_EQ(a.precond.hypergrad.eta, b.precond.hypergrad.eta);
  EXPECT_EQ(a.precond.hypergrad.has_retention, b.precond.hypergrad.has_retention);
  EXPECT_EQ(a.precond.hypergrad.timing, b.precond.hypergrad.timing);
  EXPECT_EQ(a.precond.hypergrad.init, b.precond.hypergrad.init);
  EXPECT_EQ(a.precond.hypergrad.clamp_min, b.precond.hypergrad.clamp_min);
  EXPECT_EQ(a.precond.hypergrad.clamp_max, b.precond.hypergrad.clamp_max);
  EXPECT_EQ(a.solve.kind, b.solve.kind);
  EXPECT_EQ(a.qk_l2norm, b.qk_l2norm);
  EXPECT_EQ(a.l2norm_eps, b.l2norm_eps);
  EXPECT_EQ(a.scale, b.scale);
  EXPECT_EQ(a.heads_qk, b.heads_qk);
  EXPECT_EQ(a.gva_ratio, b.gva_ratio);
  EXPECT_EQ(a.key_dims, b.key_dims);
  EXPECT_EQ(a.value_dims, b.value_dims);
  EXPECT_EQ(a.input_dtypes, b.input_dtypes);
  EXPECT_EQ(a.state_dtype, b.state_dtype);
  EXPECT_EQ(a.initial_state, b.initial_state);
  EXPECT_EQ(a.final_state, b.final_state);
  EXPECT_EQ(a.initial_precond_state, b.initial_precond_state);
  EXPECT_EQ(a.final_precond_state, b.final_precond_state);
  EXPECT_EQ(a.varlen, b.varlen);
  EXPECT_EQ(a.kernels, b.kernels);
  EXPECT_EQ(a.tuning.chunk, b.tuning.chunk);
  EXPECT_EQ(a.tuning.block_v, b.tuning.block_v);
  EXPECT_EQ(a.tuning.warps, b.tuning.warps);
  EXPECT_EQ(a.tuning.stages, b.tuning.stages);
  EXPECT_EQ(a.allow_unstable, b.allow_unstable);
}

}  // namespace test
}  // namespace dgps
