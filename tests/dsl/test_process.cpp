// The one child-process spawner (dgps/dsl/Process.h): exit codes, signals, the deadline, no shell, output to a
// log file or inherited, and a clear error for a program that cannot start.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dgps/dsl/Process.h"

namespace dgps {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::string tempLog(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("dgps_test_process_" + std::to_string(::getpid()) + "_" + name);
  fs::remove(p);
  return p.string();
}

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Process, ReportsTheExitCodeAndWritesTheLog) {
  const std::string log = tempLog("exit");
  const ProcessResult r = runProcess({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}, log, milliseconds(10000));
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(readAll(log), "out\nerr\n");  // stdout and stderr both go to the log, in order
  EXPECT_EQ(fileTail(log, 1), "err");
  fs::remove(log);
}

TEST(Process, ArgumentsAreNotInterpretedByAShell) {
  const std::string log = tempLog("argv");
  // One argument with spaces, quotes and a `;`: printed back verbatim, nothing after `;` runs.
  const std::string arg = "a b; exit 3 'c'";
  const ProcessResult r = runProcess({"/bin/echo", arg}, log, milliseconds(10000));
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(readAll(log), arg + "\n");
  fs::remove(log);
}

TEST(Process, KillsAChildAtTheDeadline) {
  const auto t0 = std::chrono::steady_clock::now();
  const ProcessResult r = runProcess({"/bin/sleep", "30"}, tempLog("deadline"), milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(took, std::chrono::seconds(10));
  fs::remove(tempLog("deadline"));
}

TEST(Process, WithoutADeadlineWaitsForTheChild) {
  const ProcessResult r = runProcess({"/bin/sh", "-c", "sleep 0.3; exit 4"}, "", kNoTimeout);
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 4);
}

TEST(Process, ReportsASignal) {
  const ProcessResult r = runProcess({"/bin/sh", "-c", "kill -9 $$"}, tempLog("signal"), milliseconds(10000));
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_TRUE(r.signaled);
  EXPECT_EQ(r.signal, 9);
  fs::remove(tempLog("signal"));
}

TEST(Process, AProgramThatCannotStartIsOneClearError) {
  const ProcessResult r = runProcess({"/nonexistent/dgps-no-such-tool"}, tempLog("missing"), milliseconds(10000));
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.error.find("/nonexistent/dgps-no-such-tool"), std::string::npos) << r.error;
  const ProcessResult empty = runProcess({}, "", kNoTimeout);
  EXPECT_FALSE(empty.started);
  EXPECT_FALSE(empty.error.empty());
  // A bare name is not searched in PATH.
  const ProcessResult bare = runProcess({"sh", "-c", "exit 0"}, "", milliseconds(10000));
  EXPECT_FALSE(bare.started && bare.exit_code == 0);
  fs::remove(tempLog("missing"));
}

}  // namespace
}  // namespace dgps
