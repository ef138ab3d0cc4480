// Package::open: manifest + spec + source are loaded and cross-checked; each inconsistency is one
// RuntimeError{Package} naming the file and the disagreeing key.
#include <gtest/gtest.h>
#include <unistd.h>

#include "RuntimeTestUtil.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace {

using test::TempDir;

std::string openError(const std::string& dir) {
  try {
    (void)Package::open(dir).spec();  // open reads manifest and source; spec() reads spec.yaml
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
    return e.what();
  }
  ADD_FAILURE() << "package opened: " << dir;
  return "";
}

void edit(const std::string& path, const std::string& from, const std::string& to) {
  std::string s = test::readFile(path);
  auto i = s.find(from);
  ASSERT_NE(i, std::string::npos) << from;
  s.replace(i, from.size(), to);
  test::writeFile(path, s);
}

TEST(Package, OpensTheTinyFixture) {
  TempDir tmp;
  std::string dir = test::writeTinyPackage(tmp / "tiny");
  Package p = Package::open(dir + "/");
  EXPECT_EQ(p.name(), "tiny");
  EXPECT_EQ(p.directory(), dir);
  EXPECT_EQ(p.spec().decay.kind, DecayKind::Scalar);
  EXPECT_EQ(p.manifest().forward_symbols,
            (std::vector<std::string>{"dgps_tiny_fwd_chunk_local", "dgps_tiny_fwd_state_output"}));
  EXPECT_NE(p.source().find("dgps_tiny_decode"), std::string::npos);
  EXPECT_EQ(p.sourcePath(), dir + "/kernels.cu");
  EXPECT_NO_THROW(p.checkConfig(TileConfig{64, 32, 4, 1}));
}

TEST(Package, ConfigOutsideTunablesIsRejected) {
  TempDir tmp;
  Package p = Package::open(test::writeTinyPackage(tmp / "tiny"));
  try {
    p.checkConfig(TileConfig{64, 128, 4, 1});
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("block_v=128 is not in the package's tunables.block_v [32, 64]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Package, MissingFilesAreNamed) {
  TempDir tmp;
  EXPECT_NE(openError(tmp / "nothing").find("nothing/manifest.yaml: cannot read"), std::string::npos);
  std::string dir = test::writeTinyPackage(tmp / "a");
  std::remove((dir + "/kernels.cu").c_str());
  EXPECT_NE(openError(dir).find("kernels.cu: cannot read the kernel source"), std::string::npos);
  dir = test::writeTinyPackage(tmp / "b");
  std::remove((dir + "/spec.yaml").c_str());
  EXPECT_NE(openError(dir).find("spec.yaml"), std::string::npos);
}

TEST(Package, SpecHashMismatchMeansTheSpecWasEdited) {
  TempDir tmp;
  std::string dir = test::writeTinyPackage(tmp / "tiny");
  edit(dir + "/spec.yaml", "eps: 1e-6", "eps: 1e-5");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("spec_hash"), std::string::npos) << msg;
  EXPECT_NE(msg.find("regenerate"), std::string::npos) << msg;
}

TEST(Package, ManifestStepsMustMatchTheSpec) {
  // features.steps (Householder steps per token) decides how many rows of k, v, beta the runtime accepts per
  // token: a manifest whose steps disagree with its spec's solve.steps is refused, naming both.
  TempDir tmp;
  std::string dir = test::writeTinyPackage(tmp / "tiny");
  edit(dir + "/manifest.yaml", "solve: delta}", "solve: delta, steps: 2}");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("manifest.yaml: error: features.steps: is 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("solve.steps 1"), std::string::npos) << msg;
}

TEST(Package, ManifestStepsOutOfRangeAreRefused) {
  TempDir tmp;
  std::string dir = test::writeTinyPackage(tmp / "tiny");
  edit(dir + "/manifest.yaml", "solve: delta}", "solve: delta, steps: 9}");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("features.steps"), std::string::npos) << msg;
}

TEST(Package, ManifestThatDisagreesWithTheSpecIsRejected) {
  struct Case {
    const char* from;
    const char* to;
    const char* key;
  } cases[] = {
      {"dims: {key: [64]", "dims: {key: [64, 128]", "dims.key"},
      {"decay: scalar", "decay: diagonal", "features.decay"},
      {"varlen: true", "varlen: false", "io.varlen"},
      {"inputs: [bf16, f16]", "inputs: [bf16]", "dtypes.inputs"},
      {"block_v: [32, 64]", "block_v: [64]", "tunables.block_v"},
      {"  decode: {symbol: dgps_tiny_decode", nullptr, "decode"},  // nullptr: the whole line goes
  };
  for (const auto& c : cases) {
    TempDir tmp;
    std::string dir = test::writeTinyPackage(tmp / "tiny");
    if (c.to) {
      edit(dir + "/manifest.yaml", c.from, c.to);
    } else {
      std::string text = test::readFile(dir + "/manifest.yaml");
      const std::size_t a = text.find(c.from);
      ASSERT_NE(a, std::string::npos) << c.from;
      text.erase(a, text.find('\n', a) - a + 1);
      test::writeFile(dir + "/manifest.yaml", text);
    }
    std::string msg = openError(dir);
    const std::string where = "/manifest.yaml: error: " + std::string(c.key) + ": is ";
    EXPECT_NE(msg.find(where), std::string::npos) << c.key << ": " << msg;
  }
}

// Open reads the manifest and the kernel source only: the runtime's layer (what validation reads) comes
// from the manifest, and spec.yaml is read on the first spec() call, with its errors then.
TEST(Package, OpenDoesNotReadTheSpec) {
  TempDir tmp;
  std::string dir = test::writeTinyPackage(tmp / "tiny");
  const Spec full = Package::open(dir).spec();
  ASSERT_EQ(::unlink((dir + "/spec.yaml").c_str()), 0);
  const Package pkg = Package::open(dir);
  const Spec& l = pkg.layer();
  EXPECT_EQ(l.name, full.name);
  EXPECT_EQ(l.decay.kind, full.decay.kind);
  EXPECT_EQ(l.gain.kind, full.gain.kind);
  EXPECT_EQ(l.heads_qk, full.heads_qk);
  EXPECT_EQ(l.gva_ratio, full.gva_ratio);
  EXPECT_EQ(l.scale, full.scale);
  EXPECT_EQ(l.key_dims, full.key_dims);
  EXPECT_EQ(l.value_dims, full.value_dims);
  EXPECT_EQ(l.input_dtypes, full.input_dtypes);
  EXPECT_EQ(l.kernels, full.kernels);
  EXPECT_EQ(l.varlen, full.varlen);
  EXPECT_EQ(specTakesPrecondGate(l), specTakesPrecondGate(full));
  EXPECT_EQ(specTakesPrecondGain(l), specTakesPrecondGain(full));
  EXPECT_EQ(specTakesPrecondCenter(l), specTakesPrecondCenter(full));
  try {
    (void)pkg.spec();
    ADD_FAILURE() << "spec() without spec.yaml";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("spec.yaml: cannot read the package's spec"), std::string::npos) << e.what();
  }
}

TEST(Package, SymbolsMustOccurInTheSource) {
  TempDir tmp;
  std::string src = test::tinyKernelsCu();
  auto i = src.find("dgps_tiny_decode");
  src.replace(i, 16, "dgps_tiny_step");  // the kernel's only occurrence
  std::string dir = test::writeTinyPackage(tmp / "tiny", src);
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("manifest.yaml: error: launch.decode.symbol: dgps_tiny_decode does not occur"), std::string::npos)
      << msg;
}

TEST(Package, UnparsableSpecShowsItsDiagnostics) {
  TempDir tmp;
  std::string dir = test::writeTinyPackage(tmp / "tiny");
  edit(dir + "/spec.yaml", "kind: delta", "kind: newton");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("does not parse"), std::string::npos) << msg;
  EXPECT_NE(msg.find("solve.kind"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dgps
