#include "dgps/dsl/FileRead.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

namespace dgps {
namespace {

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every path out of readRegularFile.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FileReadResult readRegularFile(const std::string& path, std::uint64_t maxBytes, const std::string& what) {
  FileReadResult r;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever before fstat can refuse it.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    r.error = std::string("cannot open: ") + std::strerror(errno);
    return r;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    r.error = std::string("cannot stat: ") + std::strerror(errno);
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.error = "is " + kindOf(st.st_mode) + ", not a regular file";
    return r;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  auto tooBig = [&](std::uint64_t n) {
    return "is " + std::to_string(n) + " bytes; the limit for " + what + " is " + std::to_string(maxBytes) +
           " bytes";
  };
  if (size > maxBytes) {
    r.error = tooBig(size);
    return r;
  }
  // Back to blocking reads: a regular file never blocks, and EAGAIN handling would only add noise.
  ::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  try {
    r.data.resize(static_cast<std::size_t>(size));
    std::uint64_t got = 0;
    for (;;) {
      if (got == r.data.size()) {
        // The file may have grown since fstat: read one more byte, up to the limit, to find out.
        if (got >= maxBytes + 1) break;
        r.data.resize(static_cast<std::size_t>(std::min<std::uint64_t>(maxBytes + 1, got * 2 + 4096)));
      }
      const ssize_t n = ::read(f.fd, &r.data[got], r.data.size() - got);
      if (n < 0) {
        if (errno == EINTR) continue;
        r.error = std::string("cannot read: ") + std::strerror(errno);
        r.data.clear();
        return r;
      }
      if (n == 0) break;
      got += static_cast<std::uint64_t>(n);
    }
    if (got > maxBytes) {
      r.data.clear();
      r.error = tooBig(got) + " (it grew while being read)";
      return r;
    }
    r.data.resize(static_cast<std::size_t>(got));
  } catch (const std::bad_alloc&) {
    r.data.clear();
    r.error = "out of memory reading " + std::to_string(size) + " bytes";
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace dgps
