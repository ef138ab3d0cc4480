// Several writers appending to one tuning database at once: threads (separate open file
// descriptions in one process) and fork()ed processes. Every record must come back intact, once.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "TestUtil.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps::tuning {
namespace {

/// A record whose host and timing identify (writer, index); padded so each line is ~1.5 KB, long
/// enough that interleaved unlocked writes would visibly tear.
TuningRecord tagged(int writer, int index) {
  TuningRecord r = test::sampleRecord({64, 64, 4, 2}, 0.001 * (index + 1), utcNow());
  r.host = "writer-" + std::to_string(writer) + "-record-" + std::to_string(index) + "-" +
           std::string(1200, 'x');
  r.candidates_tried = writer * 1000 + index;
  return r;
}

void expectAllPresent(const std::string& path, int writers, int perWriter) {
  TuningDb db(path);
  ASSERT_TRUE(db.load());
  for (const DbWarning& w : db.warnings()) ADD_FAILURE() << w.line << ": " << w.message;
  ASSERT_EQ(db.records().size(), static_cast<std::size_t>(writers * perWriter));
  std::set<int> seen;
  for (const TuningRecord& r : db.records()) {
    const int w = r.candidates_tried / 1000, i = r.candidates_tried % 1000;
    EXPECT_EQ(r.host.rfind("writer-" + std::to_string(w) + "-record-" + std::to_string(i) + "-", 0), 0u);
    EXPECT_TRUE(seen.insert(r.candidates_tried).second) << "duplicate " << r.candidates_tried;
  }
  // The file is exactly one line per record.
  const std::string text = test::readFile(path);
  EXPECT_EQ(static_cast<int>(std::count(text.begin(), text.end(), '\n')), writers * perWriter);
}

TEST(TuningDbConcurrency, ThreadsAppendingAtOnce) {
  test::ScratchDir dir;
  const std::string path = dir.file("db/tuning.jsonl");
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      TuningDb db(path);  // each thread its own object, its own descriptors
      for (int i = 0; i < kEach; ++i)
        if (!db.append(tagged(t, i))) ++failures;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  expectAllPresent(path, kThreads, kEach);
}

TEST(TuningDbConcurrency, ForkedProcessesAppendingAtOnce) {
  test::ScratchDir dir;
  const std::string path = dir.file("tuning.jsonl");
  constexpr int kProcs = 6, kEach = 30;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      // Child: append, report failure through the exit status, never return into gtest.
      TuningDb db(path);
      int bad = 0;
      for (int i = 0; i < kEach; ++i)
        if (!db.append(tagged(p, i))) ++bad;
      _exit(bad == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  // The parent writes too, concurrently with the children.
  TuningDb mine(path);
  for (int i = 0; i < kEach; ++i) ASSERT_TRUE(mine.append(tagged(kProcs, i)));
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " failed";
  }
  expectAllPresent(path, kProcs + 1, kEach);
}

// A crash mid-write (simulated: a writer dies after writing part of its line) costs that one line
// only; concurrent writers afterwards still produce intact records.
TEST(TuningDbConcurrency, CrashMidWriteCostsOnlyTheTornLine) {
  test::ScratchDir dir;
  const std::string path = dir.file("tuning.jsonl");
  TuningDb db(path);
  ASSERT_TRUE(db.append(tagged(0, 0)));
  const std::string line = toJsonLine(tagged(0, 1));
  {
    std::FILE* f = std::fopen(path.c_str(), "ab");
    ASSERT_TRUE(f);
    std::fwrite(line.data(), 1, line.size() / 3, f);
    std::fclose(f);
  }
  std::vector<std::thread> threads;
  for (int t = 1; t <= 4; ++t)
    threads.emplace_back([&, t] {
      TuningDb w(path);
      for (int i = 0; i < 10; ++i) EXPECT_TRUE(w.append(tagged(t, i)));
    });
  for (auto& th : threads) th.join();
  TuningDb check(path);
  ASSERT_TRUE(check.load());
  EXPECT_EQ(check.records().size(), 41u);
  ASSERT_EQ(check.warnings().size(), 1u);
  EXPECT_EQ(check.warnings()[0].line, 2);
}

}  // namespace
}  // namespace dgps::tuning
