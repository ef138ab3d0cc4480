#include "TestUtil.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dgps::tuning::test {

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dgps-tuner-XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

DeviceFingerprint h200() {
  DeviceFingerprint fp;
  fp.name = "NVIDIA H200";
  fp.compute_capability = "9.0a";
  fp.sm_count = 132;
  fp.driver_version = "13.0";
  fp.nvrtc_version = "13.0";
  fp.codegen_version = "dgps-0.1.0";
  fp.smem_per_block_optin = 232448;
  fp.smem_per_sm = 233472;
  fp.regs_per_sm = 65536;
  fp.max_threads_per_block = 1024;
  fp.l2_bytes = 60 * 1024 * 1024;
  return fp;
}

ProblemKey sampleKey() {
  ProblemKey k;
  k.spec_hash = "9b1c0e77aa";
  k.K = 128;
  k.V = 128;
  k.H = 16;
  k.HV = 32;
  k.t_bucket = TBucket::Le4096;
  k.waves = WaveBucket::Lt2;
  k.dtype = InputDType::BF16;
  k.varlen = false;
  k.kind = KernelFamily::Forward;
  k.precision = "ieee";
  return k;
}

TuningRecord sampleRecord(const TileConfig& config, double median_ms, const std::string& date) {
  TuningRecord r;
  r.fingerprint = h200();
  r.key = sampleKey();
  r.config = config;
  r.median_ms = median_ms;
  r.p20_ms = median_ms * 0.99;
  r.p80_ms = median_ms * 1.02;
  r.candidates_tried = 12;
  r.date = date;
  r.host = "test-host";
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::mt19937_64 freshRng(unsigned long long* seedOut) {
  std::random_device rd;
  const unsigned long long seed = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  if (seedOut) *seedOut = seed;
  return std::mt19937_64(seed);
}

}  // namespace dgps::tuning::test
