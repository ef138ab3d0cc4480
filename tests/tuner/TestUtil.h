// Shared helpers for the tuner tests: scratch directories, a sample device and key, file I/O.
#pragma once

#include <random>
#include <string>

#include "dgps/runtime/tuning/TuningRecord.h"

namespace dgps::tuning::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

DeviceFingerprint h200();
ProblemKey sampleKey();
/// A valid record for (h200(), sampleKey()) with the given config, time and date.
TuningRecord sampleRecord(const TileConfig& config, double median_ms, const std::string& date);

std::string readFile(const std::string& path);
void writeFile(const std::string& path, const std::string& text);

/// A seeded engine whose seed is fresh each run and printed on failure via SCOPED_TRACE by callers.
std::mt19937_64 freshRng(unsigned long long* seedOut);

}  // namespace dgps::tuning::test
