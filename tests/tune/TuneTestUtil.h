// Helpers for the dgps_tune CPU tests: temporary folders, files, the shipped package under test, and a
// collector for dgps::warn() messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dgps/runtime/Log.h"

namespace dgps {
namespace tunetest {

/// A fresh folder under $TMPDIR (or /tmp), removed with its contents by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void writeFile(const std::string& path, const std::string& text);
std::string readFile(const std::string& path);
/// Writes an executable /bin/sh script.
void writeScript(const std::string& path, const std::string& body);

/// generated/<name> in the source tree ("" when it is absent).
std::string shippedPackage(const std::string& name);

/// Copies a package folder (every regular file) to `dir`.
void copyPackage(const std::string& from, const std::string& dir);

/// Collects warn() messages while alive (restores the previous handler).
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  const std::vector<std::string>& messages() const { return *messages_; }
  bool contains(const std::string& needle) const;

 private:
  std::shared_ptr<std::vector<std::string>> messages_;
  WarningHandler previous_;
};

/// Sets an environment variable for the object's lifetime (restores the old value).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);  ///< value nullptr unsets
  ~ScopedEnv();

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace tunetest
}  // namespace dgps
