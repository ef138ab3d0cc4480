#include "RobustUtil.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dgps {
namespace robust {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dgps-robust-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  // Tests make folders read-only or give them away; take them back before removing.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
  std::filesystem::remove_all(path_, ec);
}

void writeFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeSparseFile(const std::string& path, long long bytes) {
  writeFile(path, "");
  if (::truncate(path.c_str(), bytes) != 0) throw std::runtime_error("cannot size " + path);
}

std::string generatedPackage(const std::string& name) { return std::string(DGPS_SOURCE_DIR) + "/generated/" + name; }

std::string copyPackage(const std::string& name, const std::string& dir) {
  ::mkdir(dir.c_str(), 0700);
  for (const char* f : {"manifest.yaml", "spec.yaml", "kernels.cu"}) {
    writeFile(dir + "/" + f, readFile(generatedPackage(name) + "/" + f));
  }
  return dir;
}

int runCommand(const std::string& command, std::string* output, int timeout_s) {
  const std::string full = "timeout -s KILL " + std::to_string(timeout_s) + " " + command + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed for " + command);
  std::array<char, 4096> buf{};
  std::string out;
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  const int status = ::pclose(p);
  if (output) *output = out;
  if (WIFEXITED(status)) {
    const int rc = WEXITSTATUS(status);
    return rc == 137 ? 124 : rc;  // timeout -s KILL: 128 + 9
  }
  return -1;
}

tuning::TuningRecord sampleRecord() {
  tuning::TuningRecord r;
  r.fingerprint.name = "NVIDIA H200";
  r.fingerprint.compute_capability = "9.0a";
  r.fingerprint.sm_count = 132;
  r.fingerprint.driver_version = "13.0";
  r.fingerprint.nvrtc_version = "13.0";
  r.fingerprint.codegen_version = "dgps-0.1.0";
  r.fingerprint.smem_per_block_optin = 232448;
  r.key.spec_hash = "d946a7dd78dbf6d9";
  r.key.K = 128;
  r.key.V = 128;
  r.key.H = 16;
  r.key.HV = 16;
  r.key.t_bucket = tuning::TBucket::Le4096;
  r.key.waves = tuning::WaveBucket::Lt2;
  r.config = tuning::TileConfig{64, 64, 4, 2};
  r.median_ms = 0.5;
  r.p20_ms = 0.49;
  r.p80_ms = 0.52;
  r.candidates_tried = 8;
  r.date = tuning::utcNow();
  r.host = "robustness-test";
  return r;
}

WarningCapture::WarningCapture() : sink_(std::make_shared<Sink>()) {
  auto sink = sink_;
  previous_ = setWarningHandler([sink](const std::string& m) {
    std::lock_guard<std::mutex> lock(sink->mu);
    sink->messages.push_back(m);
  });
}

WarningCapture::~WarningCapture() { setWarningHandler(previous_); }

std::vector<std::string> WarningCapture::messages() const {
  std::lock_guard<std::mutex> lock(sink_->mu);
  return sink_->messages;
}

bool WarningCapture::contains(const std::string& needle) const {
  for (const auto& m : messages())
    if (m.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace robust
}  // namespace dgps
