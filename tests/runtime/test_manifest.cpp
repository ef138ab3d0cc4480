// Manifest parsing: the contract's format is accepted; every kind of corruption is ONE RuntimeError
// {Package} naming the file, the key and what was expected; random corruption never crashes.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <type_traits>

#include "RuntimeTestUtil.h"
#include "dgps/dsl/LaunchManifest.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/tuning/TileConfig.h"

namespace dgps {
namespace {

const char* kValidText = R"M(dgps_package: 2
codegen_version: 1
name: pgdn
spec_hash: "0123456789abcdef"
source: kernels.cu
spec: spec.yaml
features: {decay: scalar, gain: scalar, precond: diagonal, precond_side: key, precond_source: ema_sq_squash, solve: delta}
dims: {key: [64, 128], value: [64, 128]}
dtypes: {inputs: [bf16, f16], state: f32}
io: {initial_state: true, final_state: true, initial_precond_state: true, final_precond_state: false, varlen: true}
layer: {heads_qk: 0, gva_ratio: 2, scale: 0.125, precond_inputs: {gate: true, gain: true, center: true}}
launch:
  device_layout: "@LAYOUT@"
  let:
    - {name: KP, value: "align_up(K, 16)"}
    - {name: slots, value: "select(varlen, cdiv(T, chunk) + N, B * cdiv(T, chunk))"}
  forward:
    - {role: precond_scan, symbol: dgps_pgdn_fwd_precond_scan, grid: ["N * H", "1", "1"], block: ["max(32, KP)", "1", "1"], smem: "0"}
    - {role: chunk_local, symbol: dgps_pgdn_fwd_chunk_local, grid: ["slots * HV", "1", "1"], block: ["warps * 32", "1", "1"], smem: "chunk * 4"}
    - {role: state_output, symbol: dgps_pgdn_fwd_state_output, grid: ["N * HV * cdiv(V, block_v)", "1", "1"], block: ["block_v / 16 * 32", "1", "1"], smem: "chunk * KP * 2 * stages"}
  workspace:
    align: 256
    buffers:
      - {name: tok, bytes: "slots * HV * (chunk + 1) * 32"}
  decode: {symbol: dgps_pgdn_decode, grid: ["B * HV", "1", "1"], block: ["128", "1", "1"], smem: "KP * 16"}
tunables: {chunk: [64], block_v: [32, 64], warps: [4, 8], stages: [1, 2]}
default_config: {chunk: 64, block_v: 64, warps: 4, stages: 1}
plan: {bytes_per_token_head: 1536, flops_per_token_head: 2.5e5}
)M";

// The fixture with this build's device layout fingerprint (LaunchManifest.h deviceLayoutHash).
std::string withLayout(std::string t) {
  const std::string mark = "@LAYOUT@";
  t.replace(t.find(mark), mark.size(), deviceLayoutHash());
  return t;
}
const std::string kValid = withLayout(kValidText);

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto i = s.find(from);
  EXPECT_NE(i, std::string::npos) << "fixture text lacks: " << from;
  if (i != std::string::npos) s.replace(i, from.size(), to);
  return s;
}

// Parses `text` expecting a Package error whose message contains every needle.
void expectError(const std::string& text, std::vector<std::string> needles) {
  try {
    parseManifest(text, "pkg/manifest.yaml");
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("pkg/manifest.yaml", 0), 0u) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }
}

TEST(Manifest, ParsesTheContractFormat) {
  Manifest m = parseManifest(kValid, "m.yaml");
  EXPECT_EQ(m.name, "pgdn");
  EXPECT_EQ(m.spec_hash, "0123456789abcdef");
  EXPECT_EQ(m.features.decay, DecayKind::Scalar);
  EXPECT_EQ(m.features.precond, PrecondKind::Diagonal);
  EXPECT_EQ(m.features.precond_side, PrecondSide::Key);
  EXPECT_EQ(m.features.precond_source, PrecondSource::EmaSqSquash);
  EXPECT_EQ(m.features.solve, SolveKind::Delta);
  EXPECT_EQ(m.key_dims, (std::vector<int>{64, 128}));
  EXPECT_EQ(m.input_dtypes, (std::vector<DType>{DType::BF16, DType::F16}));
  EXPECT_TRUE(m.io.initial_precond_state);
  EXPECT_FALSE(m.io.final_precond_state);
  ASSERT_EQ(m.forward_roles.size(), 3u);
  EXPECT_EQ(m.forward_roles[1], "chunk_local");
  EXPECT_EQ(m.forward_symbols[2], "dgps_pgdn_fwd_state_output");
  EXPECT_TRUE(m.has_decode);
  EXPECT_EQ(m.decode_symbol, "dgps_pgdn_decode");
  EXPECT_EQ(m.layer.heads_qk, 0);
  EXPECT_EQ(m.layer.gva_ratio, 2);
  EXPECT_EQ(m.layer.scale, 0.125);
  EXPECT_TRUE(m.layer.precond_gate && m.layer.precond_gain && m.layer.precond_center);
  EXPECT_EQ(m.launch.let_names, (std::vector<std::string>{"KP", "slots"}));
  ASSERT_EQ(m.launch.forward.size(), 3u);
  EXPECT_EQ(m.launch.forward[2].smem.text(), "chunk * KP * 2 * stages");
  ASSERT_EQ(m.launch.workspace.size(), 1u);
  EXPECT_EQ(m.launch.workspace[0].name, "tok");
  EXPECT_EQ(m.launch.workspace_align, 256);
  EXPECT_EQ(m.tunables.warps, (std::vector<int>{4, 8}));
  EXPECT_EQ(m.default_config, (TileConfig{64, 64, 4, 1}));
  EXPECT_DOUBLE_EQ(m.flops_per_token_head, 2.5e5);
}

// Removes the manifest's launch.forward and launch.workspace (up to launch.decode).
std::string withoutForward(std::string t) {
  auto a = t.find("  forward:");
  t.erase(a, t.find("  decode:") - a);
  return t;
}

TEST(Manifest, DecodeOnlyPackageHasNoForward) {
  std::string t = withoutForward(kValid);
  Manifest m = parseManifest(t, "m.yaml");
  EXPECT_FALSE(m.has_forward);
  EXPECT_TRUE(m.has_decode);
}

TEST(Manifest, CorruptionsNameFileKeyAndExpectation) {
  expectError("", {"manifest", "expected a mapping"});
  expectError("- 1\n- 2\n", {"expected a mapping", "a list"});
  expectError("dgps_package: [1\n", {"malformed YAML"});
  expectError(replace(kValid, "dgps_package: 2", "dgps_package: 3"), {"dgps_package", "expected 2", "got 3", "newer"});
  expectError(replace(kValid, "codegen_version: 1\n", ""), {"codegen_version", "missing required key"});
  expectError(replace(kValid, "name: pgdn", "name: PGDN!"), {":3:", "name", "[a-z][a-z0-9_]*", "PGDN!"});
  expectError(replace(kValid, "\"0123456789abcdef\"", "\"0123\""), {"spec_hash", "16 lowercase hex digits", "0123"});
  expectError(replace(kValid, "source: kernels.cu", "source: ../../etc/passwd"), {"source", "no '/' or '..'"});
  expectError(replace(kValid, "decay: scalar", "decay: exponential"),
              {"features.decay", "none|scalar|diagonal", "'exponential'"});
  expectError(replace(kValid, "solve: delta}", "solve: delta, extra: 1}"), {"features.extra", "unknown key"});
  expectError(replace(kValid, "key: [64, 128]", "key: [64, 512]"), {"dims.key[1]", "[1, 256]", "512"});
  expectError(replace(kValid, "key: [64, 128]", "key: []"), {"dims.key", "non-empty list"});
  expectError(replace(kValid, "key: [64, 128]", "key: [64, 64]"), {"dims.key[1]", "duplicate"});
  expectError(replace(kValid, "key: [64, 128]", "key: [64, x]"), {"dims.key[1]", "expected an integer", "'x'"});
  expectError(replace(kValid, "inputs: [bf16, f16]", "inputs: [f32]"), {"dtypes.inputs[0]", "bf16|f16", "'f32'"});
  expectError(replace(kValid, "state: f32", "state: bf16"), {"dtypes.state", "f32", "'bf16'"});
  expectError(replace(kValid, "varlen: true", "varlen: yes"), {"io.varlen", "true or false", "'yes'"});
  expectError(replace(kValid, "precond: diagonal", "precond: none"), {"io", "precond state"});
  expectError(replace(kValid, "scale: 0.125", "scale: -1"), {"layer.scale", ">= 0", "'-1'"});
  expectError(replace(kValid, "scale: 0.125", "scale: 0"), {"layer.scale", "auto or a number > 0", "0"});
  expectError(replace(kValid, "gva_ratio: 2", "gva_ratio: 0"), {"layer.gva_ratio", "[1, 1024]", "0"});
  expectError(replace(kValid, "center: true}", "centre: true}"), {"layer.precond_inputs.centre", "unknown key"});
  expectError(replace(kValid, "role: chunk_local", "role: precond_scan"), {"launch.forward[1].role", "duplicate role"});
  expectError(replace(kValid, "symbol: dgps_pgdn_decode", "symbol: 9lives"), {"launch.decode.symbol", "C identifier"});
  expectError(replace(kValid, "symbol: dgps_pgdn_fwd_precond_scan", "symbol: a-b"),
              {"launch.forward[0].symbol", "C identifier"});
  expectError(replace(kValid, "grid: [\"N * H\", \"1\", \"1\"]", "grid: [\"N * H\", \"1\"]"),
              {"launch.forward[0].grid", "3 formulas"});
  expectError(replace(kValid, "smem: \"0\"", "smem: [0]"), {"launch.forward[0].smem", "expected a formula", "a list"});
  expectError(replace(kValid, "      - {name: tok", "      - {name: tok, extra: 1"), {"launch.workspace.buffers[0].extra", "unknown key"});
  expectError(replace(kValid, "align: 256", "align: 100"), {"launch.workspace.align", "power of two"});
  expectError(replace(kValid, "  workspace:\n    align: 256\n    buffers:\n      - {name: tok, bytes: \"slots * HV * (chunk + 1) * 32\"}\n", ""),
              {"launch.workspace", "missing required key"});
  expectError(replace(kValid, "{name: slots,", "{name: K,"), {"launch.let[1].name", "'K' is already a symbol"});
  expectError(replace(kValid, "default_config: {chunk: 64, block_v: 64", "default_config: {chunk: 64, block_v: 128"),
              {"default_config.block_v", "tunables.block_v [32, 64]", "128"});
  expectError(replace(kValid, "warps: [4, 8]", "warps: 4"), {"tunables.warps", "non-empty list"});
  expectError(replace(kValid, "bytes_per_token_head: 1536", "bytes_per_token_head: -1"),
              {"plan.bytes_per_token_head", ">= 0"});
  expectError(replace(kValid, "flops_per_token_head: 2.5e5", "flops_per_token_head: .nan"),
              {"plan.flops_per_token_head", "finite"});
  expectError(replace(kValid, "plan:", "bonus: 1\nplan:"), {"bonus", "unknown key"});
  expectError(replace(kValid, "name: pgdn\n", "name: pgdn\nname: pgdn\n"), {"name", "duplicate key"});
  expectError(replace(kValid, "features: {", "features: ["), {});
}

// A package written against another launch_rules.h would size shared memory and the workspace on the host
// differently from the kernels' offsets: refused at open, with both fingerprints and the fix.
TEST(Manifest, OtherDeviceLayoutSaysRegenerate) {
  std::string other = deviceLayoutHash();
  other[0] = other[0] == '0' ? '1' : '0';
  expectError(replace(kValid, deviceLayoutHash(), other),
              {"launch.device_layout", other, deviceLayoutHash(), "launch_rules.h", "regenerate"});
  expectError(replace(kValid, std::string("  device_layout: \"") + deviceLayoutHash() + "\"\n", ""),
              {"launch", "device_layout", "missing required key"});
  expectError(replace(kValid, std::string("\"") + deviceLayoutHash() + "\"", "[1]"), {"launch.device_layout"});
}

// launch.forward_segmented (the sequence-parallel state pass): kernels and buffers parse, its formulas may read L,
// and each corruption is one error naming the key.
TEST(Manifest, SegmentedForwardParsesAndCorruptionsNameTheKey) {
  const std::string seg =
      "  forward_segmented:\n    kernels:\n"
      "      - {role: chunk_local, symbol: dgps_pgdn_fwd_chunk_local, grid: [\"slots * HV\", \"1\", \"1\"], block: "
      "[\"warps * 32\", \"1\", \"1\"], smem: \"chunk * 4\"}\n"
      "      - {role: segment_fold, symbol: dgps_pgdn_fwd_segment_fold, grid: [\"N * HV\", \"1\", \"1\"], block: "
      "[\"256\", \"1\", \"1\"], smem: \"2 * K * 64 * 4\"}\n"
      "    buffers:\n      - {name: seg_start, bytes: \"N * cdiv(cdiv(T, chunk), L) * HV * K * V * 4\"}\n";
  const std::string text = replace(kValid, "  decode:", seg + "  decode:");
  const Manifest m = parseManifest(text, "pkg/manifest.yaml");
  ASSERT_EQ(m.launch.forward_segmented.size(), 2u);
  EXPECT_EQ(m.launch.forward_segmented[1].role, "segment_fold");
  EXPECT_EQ(m.launch.forward_segmented[1].symbol, "dgps_pgdn_fwd_segment_fold");
  ASSERT_EQ(m.launch.workspace_segmented.size(), 1u);
  EXPECT_EQ(m.launch.workspace_segmented[0].name, "seg_start");
  EXPECT_EQ(m.forward_roles.size(), 3u) << "the plain roles are launch.forward's";
  expectError(replace(text, "role: segment_fold", "role: chunk_local"),
              {"launch.forward_segmented.kernels[1].role", "duplicate role"});
  expectError(replace(text, "    buffers:\n      - {name: seg_start", "    buffer:\n      - {name: seg_start"),
              {"launch.forward_segmented.buffer", "unknown key"});
  expectError(replace(text, "cdiv(T, chunk), L)", "cdiv(T, chunk), M)"),
              {"launch.forward_segmented.buffers[0].bytes", "unknown name 'M'"});
  expectError(replace(text, "    kernels:\n", "    kernels: []\n    unused:\n"), {"launch.forward_segmented"});
  std::string noForward = text;  // launch.forward and launch.workspace removed, forward_segmented kept
  const auto a = noForward.find("  forward:");
  noForward.erase(a, noForward.find("  forward_segmented:") - a);
  expectError(noForward, {"launch.forward_segmented", "without launch.forward"});
}

TEST(Manifest, NoForwardAndNoDecodeIsAnError) {
  std::string t = withoutForward(kValid);
  auto a = t.find("  decode:");
  t.erase(a, t.find('\n', a) - a + 1);
  expectError(t, {"launch", "neither"});
}

// A package from an older dgpsc (dgps_package: 1: no launch section) is one error saying to regenerate it,
// not a list of unknown and missing keys.
TEST(Manifest, OldFormatSaysRegenerate) {
  std::string t = replace(kValid, "dgps_package: 2", "dgps_package: 1");
  t = replace(t, "launch:\n", "forward: {roles: [chunk_local], symbols: [x]}\nlaunch:\n");
  expectError(t, {"pkg/manifest.yaml:1:15: error: dgps_package: expected 2", "got 1", "older dgpsc",
                  "regenerate it with `dgpsc compile"});
}

// A formula that does not compile points at the character inside the quoted formula: line 19 is
// chunk_local's entry, and the error column is that of the second '*'.
TEST(Manifest, BadFormulaNamesLineColumnAndWhatWasExpected) {
  const std::string t = replace(kValid, "smem: \"chunk * 4\"", "smem: \"chunk * * 4\"");
  const std::size_t line_start = t.rfind('\n', t.find("chunk * * 4")) + 1;
  const std::size_t col = t.find("chunk * * 4") - line_start + 1 + 8;  // 1-based column of the second '*'
  expectError(t, {"pkg/manifest.yaml:19:" + std::to_string(col) + ": error: launch.forward[1].smem: bad formula",
                  "expected a number, a name or '('"});
  expectError(replace(kValid, "\"warps * 32\"", "\"wraps * 32\""),
              {"launch.forward[1].block[0]", "unknown name 'wraps'", "expected one of B, T, N"});
  expectError(replace(kValid, "\"align_up(K, 16)\"", "\"align_up(K, slots)\""),
              {"launch.let[0].value", "unknown name 'slots'"});  // a let sees only earlier lets: no cycles
  expectError(replace(kValid, "\"max(32, KP)\"", "\"pow(2, KP)\""), {"unknown function 'pow'", "cdiv, align_up"});
  expectError(replace(kValid, "\"max(32, KP)\"", "\"max(32)\""), {"max takes 2 arguments"});
  expectError(replace(kValid, "\"max(32, KP)\"", "\"99999999999999999999\""), {"does not fit in 64 bits"});
}

// Random truncation, byte flips and insertions: parse either succeeds or throws RuntimeError{Package};
// nothing else escapes and nothing crashes.
TEST(Manifest, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(12345);
  const std::string base = kValid;
  int errors = 0;
  for (int i = 0; i < 600; ++i) {
    std::string t = base;
    switch (i % 3) {
      case 0: t.resize(rng() % t.size()); break;
      case 1:
        for (int j = 0; j < 3; ++j) t[rng() % t.size()] = char(rng() % 256);
        break;
      case 2: t.insert(rng() % t.size(), std::string(1, "{}[]:,'\"\n-&*!|>#%@`"[rng() % 19])); break;
    }
    try {
      parseManifest(t, "fuzz.yaml");
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
      EXPECT_EQ(std::string(e.what()).rfind("fuzz.yaml", 0), 0u) << e.what();
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception type: " << e.what() << "\nfor:\n" << t;
    }
  }
  EXPECT_GT(errors, 300);  // most corruptions must be caught
}

TEST(TileConfigText, ParsesOverridesAndRejectsJunk) {
  TileConfig base{64, 64, 4, 1};
  EXPECT_EQ(parseTileConfig("block_v=32, warps=8", base), (TileConfig{64, 32, 8, 1}));
  EXPECT_EQ(parseTileConfig("", base), base);
  EXPECT_EQ(toString(TileConfig{64, 32, 8, 2}), "chunk=64,block_v=32,warps=8,stages=2");
  EXPECT_THROW(parseTileConfig("tile=3", base), RuntimeError);
  EXPECT_THROW(parseTileConfig("chunk=", base), RuntimeError);
  EXPECT_THROW(parseTileConfig("chunk=-4", base), RuntimeError);
}

// The one text form reads back to the same configuration, whatever the base it is parsed over (the base is
// a different configuration, so a key the text failed to set would show).
TEST(TileConfigText, RoundTripsEveryConfiguration) {
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> v(1, 1024);
  for (int i = 0; i < 200; ++i) {
    const TileConfig c{v(rng), v(rng), v(rng), v(rng)};
    const TileConfig base{c.chunk % 1024 + 1, c.block_v % 1024 + 1, c.warps % 1024 + 1, c.stages % 1024 + 1};
    const std::string text = toString(c);
    EXPECT_EQ(parseTileConfig(text, base), c) << text;
  }
}

// One TileConfig: the runtime's, the tuner's and the device headers' are the same type, and its defaults are
// the kernels' own (config.cuh's DGPS_CHUNK, DGPS_BLOCK_V, DGPS_WARPS, DGPS_STAGES, read from the file).
TEST(TileConfigText, OneTypeWhoseDefaultsAreConfigCuh) {
  static_assert(std::is_same_v<dgps::TileConfig, dgps::launch::TileConfig>);
  static_assert(std::is_same_v<dgps::TileConfig, dgps::tuning::TileConfig>);
  std::ifstream in(std::string(DGPS_SOURCE_DIR) + "/runtime/device/dgps/device/config.cuh");
  ASSERT_TRUE(in) << "cannot read config.cuh";
  std::map<std::string, int> defines;
  std::string line;
  std::smatch m;
  const std::regex define(R"(^#define (DGPS_[A-Z_]+) ([0-9]+)\s*$)");
  while (std::getline(in, line))
    if (std::regex_match(line, m, define)) defines[m[1]] = std::stoi(m[2]);
  const TileConfig d;
  ASSERT_EQ(defines.count("DGPS_STAGES"), 1u);
  EXPECT_EQ(d.chunk, defines["DGPS_CHUNK"]);
  EXPECT_EQ(d.block_v, defines["DGPS_BLOCK_V"]);
  EXPECT_EQ(d.warps, defines["DGPS_WARPS"]);
  EXPECT_EQ(d.stages, defines["DGPS_STAGES"]);
}

}  // namespace
}  // namespace dgps
