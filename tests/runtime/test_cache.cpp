// The on-disk binary cache: entry format round trip, rejection of truncated/corrupt/foreign entries
// (warned and treated as a miss), default location, and concurrent writers in threads and processes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "RuntimeTestUtil.h"
#include "dgps/runtime/BinaryCache.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

using test::TempDir;

std::string keyOf(int i) {
  std::string k(64, '0');
  const char* hex = "0123456789abcdef";
  for (int j = 0; j < 64; ++j) k[j] = hex[(i * 7 + j * 13 + (i >> 3)) & 15];
  return k;
}

CachedImage imageOf(int i, std::size_t size) {
  CachedImage e;
  std::mt19937 rng(i);
  e.image.resize(size);
  for (auto& c : e.image) c = char(rng());
  e.log = "ptxas info    : Used " + std::to_string(i) + " registers";
  e.is_ptx = (i % 2) == 1;
  return e;
}

TEST(BinaryCache, RoundTripAndMiss) {
  TempDir tmp;
  BinaryCache cache(tmp.path() + "/c/");
  EXPECT_EQ(cache.directory(), tmp.path() + "/c");
  const std::string key = keyOf(1);
  EXPECT_EQ(cache.entryPath(key), tmp.path() + "/c/v1/" + key.substr(0, 2) + "/" + key + ".bin");
  EXPECT_FALSE(cache.load(key).has_value());
  CachedImage e = imageOf(3, 5000);
  ASSERT_TRUE(cache.store(key, e));
  auto got = cache.load(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->image, e.image);
  EXPECT_EQ(got->log, e.log);
  EXPECT_EQ(got->is_ptx, e.is_ptx);
  EXPECT_THROW(cache.entryPath("not-a-key"), RuntimeError);
  EXPECT_THROW(cache.entryPath(std::string(64, 'G')), RuntimeError);
}

// Every truncation length and a flipped byte in every region is rejected with a warning, never trusted.
TEST(BinaryCache, TruncatedOrCorruptEntriesAreRejected) {
  const std::string key = keyOf(2);
  const std::string good = BinaryCache::encode(key, imageOf(2, 300));
  std::string why;
  ASSERT_TRUE(BinaryCache::decode(good, key, &why).has_value()) << why;
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(BinaryCache::decode(good.substr(0, n), key, &why).has_value()) << "truncated to " << n;
  }
  for (std::size_t pos = 0; pos < good.size(); pos += 7) {
    std::string bad = good;
    bad[pos] = char(bad[pos] ^ 0x5a);
    EXPECT_FALSE(BinaryCache::decode(bad, key, &why).has_value()) << "flip at " << pos;
  }
  EXPECT_FALSE(BinaryCache::decode(good + "x", key, &why).has_value());
  EXPECT_NE(why.find("size mismatch"), std::string::npos) << why;
  EXPECT_FALSE(BinaryCache::decode(good, keyOf(3), &why).has_value());
  EXPECT_NE(why.find("entry holds key"), std::string::npos) << why;

  // Through the file system: a truncated file on disk is a miss plus a warning naming the file.
  TempDir tmp;
  BinaryCache cache(tmp.path());
  ASSERT_TRUE(cache.store(key, imageOf(2, 300)));
  std::string path = cache.entryPath(key);
  test::writeFile(path, good.substr(0, good.size() / 2));
  test::WarningCapture warnings;
  EXPECT_FALSE(cache.load(key).has_value());
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_TRUE(warnings.contains(path));
  EXPECT_TRUE(warnings.contains("recompiling and replacing it"));
  // Rebuild: storing again replaces it.
  ASSERT_TRUE(cache.store(key, imageOf(2, 300)));
  EXPECT_TRUE(cache.load(key).has_value());
}

TEST(BinaryCache, UnwritableCacheOnlyWarns) {
  TempDir tmp;
  test::writeFile(tmp / "file", "x");
  BinaryCache cache(tmp / "file");  // a file where the folder should be
  test::WarningCapture warnings;
  EXPECT_FALSE(cache.store(keyOf(4), imageOf(4, 10)));
  EXPECT_TRUE(warnings.contains("not cached"));
}

TEST(BinaryCache, DefaultDirectoryFollowsTheEnvironment) {
  std::string saved_dgps = std::getenv("DGPS_CACHE_DIR") ? std::getenv("DGPS_CACHE_DIR") : "";
  std::string saved_xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("DGPS_CACHE_DIR", "/x/dgps-cache", 1);
  EXPECT_EQ(BinaryCache::defaultDirectory(), "/x/dgps-cache");
  unsetenv("DGPS_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  EXPECT_EQ(BinaryCache::defaultDirectory(), "/x/xdg/dgps");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(BinaryCache::defaultDirectory(), "/x/home/.cache/dgps");
  unsetenv("HOME");
  EXPECT_EQ(BinaryCache::defaultDirectory().rfind("/tmp/dgps-cache-", 0), 0u);
  if (!saved_dgps.empty()) setenv("DGPS_CACHE_DIR", saved_dgps.c_str(), 1);
  if (!saved_xdg.empty()) setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (!saved_home.empty()) setenv("HOME", saved_home.c_str(), 1);
}

// Many threads store and load a few keys at once; every load is a miss or the exact entry.
TEST(BinaryCache, ConcurrentThreadsNeverSeeTornEntries) {
  TempDir tmp;
  BinaryCache cache(tmp.path());
  std::atomic<int> bad{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        int k = (t + i) % 3;
        CachedImage want = imageOf(k, 20000 + k);
        if ((i + t) % 2 == 0) cache.store(keyOf(k), want);
        auto got = cache.load(keyOf(k));
        if (got) {
          ++hits;
          if (got->image != want.image || got->log != want.log) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 0);
}

// fork()ed processes write the same keys while the parent reads: renames are atomic across processes.
TEST(BinaryCache, ConcurrentProcessesNeverSeeTornEntries) {
  TempDir tmp;
  BinaryCache cache(tmp.path());
  const int kChildren = 4;
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      for (int i = 0; i < 40; ++i) {
        int k = (c + i) % 2;
        if (!cache.store(keyOf(100 + k), imageOf(100 + k, 200000))) code = 3;
        auto got = cache.load(keyOf(100 + k));
        if (!got || got->image != imageOf(100 + k, 200000).image) code = 4;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  int bad = 0, hits = 0;
  for (int i = 0; i < 200; ++i) {
    int k = i % 2;
    auto got = cache.load(keyOf(100 + k));
    if (got) {
      ++hits;
      if (got->image != imageOf(100 + k, 200000).image) ++bad;
    }
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child saw a torn or missing entry";
  }
  EXPECT_EQ(bad, 0);
  // No temporary files are left behind.
  std::string leftovers = tmp.path() + "/v1";
  std::string cmd = "find '" + leftovers + "' -name '.*tmp*' | grep -q .";
  EXPECT_NE(std::system(cmd.c_str()), 0) << "temporary files left in " << leftovers;
  (void)hits;
}

}  // namespace
}  // namespace dgps
