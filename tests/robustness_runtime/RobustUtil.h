// Helpers for the runtime robustness tests: private scratch folders, file writing, copies of the
// shipped packages, running a tool with a time limit, collecting warnings, and a valid tuning record
// written by the project's own writer.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dgps/runtime/Log.h"
#include "dgps/runtime/tuning/TuningRecord.h"

namespace dgps {
namespace robust {

/// A fresh folder (mode 0700) under $TMPDIR or /tmp, removed with its contents by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void writeFile(const std::string& path, const std::string& contents);
std::string readFile(const std::string& path);
/// A file of `bytes` bytes that takes no disk space (a hole).
void writeSparseFile(const std::string& path, long long bytes);

/// The source tree's generated/<name> folder.
std::string generatedPackage(const std::string& name);
/// Copies generated/<name>/{manifest.yaml, spec.yaml, kernels.cu} into `dir` (created). Returns dir.
std::string copyPackage(const std::string& name, const std::string& dir);

/// Runs `command` through /bin/sh with stdout and stderr captured, killed after `timeout_s` seconds.
/// Returns the exit status (124 on timeout, as coreutils' timeout reports it).
int runCommand(const std::string& command, std::string* output, int timeout_s = 50);

/// A record as the tuner writes it (fingerprint of an H200, a forward key, today's date).
tuning::TuningRecord sampleRecord();

/// Collects warn() messages while alive.
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  std::vector<std::string> messages() const;
  bool contains(const std::string& needle) const;

 private:
  struct Sink {
    std::mutex mu;
    std::vector<std::string> messages;
  };
  std::shared_ptr<Sink> sink_;
  WarningHandler previous_;
};

}  // namespace robust
}  // namespace dgps
