// deviceFeatures (dgps/dsl/DeviceFeatures.h): the one Spec -> DeviceFeatures.h FeatureSet mapping, checked against
// the codes the launch contract documents (DeviceFeatures.h FeatureSet) for every axis value,
// and on every shipped spec against the forward roles its committed manifest lists.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

TEST(DeviceFeatures, EveryAxisValueHasItsDocumentedCode) {
  Spec s;
  s.solve.kind = SolveKind::Linear;
  for (auto [kind, code] : {std::pair{DecayKind::None, 0}, {DecayKind::Scalar, 1}, {DecayKind::Diagonal, 2}}) {
    s.decay.kind = kind;
    EXPECT_EQ(deviceFeatures(s).decay, code);
  }
  for (auto [kind, code] : {std::pair{GainKind::None, 0}, {GainKind::Scalar, 1}}) {
    s.gain.kind = kind;
    EXPECT_EQ(deviceFeatures(s).gain, code);
  }
  for (auto [kind, code] : {std::pair{PrecondKind::None, 0}, {PrecondKind::Diagonal, 1}}) {
    s.precond.kind = kind;
    EXPECT_EQ(deviceFeatures(s).precond, code);
  }
  for (auto [side, code] : {std::pair{PrecondSide::Key, 0}, {PrecondSide::Query, 1}}) {
    s.precond.side = side;
    EXPECT_EQ(deviceFeatures(s).side, code);
  }
  for (auto [src, code] : {std::pair{PrecondSource::EmaSqSquash, 0}, {PrecondSource::HypergradOgd, 1}}) {
    s.precond.source = src;
    EXPECT_EQ(deviceFeatures(s).source, code);
  }
  for (auto [kind, code] : {std::pair{SolveKind::Linear, 0}, {SolveKind::Delta, 1}}) {
    s.solve.kind = kind;
    EXPECT_EQ(deviceFeatures(s).solve, code);
  }
}

// A clamp (either bound) of the hypergrad_ogd d update keeps its per-token scan; the squash has no clamp.
TEST(DeviceFeatures, AHypergradClampIsItsOwnFeature) {
  Spec s;
  s.precond.kind = PrecondKind::Diagonal;
  s.precond.source = PrecondSource::HypergradOgd;
  EXPECT_EQ(deviceFeatures(s).clamp, 0);
  EXPECT_TRUE(launch::hypergradChunked(deviceFeatures(s)));
  s.precond.hypergrad.clamp_min = 0.5;
  EXPECT_EQ(deviceFeatures(s).clamp, 1);
  s.precond.hypergrad.clamp_min.reset();
  s.precond.hypergrad.clamp_max = 2.0;
  EXPECT_EQ(deviceFeatures(s).clamp, 1);
  EXPECT_FALSE(launch::hypergradChunked(deviceFeatures(s)));
  s.precond.source = PrecondSource::EmaSqSquash;  // hypergrad fields are not read for the squash
  EXPECT_EQ(deviceFeatures(s).clamp, 0);
  EXPECT_FALSE(launch::hypergradChunked(deviceFeatures(s)));
}

// The roles the launch contract (LaunchContract.h forwardRoles) derives from deviceFeatures(spec) are the roles the committed package lists
// (written by the compiler's plan, checked against the same rules only at emit time).
// kernelsRefusal: valid specs the tile kernels cannot run, each one error at solve.steps; others compile.
TEST(DeviceFeatures, KernelsRefuseWhatNoTileKernelRuns) {
  const std::string head = "name: t\ngain: {kind: scalar, range: [0, 1]}\nprecond: none\n";
  struct Case {
    const char* label;
    std::string text;
    const char* refusal;  // substring of the message, or null: compiles
  };
  const Case cases[] = {
      {"gdp", head + "decay: scalar\nsolve: {kind: delta, steps: 2}\n", nullptr},
      {"three steps with decode", head + "decay: none\nsolve: {kind: delta, steps: 3}\n", nullptr},
      {"four steps, forward only", head + "decay: scalar\nsolve: {kind: delta, steps: 4}\nkernels: [chunk_forward]\n",
       nullptr},
      {"kda", head + "decay: diagonal\nsolve: delta\n", nullptr},
      {"four steps, default kernels", head + "decay: scalar\nsolve: {kind: delta, steps: 4}\n",
       "solve.steps 4 with the decode kernel"},
      {"four steps, decode listed", head + "decay: none\nsolve: {kind: delta, steps: 4}\nkernels: [decode]\n",
       "solve.steps 4 with the decode kernel"},
      {"diagonal decay, two steps", head + "decay: diagonal\nsolve: {kind: delta, steps: 2}\nkernels: [chunk_forward]\n",
       "solve.steps 2 with decay.kind diagonal"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const ParseResult r = parseSpecString(c.text, "t.yaml");
    ASSERT_TRUE(r.ok()) << (r.diagnostics.empty() ? "" : formatDiagnostic(r.diagnostics[0]));
    const std::optional<Diagnostic> d = kernelsRefusal(*r.spec);
    if (c.refusal == nullptr) {
      EXPECT_FALSE(d.has_value()) << formatDiagnostic(*d);
      continue;
    }
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->severity, Severity::Error);
    EXPECT_EQ(d->path, "solve.steps");
    EXPECT_EQ(d->file, "t.yaml");
    EXPECT_EQ(d->line, 5);  // the solve line of the text above
    EXPECT_NE(d->message.find(c.refusal), std::string::npos) << d->message;
    EXPECT_FALSE(d->expected.empty());
  }
}

TEST(DeviceFeatures, ShippedSpecsGiveTheirPackagesRoles) {
  namespace fs = std::filesystem;
  int checked = 0;
  for (const auto& e : fs::directory_iterator(DGPS_SPECS_DIR)) {
    if (e.path().extension() != ".yaml") continue;
    const fs::path manifest = fs::path(DGPS_GENERATED_DIR) / e.path().stem() / "manifest.yaml";
    if (!fs::exists(manifest)) continue;
    std::ifstream in(manifest);
    // The manifest's launch.forward entries, one line each: "    - {role: <name>, symbol: ...".
    std::string line, rolesLine;
    const std::string entry = "    - {role: ";
    while (std::getline(in, line))
      if (line.rfind(entry, 0) == 0) {
        const std::string role = line.substr(entry.size(), line.find(',') - entry.size());
        rolesLine += (rolesLine.empty() ? "forward: {roles: [" : ", ") + role;
      }
    if (!rolesLine.empty()) rolesLine += "]";
    if (rolesLine.empty()) continue;  // decode-only package
    const ParseResult parsed = parseSpecFile(e.path().string());
    ASSERT_TRUE(parsed.ok()) << e.path();
    int roles[launch::kMaxRoles];
    const int n = launch::forwardRoles(deviceFeatures(*parsed.spec), roles);
    std::string want = "forward: {roles: [";
    for (int i = 0; i < n; ++i) want += std::string(i ? ", " : "") + launch::roleName(roles[i]);
    want += "]";
    EXPECT_EQ(rolesLine.rfind(want, 0), 0u) << e.path() << "\n  manifest: " << rolesLine << "\n  expected: " << want;
    ++checked;
  }
  EXPECT_GE(checked, 5) << "too few shipped packages found under " << DGPS_GENERATED_DIR;
}

}  // namespace
}  // namespace dgps
