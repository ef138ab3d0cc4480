// Trust rules for the folders DGPS writes and later reads back as its own (the binary cache, the tuning
// database): anyone who can write such a folder can plant an entry that the next process loads (a
// forged CUBIN, a tuning record). A folder is used only when it is a directory owned by this process's
// effective user that neither group nor others may write; an entry only when it is a regular file
// with the same owner and permission rule. Header-only: shared by dgps_runtime (BinaryCache.cpp) and
// dgps_tuning (TuningDb.cpp), which do not link each other.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace dgps {
namespace detail {

inline std::string octalMode(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

/// "" when `st` (of `path`, a `kind` such as "folder") is owned by us and not writable by group or others.
inline std::string ownershipProblem(const struct stat& st, const std::string& path, const std::string& kind) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return kind + " " + path + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(me) + ")";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return kind + " " + path + " is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " +
           octalMode(st.st_mode) + "; expected 0700 or 0755)";
  }
  return "";
}

/// "" when `path` is a directory we own that group and others cannot write. `follow_symlink`: a symbolic
/// link to such a directory is accepted (a user's ~/.cache may be one); without it the path itself must
/// be the directory (for folders in shared places such as /tmp). `exists` (optional) is set to false when
/// the path does not exist (that is not an error here).
inline std::string folderProblem(const std::string& path, bool follow_symlink, bool* exists = nullptr) {
  struct stat st {};
  if (exists) *exists = true;
  if ((follow_symlink ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    if (errno == ENOENT && exists) {
      *exists = false;
      return "";
    }
    return "folder " + path + " cannot be examined: " + std::strerror(errno);
  }
  if (S_ISLNK(st.st_mode)) return "folder " + path + " is a symbolic link, not a directory";
  if (!S_ISDIR(st.st_mode)) return path + " is not a directory";
  return ownershipProblem(st, path, "folder");
}

/// "" when `path` is a regular file (not a symbolic link) that we own and group and others cannot write.
inline std::string fileProblem(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "file " + path + " cannot be examined: " + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "file " + path + " is a symbolic link";
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
  return ownershipProblem(st, path, "file");
}

/// mkdir -p with mode 0700 for every folder it creates, then checks `path` with folderProblem (the last
/// component with lstat unless `follow_symlink`). Returns "" or why the folder cannot be used.
inline std::string makePrivateFolder(const std::string& path, bool follow_symlink) {
  if (path.empty()) return "empty folder path";
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return "cannot create folder " + prefix + ": " + std::strerror(errno);
    }
  }
  return folderProblem(path, follow_symlink);
}

}  // namespace detail
}  // namespace dgps
