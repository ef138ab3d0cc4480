#include "TuneTestUtil.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace dgps {
namespace tunetest {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/dgps-tune-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + templ);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeScript(const std::string& path, const std::string& body) {
  writeFile(path, "#!/bin/sh\n" + body + "\n");
  ::chmod(path.c_str(), 0755);
}

std::string shippedPackage(const std::string& name) {
  const std::string dir = std::string(DGPS_SOURCE_DIR) + "/generated/" + name;
  struct stat st;
  return ::stat((dir + "/manifest.yaml").c_str(), &st) == 0 ? dir : std::string();
}

void copyPackage(const std::string& from, const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(from)) {
    if (e.is_regular_file()) std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string());
  }
}

WarningCapture::WarningCapture() : messages_(std::make_shared<std::vector<std::string>>()) {
  auto sink = messages_;
  previous_ = setWarningHandler([sink](const std::string& m) { sink->push_back(m); });
}

WarningCapture::~WarningCapture() { setWarningHandler(previous_); }

bool WarningCapture::contains(const std::string& needle) const {
  for (const std::string& m : *messages_)
    if (m.find(needle) != std::string::npos) return true;
  return false;
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) {
    had_ = true;
    old_ = old;
  }
  if (value) ::setenv(name, value, 1);
  else ::unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
  else ::unsetenv(name_.c_str());
}

}  // namespace tunetest
}  // namespace dgps
