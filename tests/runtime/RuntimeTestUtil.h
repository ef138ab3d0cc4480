// Helpers for the runtime's CPU tests: temporary folders, a tiny generated package written on the fly
// (spec, manifest with the real spec hash, a small kernels.cu that uses the embedded abi.h), fake
// device pointers for validation tests, and a warning collector.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dgps/dsl/Spec.h"
#include "dgps/runtime/Log.h"

namespace dgps {
namespace test {

/// A fresh folder under $TMPDIR (or the build's test dir), removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void writeFile(const std::string& path, const std::string& contents);
std::string readFile(const std::string& path);
bool fileExists(const std::string& path);

/// A GDN-like spec named "tiny": scalar decay, scalar gain, delta rule, K = V = 64, bf16/f16.
std::string tinySpecYaml();

/// The manifest text for `spec` (parsed from spec_yaml) in the contract's format, with the real hash.
std::string manifestFor(const Spec& spec);

/// kernels.cu for the tiny package: extern "C" kernels dgps_tiny_fwd_chunk_local and dgps_tiny_decode
/// taking dgps::ForwardArgs / DecodeArgs, using DGPS_K, DGPS_V, DGPS_INPUT_BF16/F16 and the tile macros.
std::string tinyKernelsCu();

/// Writes spec.yaml, manifest.yaml and kernels.cu into `dir` (created). Returns dir.
std::string writeTinyPackage(const std::string& dir, const std::string& kernels_cu = tinyKernelsCu());

/// Copies the package folder `from` (kernels.cu, spec.yaml, manifest.yaml) to `dir` (created) with the manifest's
/// launch.forward_segmented block removed: a package with a chunk forward but no segmented kernels (every shipped
/// package with a chunk forward has them; an older or hand-made one may not). Returns dir.
std::string writePackageWithoutSegmentKernels(const std::string& from, const std::string& dir);

/// Parses spec text or fails the test with the diagnostics.
Spec parseSpecOrDie(const std::string& yaml);

/// Collects warn() messages while alive.
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  std::vector<std::string> messages() const;
  bool contains(const std::string& needle) const;

  struct Sink;

 private:
  std::shared_ptr<Sink> sink_;
  WarningHandler previous_;
};

/// A distinct fake device address, 256-byte aligned (validation never dereferences it).
void* fakePtr(int index);

}  // namespace test
}  // namespace dgps
