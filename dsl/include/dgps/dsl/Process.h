// The one child-process spawner: posix_spawn of an absolute path with an argv (no shell, no PATH search),
// stdin from /dev/null, output to a log file or inherited, and a deadline after which the child is killed.
// Used by the tuner's isolated trials, dgps-jit-check's compile children and `dgpsc tune`. POSIX only.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dgps {

struct ProcessResult {
  bool started = false;   ///< false: posix_spawn failed (`error` says why)
  bool timed_out = false; ///< killed with SIGKILL at the deadline
  bool signaled = false;  ///< ended by a signal (`signal`)
  int exit_code = -1;     ///< valid when !signaled && !timed_out
  int signal = 0;
  std::string error;
};

/// "No deadline" for runProcess: for a child that enforces its own time budgets (dgps-tune under dgpsc).
inline constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds::max();

/// Runs argv[0] with argv (argv[0] is a path, not searched in PATH; no shell), stdin from /dev/null and
/// stdout+stderr appended to `log_path`, or inherited from this process when `log_path` is empty. Waits
/// at most `timeout` (kNoTimeout: no limit), then kills the child (SIGKILL) and reaps it. Never throws.
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

}  // namespace dgps
