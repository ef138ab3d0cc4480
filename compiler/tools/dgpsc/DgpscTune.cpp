#include "DgpscTune.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

#include "dgps/dsl/Process.h"

namespace dgps {
namespace dgpsc {
namespace {

std::optional<std::string> findDgpsTune(std::string& searched) {
  std::vector<std::string> tried;
  auto check = [&](const std::string& p) -> std::optional<std::string> {
    tried.push_back(p);
    return isExecutable(p) ? std::optional<std::string>(p) : std::nullopt;
  };
  auto done = [&](std::optional<std::string> r) {
    for (const std::string& t : tried) searched += (searched.empty() ? "" : ", ") + t;
    return r;
  };
  if (const char* env = std::getenv("DGPS_TUNE"); env && *env) return done(check(env));
  if (std::string d = selfExeDir(); !d.empty())
    if (auto p = check(d + "/dgps-tune")) return done(p);
#ifdef DGPS_TUNE_BUILD_PATH
  if (auto p = check(DGPS_TUNE_BUILD_PATH)) return done(p);
#endif
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty())
        if (auto p = check(dir + "/dgps-tune")) return done(p);
  }
  return done(std::nullopt);
}

// Runs argv[0] in a child process with inherited stdout/stderr and no time limit (dgps-tune keeps its own
// budgets); returns its exit status, or 1 when it could not start or ended by a signal.
int runChild(const std::vector<std::string>& argv) {
  std::cout.flush();
  std::cerr.flush();
  const ProcessResult r = runProcess(argv, /*log_path=*/"", kNoTimeout);
  if (!r.started || !r.error.empty()) {
    std::cerr << "dgpsc: error: " << (r.error.empty() ? "cannot run " + argv[0] : r.error) << "\n";
    return 1;
  }
  if (r.signaled) {
    std::cerr << "dgpsc: error: " << argv[0] << " ended by signal " << r.signal << "\n";
    return 1;
  }
  return r.exit_code;
}

std::string makeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/dgpsc-tune-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return "";
  return std::string(buf.data());
}

}  // namespace

CLI::App* addTuneSubcommand(CLI::App& app, TuneArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "tune", "compile SPEC to a package and autotune its forward on this GPU (runs dgps-tune, records the winner)");
  cmd->add_option("spec", a.spec, "spec file (YAML)")->required();
  cmd->add_option("--shape", a.shape, "problem shape, e.g. B=8,T=4096,H=16,K=128,V=128 (keys B T H HV K V)")->required();
  cmd->add_option("--dtype", a.dtype, "q/k/v/o dtype (bf16 or f16; default bf16)");
  cmd->add_option("--db", a.db, "tuning database file (default $DGPS_TUNING_DB, else ~/.cache/dgps/tuning.jsonl)");
  cmd->add_option("--device", a.device, "CUDA device ordinal");
  cmd->add_option("--package-dir", a.package_dir, "write the generated package here and keep it (default: a temporary folder)");
  cmd->add_option("--cache-dir", a.cache_dir, "binary cache folder of the JIT");
  cmd->add_flag("--force", a.force, "tune even when the database already has a record");
  cmd->add_flag("--in-process", a.in_process, "screen candidates in dgps-tune's own process (no isolation)");
  cmd->add_flag("-q,--quiet", a.quiet, "no progress bar");
  return cmd;
}

int runTune(const TuneArgs& a, const std::function<int(const std::string&, const std::string&)>& compile) {
  std::string searched;
  const std::optional<std::string> tool = findDgpsTune(searched);
  if (!tool) {
    std::cerr << "dgpsc: error: `dgpsc tune` runs the runtime's dgps-tune, which was not found (looked at: "
              << searched << "); build DGPS with DGPS_ENABLE_RUNTIME=ON, put dgps-tune on PATH, or set DGPS_TUNE\n";
    return 1;
  }
  const bool keep = !a.package_dir.empty();
  const std::string dir = keep ? a.package_dir : makeTempDir();
  if (dir.empty()) {
    std::cerr << "dgpsc: error: cannot create a temporary folder for the package\n";
    return 1;
  }
  int rc = compile(a.spec, dir);
  if (rc == 0) {
    std::vector<std::string> argv = {*tool, dir, "--shape", a.shape};
    auto opt = [&](const char* flag, const std::string& v) {
      if (!v.empty()) {
        argv.push_back(flag);
        argv.push_back(v);
      }
    };
    opt("--dtype", a.dtype);
    opt("--db", a.db);
    opt("--cache-dir", a.cache_dir);
    if (a.device >= 0) opt("--device", std::to_string(a.device));
    if (a.force) argv.push_back("--force");
    if (a.in_process) argv.push_back("--in-process");
    if (a.quiet) argv.push_back("--quiet");
    std::cerr << "dgpsc: compiled " << a.spec << " to " << dir << "; tuning with " << *tool << "\n";
    rc = runChild(argv);
  }
  if (!keep) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return rc;
}

}  // namespace dgpsc
}  // namespace dgps
