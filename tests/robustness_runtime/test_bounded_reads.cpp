// Item: unbounded reads. A manifest, spec.yaml, kernels.cu, tuning database or cache entry that is
// /dev/zero, a FIFO or a huge file was read until memory ran out (std::bad_alloc escaped) or blocked
// forever. Each is now one error (or a cache miss with a warning), in bounded time and memory.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "RobustUtil.h"
#include "dgps/dsl/FileRead.h"
#include "dgps/runtime/BinaryCache.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps {
namespace {

using robust::TempDir;
using Clock = std::chrono::steady_clock;

enum class Hostile { DevZero, Fifo, Huge };
const char* name(Hostile h) { return h == Hostile::DevZero ? "/dev/zero" : h == Hostile::Fifo ? "FIFO" : "huge file"; }

// Replaces `path` with the hostile kind of file; `huge` is the size of the huge file.
void plant(const std::string& path, Hostile h, long long huge) {
  ::unlink(path.c_str());
  switch (h) {
    case Hostile::DevZero: ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0); break;
    case Hostile::Fifo: ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0); break;
    case Hostile::Huge: robust::writeSparseFile(path, huge); break;
  }
}

const Hostile kAll[] = {Hostile::DevZero, Hostile::Fifo, Hostile::Huge};

TEST(BoundedReads, PackageFiles) {
  struct File {
    const char* name;
    long long huge;
    const char* role;
  } files[] = {{"manifest.yaml", (4ll << 20) + 1, "manifest"},
               {"spec.yaml", (4ll << 20) + 1, "spec"},
               {"kernels.cu", (16ll << 20) + 1, "kernel source"}};
  for (const auto& f : files) {
    for (Hostile h : kAll) {
      TempDir tmp;
      const std::string dir = robust::copyPackage("pgdn", tmp / "pgdn");
      plant(dir + "/" + f.name, h, f.huge);
      const auto t0 = Clock::now();
      try {
        (void)Package::open(dir).spec();  // spec.yaml is read on spec(), not at open
        ADD_FAILURE() << f.name << " as " << name(h) << " was accepted";
      } catch (const RuntimeError& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
        EXPECT_NE(msg.find(f.name), std::string::npos) << msg;
        EXPECT_NE(msg.find(f.role), std::string::npos) << msg;
        EXPECT_NE(msg.find(h == Hostile::Huge ? "the limit" : "not a regular file"), std::string::npos) << msg;
      }
      EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5)) << f.name << " as " << name(h);
    }
  }
}

TEST(BoundedReads, TuningDatabase) {
  for (Hostile h : kAll) {
    TempDir tmp;
    const std::string path = tmp / "tuning.jsonl";
    plant(path, h, (64ll << 20) + 1);
    tuning::TuningDb db(path);
    tuning::Status s;
    ASSERT_NO_THROW(s = db.load()) << name(h);
    EXPECT_FALSE(s) << name(h);
    EXPECT_NE(s.message.find(path), std::string::npos) << s.message;
    EXPECT_TRUE(db.records().empty());
  }
}

TEST(BoundedReads, TuningDatabaseWithMillionsOfBadLinesKeepsFewWarnings) {
  TempDir tmp;
  const std::string path = tmp / "tuning.jsonl";
  std::string text(2 << 20, '\n');
  for (std::size_t i = 0; i < text.size(); i += 2) text[i] = 'x';
  text += tuning::toJsonLine(robust::sampleRecord()) + "\n";
  robust::writeFile(path, text);
  tuning::TuningDb db(path);
  ASSERT_TRUE(db.load());
  EXPECT_EQ(db.records().size(), 1u);
  EXPECT_LE(db.warnings().size(), 21u);
  EXPECT_NE(db.warnings().back().message.find("more invalid line"), std::string::npos);
}

TEST(BoundedReads, CacheEntry) {
  const std::string key(64, 'a');
  for (Hostile h : kAll) {
    TempDir tmp;
    BinaryCache cache(tmp / "cache");
    ASSERT_TRUE(cache.store(key, CachedImage{"image bytes", false, "log"}));
    plant(cache.entryPath(key), h, (256ll << 20) + 1);
    robust::WarningCapture warnings;
    std::optional<CachedImage> got;
    ASSERT_NO_THROW(got = cache.load(key)) << name(h);
    EXPECT_FALSE(got.has_value()) << name(h);
    EXPECT_FALSE(warnings.messages().empty()) << name(h);
  }
}

TEST(BoundedReads, ToolsPrintOneErrorAndExitNonZero) {
  TempDir tmp;
  const std::string dir = robust::copyPackage("gdn", tmp / "gdn");
  plant(dir + "/manifest.yaml", Hostile::Fifo, 0);
  const std::string db = tmp / "db.jsonl";
  plant(db, Hostile::DevZero, 0);
  const std::string cmds[] = {
      std::string(DGPS_RUN_EXE) + " " + dir + " --inputs x --out y",
      std::string(DGPS_TUNE_EXE) + " " + dir + " --shape B=1,T=64,H=1,K=64,V=64",
      std::string(DGPS_JIT_CHECK_EXE) + " " + dir,
      "env DGPS_TUNING_DB=" + db + " " + DGPS_TUNE_EXE + " " + robust::generatedPackage("gdn") +
          " --shape B=1,T=64,H=1,K=64,V=64",
  };
  for (const auto& cmd : cmds) {
    std::string out;
    const int rc = robust::runCommand(cmd, &out, 30);
    EXPECT_NE(rc, 0) << cmd << "\n" << out;
    EXPECT_LT(rc, 124) << "hung or crashed: " << cmd << "\n" << out;
    EXPECT_EQ(out.find("terminate called"), std::string::npos) << out;
    EXPECT_EQ(out.find("bad_alloc"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace dgps
