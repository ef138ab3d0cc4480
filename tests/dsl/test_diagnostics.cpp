// Malformed specs: each gives exactly one error, at the exact 1-based line and column, with the key
// path and a message naming what was wrong and what is allowed.
#include <gtest/gtest.h>

#include "DslTestUtil.h"

namespace dgps {
namespace {

// Five lines of a valid GDN-like spec; appended text starts on line 6.
const std::string H5 =
    "name: t\n"
    "decay: scalar\n"
    "gain: {kind: scalar, range: [0, 1]}\n"
    "precond: none\n"
    "solve: delta\n";
// The same without precond; an appended `precond:` starts on line 5.
const std::string H4 =
    "name: t\n"
    "decay: scalar\n"
    "gain: {kind: scalar, range: [0, 1]}\n"
    "solve: delta\n";
const std::string HG = H4 + "precond:\n  kind: diagonal\n  source: hypergrad_ogd\n";  // line 8 next
// Without precond and solve: an appended `precond:` is line 4, `solve:` line 5.
const std::string H3 =
    "name: t\n"
    "decay: scalar\n"
    "gain: {kind: scalar, range: [0, 1]}\n";

struct BadCase {
  const char* label;
  std::string text;
  int line;
  int column;
  const char* path;
  const char* message;  // substring of the message
};

std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.label; }

const std::vector<BadCase>& badCases() {
  static const std::vector<BadCase> cases = {
      // ---- YAML syntax ----
      {"unclosed_flow_list", "name: [t\n", 2, 1, "", "invalid YAML: end of sequence flow not found"},
      {"bad_indentation", "name: t\n decay: none\n", 2, 7, "", "invalid YAML: illegal map value"},
      {"tab_indentation", "name: t\n\tdecay: none\n", 2, 1, "", "invalid YAML: illegal tab"},
      {"unclosed_flow_map", "name: {t: 1\n", 2, 1, "", "invalid YAML: end of map flow not found"},
      {"two_documents", H5 + "---\nname: u\n", 7, 1, "", "one YAML document; found a second one"},
      // A stray ',' makes yaml-cpp's LoadAll loop forever (yaml-cpp #1040); found by the fuzz test.
      {"stray_comma_first", ", PGDN spec\n" + H5, 1, 1, "", "invalid YAML: unexpected ',' where a value must start"},
      {"stray_comma_after", H5 + ",\n", 6, 1, "", "invalid YAML: end of map not found"},
      {"empty_file", "", 1, 1, "", "empty spec"},
      // A tag changes how a value reads (`!!str 1e-6` is a string where a number is expected): refused.
      {"yaml_tag_on_number", H5 + "normalize: {eps: !!str 1e-6}\n", 6, 18, "", "YAML tag '!!str' is not allowed"},
      {"yaml_tag_on_mapping", H5 + "dims: !mine {key: [64]}\n", 6, 7, "", "YAML tag '!mine' is not allowed"},
      {"only_comments", "# nothing here\n\n", 1, 1, "", "empty spec"},
      {"root_is_list", "- name: t\n", 1, 1, "", "wrong type: got a list"},
      {"root_is_scalar", "hello\n", 1, 1, "", "wrong type: got 'hello'"},
      // ---- keys ----
      {"unknown_top_key_typo", H5 + "gian: 1\n", 6, 1, "gian", "unknown key 'gian'; did you mean 'gain'?"},
      {"unknown_top_key", H5 + "foo: 1\n", 6, 1, "foo", "unknown key 'foo'"},
      {"unknown_nested_key", H4 + "precond:\n  kind: diagonal\n  squash:\n    xx: 2\n", 8, 5,
       "precond.squash.xx", "unknown key 'xx'; did you mean 'x'?"},
      {"unknown_key_transposed",
       "name: t\ndecay: scalar\ngain: {kind: scalar, rnage: [0, 1]}\nprecond: none\nsolve: delta\n", 3,
       22, "gain.rnage", "did you mean 'range'?"},
      {"duplicate_top_key", H5 + "name: u\n", 6, 1, "name", "duplicate key 'name' (first written at line 1)"},
      {"duplicate_flow_key", H4 + "precond: {kind: diagonal, side: key, side: query}\n", 5, 38,
       "precond.side", "duplicate key 'side'"},
      {"missing_name", "decay: scalar\ngain: none\nprecond: none\nsolve: delta\n", 1, 1, "name",
       "missing required key 'name'"},
      {"missing_decay", "name: t\ngain: none\nprecond: none\nsolve: delta\n", 1, 1, "decay",
       "missing required key 'decay'"},
      {"missing_kind", "name: t\ndecay: none\ngain: none\nprecond: none\nsolve: {}\n", 5, 8, "solve.kind",
       "missing required key 'kind' in 'solve'"},
      {"axis_without_value", "name: t\ndecay:\ngain: none\nprecond: none\nsolve: delta\n", 2, 1, "decay",
       "missing value"},
      {"axis_is_list", "name: t\ndecay: [scalar]\ngain: none\nprecond: none\nsolve: delta\n", 2, 8, "decay",
       "wrong type: got a list"},
      {"key_is_list", H5 + "[a, b]: 1\n", 6, 1, "", "keys must be plain names"},
      // ---- enum values ----
      {"decay_typo", "name: t\ndecay: scalr\ngain: none\nprecond: none\nsolve: delta\n", 2, 8, "decay.kind",
       "unknown value 'scalr'; did you mean 'scalar'?"},
      {"gain_unknown", "name: t\ndecay: none\ngain: bool\nprecond: none\nsolve: delta\n", 3, 7, "gain.kind",
       "unknown value 'bool'"},
      {"side_typo", H4 + "precond: {kind: diagonal, side: keys}\n", 5, 33, "precond.side",
       "did you mean 'key'?"},
      {"source_unknown", H4 + "precond: {kind: diagonal, source: ema}\n", 5, 35, "precond.source",
       "unknown value 'ema'"},
      {"solve_unknown", "name: t\ndecay: none\ngain: none\nprecond: none\nsolve: delta_rule\n", 5, 8,
       "solve.kind", "unknown value 'delta_rule'"},
      {"timing_unknown", HG + "  hypergrad: {timing: before}\n", 8, 23, "precond.hypergrad.timing",
       "unknown value 'before'"},
      {"dtype_typo", H5 + "dtypes: {inputs: [bf16, fp16]}\n", 6, 25, "dtypes.inputs[1]",
       "did you mean 'f16'?"},
      {"kernel_typo", H5 + "kernels: [chunk_fwd]\n", 6, 11, "kernels[0]", "did you mean 'chunk_forward'?"},
      {"state_dtype_unknown", H5 + "dtypes: {state: f64}\n", 6, 17, "dtypes.state", "unknown value 'f64'"},
      // ---- types ----
      {"number_is_word", H4 + "precond:\n  kind: diagonal\n  squash: {x: big}\n", 7, 15, "precond.squash.x",
       "wrong type: got 'big'"},
      {"number_is_quoted", H4 + "precond:\n  kind: diagonal\n  squash: {x: \"1.5\"}\n", 7, 15,
       "precond.squash.x", "wrong type: got the quoted string \"1.5\""},
      {"bool_is_number", H4 + "precond:\n  kind: diagonal\n  squash: {gate: 1}\n", 7, 18,
       "precond.squash.gate", "wrong type: got '1'"},
      {"bool_is_yes", H5 + "normalize: {qk_l2norm: yes}\n", 6, 24, "normalize.qk_l2norm", "wrong type: got 'yes'"},
      {"bool_is_quoted", H5 + "io: {varlen: \"true\"}\n", 6, 14, "io.varlen",
       "wrong type: got the quoted string \"true\""},
      {"int_is_fraction", H5 + "heads: {gva_ratio: 1.5}\n", 6, 20, "heads.gva_ratio", "wrong type: got '1.5'"},
      {"int_overflow", H5 + "heads: {qk: 99999999999}\n", 6, 13, "heads.qk", "integer out of range"},
      {"heads_word", H5 + "heads: {qk: many}\n", 6, 13, "heads.qk", "wrong type: got 'many'"},
      {"list_is_scalar", H5 + "dims: {key: 64}\n", 6, 13, "dims.key", "wrong type: got '64'"},
      {"list_element_word", H5 + "dims:\n  value: [64, abc]\n", 7, 15, "dims.value[1]", "wrong type: got 'abc'"},
      {"range_one_number",
       "name: t\ndecay: none\ngain: {kind: scalar, range: [0]}\nprecond: none\nsolve: delta\n", 3, 29,
       "gain.range", "expected 2 numbers [lo, hi], got 1"},
      {"range_scalar", "name: t\ndecay: none\ngain: {kind: scalar, range: 1}\nprecond: none\nsolve: delta\n",
       3, 29, "gain.range", "wrong type: got '1'"},
      {"description_map", H5 + "description: {a: 1}\n", 6, 14, "description", "wrong type: got a mapping"},
      {"nan", H5 + "normalize: {eps: .nan}\n", 6, 18, "normalize.eps", "wrong type: got '.nan'"},
      {"inf_not_allowed", H4 + "precond:\n  kind: diagonal\n  squash: {eps: inf}\n", 7, 17,
       "precond.squash.eps", "wrong type: got 'inf'"},
      {"section_is_list", H5 + "tuning: [64]\n", 6, 9, "tuning", "wrong type: got a list"},
      {"number_overflow", H5 + "scale: 1e999\n", 6, 8, "scale", "number out of range"},
      {"allow_unstable_number", H5 + "allow_unstable: 1\n", 6, 17, "allow_unstable", "wrong type: got '1'"},
      // ---- values ----
      {"name_upper_case", "name: PGDN\ndecay: none\ngain: none\nprecond: none\nsolve: delta\n", 1, 7, "name",
       "'PGDN' is not an identifier"},
      {"name_too_long", "name: " + std::string(30000, 'a') + "\ndecay: none\ngain: none\nprecond: none\nsolve: delta\n", 1,
       7, "name", "is 30000 characters long"},
      {"name_empty", "name: \"\"\ndecay: none\ngain: none\nprecond: none\nsolve: delta\n", 1, 7, "name",
       "must not be empty"},
      {"range_empty", "name: t\ndecay: none\ngain: {kind: scalar, range: [0.5, 0.5]}\nprecond: none\nsolve: delta\n",
       3, 35, "gain.range[1]", "upper bound must be > the lower bound 0.5, got 0.5"},
      {"range_negative", "name: t\ndecay: none\ngain: {kind: scalar, range: [-1, 1]}\nprecond: none\nsolve: delta\n",
       3, 30, "gain.range[0]", "lower bound must be >= 0 and finite, got -1"},
      {"squash_x_one", H4 + "precond:\n  kind: diagonal\n  squash:\n    x: 1\n", 8, 8, "precond.squash.x",
       "must be > 1, got 1"},
      {"squash_x_below_one", H4 + "precond:\n  kind: diagonal\n  squash:\n    x: 0.5\n", 8, 8, "precond.squash.x",
       "must be > 1, got 0.5"},
      {"squash_eps_zero", H4 + "precond:\n  kind: diagonal\n  squash:\n    eps: 0\n", 8, 10, "precond.squash.eps",
       "must be > 0, got 0"},
      {"l2norm_eps_negative", H5 + "normalize: {eps: -1e-6}\n", 6, 18, "normalize.eps", "must be > 0, got -1e-6"},
      {"eta_negative", HG + "  hypergrad:\n    eta: -0.1\n", 9, 10, "precond.hypergrad.eta", "must be >= 0, got -0.1"},
      {"init_zero", HG + "  hypergrad:\n    init: 0\n", 9, 11, "precond.hypergrad.init", "must be > 0, got 0"},
      {"clamp_reversed", HG + "  hypergrad:\n    clamp: [2, 1]\n", 9, 12, "precond.hypergrad.clamp",
       "lower bound 2 is above upper bound 1"},
      {"clamp_negative", HG + "  hypergrad:\n    clamp: [-1, 4]\n", 9, 13, "precond.hypergrad.clamp[0]",
       "lower bound must be >= 0, got -1"},
      {"init_outside_clamp", HG + "  hypergrad:\n    init: 0.25\n    clamp: [0.5, 4]\n", 9, 11,
       "precond.hypergrad.init", "initial d 0.25 lies outside the clamp range [0.5, 4]"},
      {"heads_negative", H5 + "heads: {qk: -2}\n", 6, 13, "heads.qk", "got -2"},
      {"gva_ratio_zero", H5 + "heads: {gva_ratio: 0}\n", 6, 20, "heads.gva_ratio", "must be in 1..64, got 0"},
      {"key_dim_small", H5 + "dims: {key: [8]}\n", 6, 14, "dims.key[0]", "K = 8 is outside 16..256"},
      {"value_dim_large", H5 + "dims: {value: [512]}\n", 6, 16, "dims.value[0]", "V = 512 is outside 16..256"},
      {"dims_duplicate", H5 + "dims: {key: [64, 64]}\n", 6, 18, "dims.key[1]",
       "duplicate value 64 (already at dims.key[0])"},
      {"dims_empty", H5 + "dims: {key: []}\n", 6, 13, "dims.key", "must not be empty"},
      {"chunk_too_large", H5 + "tuning: {chunk: [128]}\n", 6, 18, "tuning.chunk[0]", "128 is not one of {16, 32, 64}"},
      {"chunk_not_allowed", H5 + "tuning: {chunk: [32, 48]}\n", 6, 22, "tuning.chunk[1]", "48 is not one of"},
      {"chunk_empty", H5 + "tuning: {chunk: []}\n", 6, 17, "tuning.chunk", "must not be empty"},
      {"warps_odd", H5 + "tuning: {warps: [3]}\n", 6, 18, "tuning.warps[0]", "3 is not one of {2, 4, 8}"},
      {"stages_zero", H5 + "tuning: {stages: [0]}\n", 6, 19, "tuning.stages[0]", "0 is not one of {1, 2}"},
      // values the device library's config.cuh refuses at NVRTC time must be refused here (launch_rules.h choices)
      {"warps_sixteen", H5 + "tuning: {warps: [8, 16]}\n", 6, 21, "tuning.warps[1]", "16 is not one of {2, 4, 8}"},
      {"warps_one", H5 + "tuning: {warps: [1]}\n", 6, 18, "tuning.warps[0]", "1 is not one of {2, 4, 8}"},
      {"stages_three", H5 + "tuning: {stages: [3]}\n", 6, 19, "tuning.stages[0]", "3 is not one of {1, 2}"},
      {"block_v_large", H5 + "tuning: {block_v: [256]}\n", 6, 20, "tuning.block_v[0]", "256 is not one of"},
      {"inputs_f32", H5 + "dtypes: {inputs: [f32]}\n", 6, 19, "dtypes.inputs[0]", "f32 inputs are not supported"},
      {"state_bf16", H5 + "dtypes: {state: bf16}\n", 6, 17, "dtypes.state",
       "the recurrent state must be f32, got bf16"},
      {"kernels_empty", H5 + "kernels: []\n", 6, 10, "kernels", "must not be empty"},
      {"kernels_duplicate", H5 + "kernels: [decode, decode]\n", 6, 19, "kernels[1]", "duplicate value decode"},
      {"scale_zero", H5 + "scale: 0\n", 6, 8, "scale", "must be > 0, got 0"},
      // ---- Householder steps per token (solve.steps) ----
      {"steps_zero", H3 + "precond: none\nsolve: {kind: delta, steps: 0}\n", 5, 29, "solve.steps",
       "must be in 1..4, got 0"},
      {"steps_too_many", H3 + "precond: none\nsolve: {kind: delta, steps: 5}\n", 5, 29, "solve.steps",
       "must be in 1..4, got 5"},
      {"steps_not_integer", H3 + "precond: none\nsolve: {kind: delta, steps: 1.5}\n", 5, 29, "solve.steps",
       "wrong type: got '1.5'"},
      {"steps_with_linear", H3 + "precond: none\nsolve: {kind: linear, steps: 2}\n", 5, 23, "solve.steps",
       "does not apply: solve.kind is linear"},
      {"steps_with_precond", H3 + "precond: {kind: diagonal}\nsolve: {kind: delta, steps: 2}\n", 5, 29,
       "solve.steps", "with a diagonal preconditioner"},
      // ---- keys that do not apply ----
      {"range_without_gain", "name: t\ndecay: none\ngain: {kind: none, range: [0, 1]}\nprecond: none\nsolve: delta\n",
       3, 20, "gain.range", "does not apply: gain.kind is none"},
      {"side_without_precond", H4 + "precond: {kind: none, side: key}\n", 5, 23, "precond.side",
       "does not apply: precond.kind is none"},
      {"squash_with_hypergrad", HG + "  squash: {x: 2}\n", 8, 3, "precond.squash",
       "does not apply: precond.source is hypergrad_ogd"},
      {"hypergrad_with_squash", H4 + "precond:\n  kind: diagonal\n  hypergrad: {eta: 1}\n", 7, 3,
       "precond.hypergrad", "does not apply: precond.source is ema_sq_squash"},
      {"eps_without_l2norm", H5 + "normalize: {qk_l2norm: false, eps: 1e-6}\n", 6, 31, "normalize.eps",
       "does not apply: normalize.qk_l2norm is false"},
      {"precond_state_without_precond", H5 + "io: {initial_precond_state: true}\n", 6, 29,
       "io.initial_precond_state", "cannot be true: precond.kind is none"},
      {"varlen_without_chunk_forward", H5 + "kernels: [decode]\nio: {varlen: true}\n", 7, 14, "io.varlen",
       "cannot be true: varlen (cu_seqlens) applies to the chunk_forward kernel"},
      // ---- combinations ----
      {"neg_eigval_with_atk",
       "name: t\ndecay: scalar\ngain: {kind: scalar, range: [0, 2]}\nprecond: {kind: diagonal}\nsolve: delta\n", 3,
       33, "gain.range[1]", "unstable write: the eigenvalue 1 - beta*sum_i(M_i*k_i^2) of the delta-rule "
                            "transition reaches 1 - 2*1.5 = -2 < -1"},
      {"squash_x_too_large",
       "name: t\ndecay: none\ngain: none\nprecond:\n  kind: diagonal\n  squash: {x: 3}\nsolve: delta\n", 6, 15,
       "precond.squash.x", "reaches 1 - 1*3 = -2 < -1"},
      {"unbounded_gain_delta",
       "name: t\ndecay: scalar\ngain: {kind: scalar, range: [0, inf]}\nprecond: none\nsolve: delta\n", 3, 33,
       "gain.range[1]", "reaches 1 - inf*1 = -inf < -1"},
      {"neg_eigval_without_l2norm",
       "name: t\ndecay: scalar\ngain: {kind: scalar, range: [0, 2]}\nprecond: none\nsolve: delta\n"
       "normalize: {qk_l2norm: false}\n",
       3, 33, "gain.range[1]", "a gain above 1 needs unit-norm keys"},
      {"hypergrad_with_linear_solve",
       "name: t\ndecay: none\ngain: scalar\nprecond: {kind: diagonal, source: hypergrad_ogd}\nsolve: linear\n", 4,
       35, "precond.source", "hypergrad_ogd needs solve.kind: delta"},
      {"hypergrad_on_query",
       "name: t\ndecay: none\ngain: scalar\nprecond: {kind: diagonal, side: query, source: hypergrad_ogd}\n"
       "solve: delta\n",
       4, 33, "precond.side", "side query is not supported with source hypergrad_ogd"},
      {"hypergrad_with_gva", HG + "heads: {gva_ratio: 2}\n", 8, 20, "heads.gva_ratio",
       "hypergrad_ogd needs heads.gva_ratio 1"},
      {"dscan_eta_too_large", HG + "  hypergrad: {eta: 3}\n", 8, 20, "precond.hypergrad.eta",
       "stable only if eta*beta^2 <= 2"},
      {"dscan_eta_with_retention", HG + "  hypergrad: {eta: 1.5, retention: true}\n", 8, 20,
       "precond.hypergrad.eta", "stable only if eta*beta^2 <= 1"},
      {"clamp_max_too_large", HG + "  hypergrad: {clamp: [0, 4]}\n", 8, 26, "precond.hypergrad.clamp[1]",
       "reaches 1 - 1*4 = -3 < -1"},
      {"pgdn_x_too_large", H4 + "precond:\n  kind: diagonal\n  squash:\n    x: 2.5\n", 8, 8, "precond.squash.x",
       "reaches 1 - 1*2.5 = -1.5 < -1"},
  };
  return cases;
}

class Malformed : public ::testing::TestWithParam<BadCase> {};

TEST_P(Malformed, OneErrorAtTheRightPlace) {
  const BadCase& c = GetParam();
  ParseResult r = parseSpecString(c.text, "bad.yaml");
  ASSERT_FALSE(r.ok()) << "accepted:\n" << c.text;
  std::vector<Diagnostic> errors;
  for (const Diagnostic& d : r.diagnostics)
    if (d.severity == Severity::Error) errors.push_back(d);
  ASSERT_EQ(errors.size(), 1u) << test::allDiagnostics(r);
  const Diagnostic& d = errors[0];
  EXPECT_EQ(d.file, "bad.yaml");
  EXPECT_EQ(d.line, c.line) << formatDiagnostic(d);
  EXPECT_EQ(d.column, c.column) << formatDiagnostic(d);
  EXPECT_EQ(d.path, c.path) << formatDiagnostic(d);
  EXPECT_NE(d.message.find(c.message), std::string::npos) << formatDiagnostic(d) << "\nwanted: " << c.message;
  EXPECT_FALSE(d.expected.empty()) << formatDiagnostic(d);
  const std::string rendered = formatDiagnostic(d);
  const std::string where = "bad.yaml:" + std::to_string(c.line) + ":" + std::to_string(c.column) + ": error: ";
  EXPECT_EQ(rendered.rfind(where, 0), 0u) << rendered;
}

INSTANTIATE_TEST_SUITE_P(Table, Malformed, ::testing::ValuesIn(badCases()),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(Malformed, TableIsLargeAndLabelsAreUnique) {
  EXPECT_GE(badCases().size(), 40u);
  std::set<std::string> labels;
  for (const BadCase& c : badCases()) EXPECT_TRUE(labels.insert(c.label).second) << c.label;
}

TEST(Malformed, IndependentMistakesAreAllReportedInFileOrder) {
  ParseResult r = parseSpecString(
      "name: t\ndecay: scalr\ngain: none\nprecond: none\nsolve: delta\ndims: {key: [8]}\ntuning: {chunk: [48]}\n",
      "two.yaml");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 3u) << test::allDiagnostics(r);
  EXPECT_EQ(r.diagnostics[0].path, "decay.kind");
  EXPECT_EQ(r.diagnostics[1].path, "dims.key[0]");
  EXPECT_EQ(r.diagnostics[2].path, "tuning.chunk[0]");
  EXPECT_LT(r.diagnostics[0].line, r.diagnostics[1].line);
}

TEST(Malformed, FilesInSpecsBad) {
  struct FileCase {
    const char* file;
    int line, column;
    const char* path;
    const char* message;
  };
  const FileCase cases[] = {
      {"unstable_neg_eigval.yaml", 9, 14, "gain.range[1]", "unstable write"},
      {"kda_bf16_state.yaml", 17, 10, "dtypes.state", "the recurrent state must be f32, got bf16"},
      {"typo_in_precond.yaml", 10, 5, "precond.squash.centre_init",
       "unknown key 'centre_init'; did you mean 'center_init'?"},
      {"broken_yaml.yaml", 5, 1, "", "invalid YAML: end of map flow not found"},
      {"osdn_query_side.yaml", 7, 9, "precond.side", "side query is not supported"},
  };
  for (const FileCase& c : cases) {
    const std::string path = test::testDir() + "/specs_bad/" + c.file;
    ParseResult r = parseSpecFile(path);
    ASSERT_FALSE(r.ok()) << c.file;
    ASSERT_EQ(r.diagnostics.size(), 1u) << test::allDiagnostics(r);
    const Diagnostic& d = r.diagnostics[0];
    EXPECT_EQ(d.file, path);
    EXPECT_EQ(d.line, c.line) << formatDiagnostic(d);
    EXPECT_EQ(d.column, c.column) << formatDiagnostic(d);
    EXPECT_EQ(d.path, c.path) << formatDiagnostic(d);
    EXPECT_NE(d.message.find(c.message), std::string::npos) << formatDiagnostic(d);
  }
}

TEST(Malformed, MissingFileIsOneDiagnostic) {
  ParseResult r = parseSpecFile(test::testDir() + "/specs_bad/no_such_file.yaml");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_NE(r.diagnostics[0].message.find("cannot open spec file"), std::string::npos);
}

// ---- accepted with a warning ----

TEST(Warnings, AllowUnstableTurnsTheStabilityErrorIntoAWarning) {
  // The paper's x = 8 amplify ablation (docs/math.md §7.2).
  ParseResult r = parseSpecString(H4 + "precond:\n  kind: diagonal\n  squash: {x: 8}\nallow_unstable: true\n",
                                  "x8.yaml");
  ASSERT_TRUE(r.ok()) << test::allDiagnostics(r);
  ASSERT_EQ(r.diagnostics.size(), 1u) << test::allDiagnostics(r);
  const Diagnostic& d = r.diagnostics[0];
  EXPECT_EQ(d.severity, Severity::Warning);
  EXPECT_EQ(d.path, "precond.squash.x");
  EXPECT_EQ(d.line, 7);
  EXPECT_EQ(d.column, 15);
  EXPECT_NE(d.message.find("1 - 1*8 = -7"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("accepted: allow_unstable is true"), std::string::npos) << d.message;
  EXPECT_EQ(formatDiagnostic(d).rfind("x8.yaml:7:15: warning: precond.squash.x: ", 0), 0u);
}

TEST(Warnings, DeltaRuleWithoutKernelL2NormWarns) {
  ParseResult r = parseSpecString(H5 + "normalize: {qk_l2norm: false}\n", "w.yaml");
  ASSERT_TRUE(r.ok()) << test::allDiagnostics(r);
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].severity, Severity::Warning);
  EXPECT_EQ(r.diagnostics[0].path, "normalize.qk_l2norm");
  EXPECT_EQ(r.diagnostics[0].line, 6);
  EXPECT_EQ(r.diagnostics[0].column, 13);
}

TEST(Warnings, StableCombinationsHaveNone) {
  for (const std::string& text : {
           H4 + "precond:\n  kind: diagonal\n  squash: {x: 2}\n",  // 1 - 1*2 = -1: still stable
           std::string("name: t\ndecay: scalar\ngain: {kind: scalar, range: [0, 2]}\nprecond: none\nsolve: delta\n"),
           HG + "  hypergrad: {eta: 2, clamp: [0, 2]}\n",
           HG + "  hypergrad: {eta: 1, retention: true}\n",
           std::string("name: t\ndecay: scalar\ngain: {kind: scalar, range: [0, inf]}\nprecond: none\nsolve: linear\n"),
       }) {
    ParseResult r = parseSpecString(text);
    EXPECT_TRUE(r.ok()) << test::allDiagnostics(r) << text;
    EXPECT_TRUE(r.diagnostics.empty()) << test::allDiagnostics(r);
  }
}

// ---- validateSpec on specs built in code ----

TEST(ValidateSpec, ReportsFieldRulesWithoutPositions) {
  Spec s;
  s.name = "built";
  s.precond.kind = PrecondKind::Diagonal;
  s.precond.squash.x = 0.5;
  std::vector<Diagnostic> ds = validateSpec(s);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].path, "precond.squash.x");
  EXPECT_EQ(ds[0].line, 0);
  EXPECT_NE(formatDiagnostic(ds[0]).find("precond.squash.x: must be > 1, got 0.5"), std::string::npos);

  s.precond.squash.x = 1.5;
  s.gain.kind = GainKind::Scalar;
  s.gain.hi = 2;
  s.precond.loc = SourceLoc{"built.yaml", 12, 3};
  ds = validateSpec(s);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_NE(ds[0].message.find("unstable write"), std::string::npos);
}

TEST(ValidateSpec, DefaultSpecIsValid) {
  Spec s;
  s.name = "plain";
  EXPECT_TRUE(validateSpec(s).empty());
}

// formatFileProblem is the located line every schema reader (spec, package manifest, tuning database) renders:
// what is unknown is left out, never printed as 0.
TEST(FileProblem, LeavesOutWhatIsUnknown) {
  EXPECT_EQ(formatFileProblem(Severity::Error, "m.yaml", 3, 7, "launch.warps", "expected an integer, got 'x'"),
            "m.yaml:3:7: error: launch.warps: expected an integer, got 'x'");
  EXPECT_EQ(formatFileProblem(Severity::Warning, "t.jsonl", 2, 0, "", "config.warps: expected 4, got 5"),
            "t.jsonl:2: warning: config.warps: expected 4, got 5");
  EXPECT_EQ(formatFileProblem(Severity::Error, "m.yaml", 0, 9, "name", "is a but s.yaml says b"),
            "m.yaml: error: name: is a but s.yaml says b");
}

}  // namespace
}  // namespace dgps
