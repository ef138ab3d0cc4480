// POSIX file helpers for the tuning database (private): an RAII descriptor that holds a flock, and
// EINTR-safe whole-buffer I/O. Locks are advisory and per open file description, so they exclude
// both other processes and other threads that opened the file separately.
#pragma once

#include <string>

namespace dgps::tuning::posix {

class LockedFile {
 public:
  /// Opens `path` with `flags` (mode 0644 when creating) and takes a shared or exclusive flock.
  LockedFile(const std::string& path, int flags, bool exclusive);
  ~LockedFile();
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0 && error_.empty(); }
  /// errno of the failed open/flock (0 if none) and a message naming the path and step.
  int errnum() const { return errnum_; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  int errnum_ = 0;
  std::string error_;
};

/// Write all of `data`, retrying on EINTR and short writes. Returns "" or the strerror text.
std::string writeAll(int fd, const std::string& data);
/// Read the whole file from offset 0. Returns "" or the strerror text.
std::string readAll(int fd, std::string* out);
/// mkdir -p for the directory part of `path`. Returns "" or a message.
std::string makeParentDirs(const std::string& path);

}  // namespace dgps::tuning::posix
