// Item: cache trust. The binary cache accepted a forged entry (its checksum is a plain hash anyone who
// can write the folder can recompute) and fell back to /tmp/dgps-cache-<uid> even when another user
// owned it world-writable. Folders and entries must now belong to this user and be writable by nobody
// else; the tuning database follows the same rule.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "OwnedFolder.h"
#include "RobustUtil.h"
#include "dgps/runtime/BinaryCache.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps {
namespace {

using robust::TempDir;

const std::string kKey(64, 'b');
constexpr uid_t kOtherUid = 4242;

// A complete, well-formed entry as an attacker would write it (encode() is public knowledge).
void forge(const std::string& cache_dir) {
  const std::string shard = cache_dir + "/v1/" + kKey.substr(0, 2);
  ASSERT_EQ(std::system(("mkdir -p '" + shard + "'").c_str()), 0);
  robust::writeFile(shard + "/" + kKey + ".bin", BinaryCache::encode(kKey, CachedImage{"FORGED", false, "log"}));
}

TEST(FolderTrust, WorldWritableCacheIsRefusedAndItsEntriesNeverLoaded) {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  forge(dir);
  BinaryCache cache(dir);
  ASSERT_TRUE(cache.load(kKey).has_value()) << "control: a private folder is used";
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  robust::WarningCapture warnings;
  EXPECT_FALSE(cache.load(kKey).has_value());
  EXPECT_FALSE(cache.store(kKey, CachedImage{"real", false, ""}));
  EXPECT_FALSE(cache.trusted(false));
  EXPECT_TRUE(warnings.contains("writable by others")) << (warnings.messages().empty() ? "" : warnings.messages()[0]);
  EXPECT_TRUE(warnings.contains("not cached"));
  // One warning per folder, not one per kernel.
  int n = 0;
  for (const auto& m : warnings.messages()) n += m.find(dir) != std::string::npos && m.find("binary cache not used") != std::string::npos;
  EXPECT_EQ(n, 1);
}

TEST(FolderTrust, GroupWritableSubfolderOrEntryIsRefused) {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  forge(dir);
  BinaryCache cache(dir);
  const std::string shard = dir + "/v1/" + kKey.substr(0, 2);
  ASSERT_EQ(::chmod(shard.c_str(), 0775), 0);
  EXPECT_FALSE(cache.load(kKey).has_value());
  ASSERT_EQ(::chmod(shard.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(cache.entryPath(kKey).c_str(), 0666), 0);
  EXPECT_FALSE(cache.load(kKey).has_value());
  ASSERT_EQ(::chmod(cache.entryPath(kKey).c_str(), 0600), 0);
  EXPECT_TRUE(cache.load(kKey).has_value());
}

TEST(FolderTrust, CacheOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a folder away (chown); ran as uid " << ::geteuid();
  TempDir tmp;
  const std::string dir = tmp / "cache";
  forge(dir);
  ASSERT_EQ(::chown(dir.c_str(), kOtherUid, kOtherUid), 0);
  BinaryCache cache(dir);
  robust::WarningCapture warnings;
  EXPECT_FALSE(cache.load(kKey).has_value());
  EXPECT_TRUE(warnings.contains("owned by uid 4242"));
  // An entry given away inside our own folder is refused too.
  ASSERT_EQ(::chown(dir.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(cache.entryPath(kKey).c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_FALSE(cache.load(kKey).has_value());
}

TEST(FolderTrust, FallbackFolderIsPrivateAndNotASymlink) {
  TempDir tmp;
  // The rule the /tmp fallback follows, on folders of the test's own.
  EXPECT_EQ(detail::makePrivateFolder(tmp / "a/b", false), "");
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::mkdir((tmp / "open").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((tmp / "open").c_str(), 01777), 0);
  EXPECT_NE(detail::makePrivateFolder(tmp / "open", false).find("writable by others"), std::string::npos);
  ASSERT_EQ(::symlink((tmp / "a").c_str(), (tmp / "link").c_str()), 0);
  EXPECT_NE(detail::makePrivateFolder(tmp / "link", false).find("symbolic link"), std::string::npos);
  EXPECT_EQ(detail::makePrivateFolder(tmp / "link", true), "") << "a user's own symlinked folder is fine";
  // Without DGPS_CACHE_DIR, XDG_CACHE_HOME and HOME the cache falls back to /tmp/dgps-cache-<euid>.
  const char* vars[] = {"DGPS_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  std::string saved[3];
  for (int i = 0; i < 3; ++i) {
    const char* v = std::getenv(vars[i]);
    saved[i] = v ? v : "";
    ::unsetenv(vars[i]);
  }
  EXPECT_EQ(BinaryCache::defaultDirectory(), "/tmp/dgps-cache-" + std::to_string(::geteuid()));
  for (int i = 0; i < 3; ++i)
    if (!saved[i].empty()) ::setenv(vars[i], saved[i].c_str(), 1);
}

TEST(FolderTrust, TuningDatabaseInAnOpenFolderIsNeitherReadNorWritten) {
  TempDir tmp;
  const std::string dir = tmp / "db";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string path = dir + "/tuning.jsonl";
  tuning::TuningDb db(path);
  ASSERT_TRUE(db.append(robust::sampleRecord()));
  ASSERT_TRUE(db.load());
  ASSERT_EQ(db.records().size(), 1u) << "control";
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  ASSERT_TRUE(db.load());
  EXPECT_TRUE(db.records().empty());
  ASSERT_FALSE(db.warnings().empty());
  EXPECT_NE(db.warnings()[0].message.find("writable by others"), std::string::npos) << db.warnings()[0].message;
  const tuning::Status s = db.append(robust::sampleRecord());
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find("not written"), std::string::npos) << s.message;
  // A world-writable database file in a private folder is refused as well.
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_TRUE(db.load());
  EXPECT_TRUE(db.records().empty());
}

TEST(FolderTrust, TuningDatabaseOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file away (chown); ran as uid " << ::geteuid();
  TempDir tmp;
  const std::string path = tmp / "tuning.jsonl";
  tuning::TuningDb db(path);
  ASSERT_TRUE(db.append(robust::sampleRecord()));
  ASSERT_EQ(::chown(path.c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_TRUE(db.load());
  EXPECT_TRUE(db.records().empty());
  ASSERT_FALSE(db.warnings().empty());
  EXPECT_NE(db.warnings()[0].message.find("owned by uid 4242"), std::string::npos);
}

}  // namespace
}  // namespace dgps
