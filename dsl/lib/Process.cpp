#include "dgps/dsl/Process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace dgps {

ProcessResult runProcess(const std::vector<std::string>& argv, const std::string& log_path,
                         std::chrono::milliseconds timeout) {
  ProcessResult r;
  if (argv.empty()) {
    r.error = "no program given";
    return r;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;

  // Poll rather than block: the deadline must hold even if the child hangs inside a kernel.
  const bool limited = timeout != kNoTimeout;
  const auto deadline = std::chrono::steady_clock::now() + (limited ? timeout : std::chrono::milliseconds(0));
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      r.error = std::string("waitpid failed: ") + std::strerror(errno);
      return r;
    }
    if (limited && std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.timed_out = true;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  }
  return r;
}

bool isExecutable(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string selfExePath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, std::size_t(n));
}

std::string selfExeDir() {
  const std::string path = selfExePath();
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string fileTail(const std::string& path, int max_lines) {
  // Only the end of the file matters, and only a bounded piece of it is read: O_NONBLOCK keeps a FIFO
  // from blocking the open, fstat refuses anything that is not a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string data;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    constexpr off_t kTail = 64 * 1024;
    const off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
    data.resize(static_cast<std::size_t>(st.st_size - from));
    std::size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::pread(fd, &data[got], data.size() - got, from + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    data.resize(got);
  }
  ::close(fd);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < data.size()) {
    std::size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    std::string line = data.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.size() > 500) line = line.substr(0, 500) + "...";
    lines.push_back(std::move(line));
    if (int(lines.size()) > max_lines) lines.erase(lines.begin());
  }
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}
}  // namespace dgps
