// Child processes for the tuner: spawn with a deadline, and locate executables. POSIX only.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dgps {
namespace tune {
namespace detail {

struct ProcessResult {
  bool started = false;   ///< false: posix_spawn failed (`error` says why)
  bool timed_out = false; ///< killed with SIGKILL at the deadline
  bool signaled = false;  ///< ended by a signal (`signal`)
  int exit_code = -1;     ///< valid when !signaled && !timed_out
  int signal = 0;
  std::string error;
};

/// Runs argv[0] with argv (argv[0] is a path, not searched in PATH), stdin from /dev/null and
/// stdout+stderr appended to `log_path`. Waits at most `timeout`, then kills the child (SIGKILL) and
/// reaps it. Never throws.
ProcessResult runProcess(const std::vector<std::string>& argv, const std::string& log_path,
                         std::chrono::milliseconds timeout);

/// True when `path` is a regular file this process may execute.
bool isExecutable(const std::string& path);

/// Folder of the running executable (/proc/self/exe), or "".
std::string selfExeDir();

/// Path of the running executable (/proc/self/exe resolved), or "".
std::string selfExePath();

/// The last `max_lines` non-empty lines of a text file, joined with " | " ("" if unreadable). Reads at
/// most the last 64 KiB of the file (a child's log may be huge).
std::string fileTail(const std::string& path, int max_lines = 3);

}  // namespace detail
}  // namespace tune
}  // namespace dgps
