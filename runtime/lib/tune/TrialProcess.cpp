#include "dgps/runtime/tune/TrialProcess.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "dgps/dsl/Process.h"
#include "dgps/dsl/FileRead.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tune/ScratchForward.h"

namespace dgps {
namespace tune {

std::vector<std::string> trialArguments(const TrialRequest& r) {
  std::vector<std::string> a = {"--package", r.package, "--inputs", r.inputs, "--out", r.outputs,
                                "--report", r.report, "--config", toString(r.config),
                                "--device", std::to_string(r.device)};
  if (!r.cache_dir.empty()) {
    a.push_back("--cache-dir");
    a.push_back(r.cache_dir);
  }
  if (r.full_batch > 0 && r.full_tokens > 0) {
    a.push_back("--full-batch");
    a.push_back(std::to_string(r.full_batch));
    a.push_back("--full-tokens");
    a.push_back(std::to_string(r.full_tokens));
  }
  return a;
}

namespace {

[[noreturn]] void usage(const std::string& m) {
  throw RuntimeError(RuntimeErrorCode::InvalidArgument, "dgps-tune-trial: " + m);
}

std::int64_t toInt(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0) usage(flag + ": expected a non-negative integer, got '" + text + "'");
  return v;
}

TrialRequest parseTrialRequest(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0) usage("unexpected argument '" + flag + "' (this is an internal helper of dgps-tune)");
    if (i + 1 >= argc) usage(flag + " needs a value");
    kv[flag] = argv[++i];
  }
  auto need = [&](const char* flag) {
    auto it = kv.find(flag);
    if (it == kv.end()) usage(std::string("missing ") + flag);
    return it->second;
  };
  TrialRequest r;
  r.package = need("--package");
  r.inputs = need("--inputs");
  r.outputs = need("--out");
  r.report = need("--report");
  r.config = parseTileConfig(need("--config"), TileConfig());
  r.device = int(toInt("--device", need("--device")));
  if (kv.count("--cache-dir")) r.cache_dir = kv["--cache-dir"];
  if (kv.count("--full-batch")) r.full_batch = toInt("--full-batch", kv["--full-batch"]);
  if (kv.count("--full-tokens")) r.full_tokens = toInt("--full-tokens", kv["--full-tokens"]);
  for (const auto& p : kv) {
    static const char* const known[] = {"--package", "--inputs", "--out", "--report", "--config", "--device",
                                        "--cache-dir", "--full-batch", "--full-tokens"};
    bool ok = false;
    for (const char* k : known) ok = ok || p.first == k;
    if (!ok) usage("unknown option " + p.first);
  }
  return r;
}

void writeVerdict(const std::string& path, const char* verdict, const std::string& message) {
  std::ofstream out(path, std::ios::trunc);
  std::string oneLine = message;
  for (char& c : oneLine)
    if (c == '\n' || c == '\r') c = ' ';
  out << verdict << "\n" << oneLine << "\n";
}

void synchronize(int device) {
  DeviceContextGuard guard(device);
  checkCuda(cudaDriver().cuCtxSynchronize(), "cuCtxSynchronize after the candidate's forward");
}

// One forward of `config` on `inputs` with poisoned outputs.
void runOnce(Runtime& rt, const Package& pkg, ScratchForward& s, const TileConfig& config, int device) {
  s.poisonOutputs();
  LaunchOptions launch;
  launch.config = config;
  rt.forward(pkg, s.tensors(), launch);
  synchronize(device);
}

}  // namespace

int runTrialHelper(int argc, char** argv) {
  TrialRequest r;
  try {
    r = parseTrialRequest(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return kTrialExitUsage;
  }
  try {
    const Package pkg = Package::open(r.package);
    const SafetensorsFile in = readSafetensors(r.inputs);
    RuntimeOptions options;
    options.cache_dir = r.cache_dir;
    Runtime rt(options);
    {
      ScratchForward slice(pkg, in.tensors, r.device);
      runOnce(rt, pkg, slice, r.config, r.device);
      SafetensorsFile out;
      out.metadata["config"] = toString(r.config);
      out.tensors = slice.downloadOutputs();
      writeSafetensors(r.outputs, out);
    }
    if (r.full_batch > 0 && r.full_tokens > 0) {
      ScratchForward full(pkg, tileInputs(in.tensors, r.full_batch, r.full_tokens), r.device);
      runOnce(rt, pkg, full, r.config, r.device);
      std::string which;
      const std::int64_t bad = full.nonFiniteOutputs(&which);
      if (bad > 0) {
        const std::string m = std::to_string(bad) + " non-finite output element(s) at the full shape B=" +
                              std::to_string(r.full_batch) + " T=" + std::to_string(r.full_tokens) + ", first in '" +
                              which + "'";
        writeVerdict(r.report, "nonfinite", m);
        std::cerr << "dgps-tune-trial: " << m << "\n";
        return kTrialExitNonFinite;
      }
    }
    writeVerdict(r.report, "ok", "");
    return kTrialExitOk;
  } catch (const RuntimeError& e) {
    const bool fault = e.code() == RuntimeErrorCode::Cuda;
    writeVerdict(r.report, fault ? "fault" : "error", e.what());
    std::cerr << "dgps-tune-trial: " << e.what() << "\n";
    return fault ? kTrialExitFault : kTrialExitError;
  } catch (const std::exception& e) {
    writeVerdict(r.report, "error", e.what());
    std::cerr << "dgps-tune-trial: " << e.what() << "\n";
    return kTrialExitError;
  }
}

namespace {

std::string signalName(int sig) {
  const char* d = strsignal(sig);
  return "signal " + std::to_string(sig) + (d ? std::string(" (") + d + ")" : std::string());
}

// Line 2 of the verdict file (the message), or "". The file is the child's, but read with a limit all
// the same: a verdict is two short lines.
std::string verdictMessage(const std::string& path) {
  const FileReadResult f = readRegularFile(path, 1 << 20, "a trial verdict");
  if (!f.ok) return "";
  std::istringstream in(f.data);
  std::string verdict, message;
  std::getline(in, verdict);
  std::getline(in, message);
  return message;
}
}  // namespace

TrialOutcome runIsolatedTrial(const std::string& helper, const TrialRequest& request, const std::string& log_path,
                              std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {helper};
  for (std::string& a : trialArguments(request)) argv.push_back(std::move(a));
  std::remove(request.report.c_str());
  const dgps::ProcessResult p = dgps::runProcess(argv, log_path, timeout);
  TrialOutcome o;
  using Kind = TrialOutcome::Kind;
  if (!p.started) {
    o.kind = Kind::Error;
    o.message = "trial helper could not be started: " + p.error;
    return o;
  }
  if (p.timed_out) {
    o.kind = Kind::Timeout;
    o.message = "trial process did not finish within " + std::to_string(timeout.count()) + " ms and was killed";
    return o;
  }
  if (p.signaled) {
    o.kind = Kind::Fault;
    o.message = "trial process killed by " + signalName(p.signal);
    const std::string tail = dgps::fileTail(log_path);
    if (!tail.empty()) o.message += ": " + tail;
    return o;
  }
  std::string message = verdictMessage(request.report);
  if (message.empty() && p.exit_code != kTrialExitOk) message = dgps::fileTail(log_path);
  switch (p.exit_code) {
    case kTrialExitOk: o.kind = Kind::Ok; break;
    case kTrialExitFault: o.kind = Kind::Fault; break;
    case kTrialExitNonFinite: o.kind = Kind::NonFinite; break;
    default:
      o.kind = Kind::Error;
      message = "trial process exited with status " + std::to_string(p.exit_code) + (message.empty() ? "" : ": " + message);
      break;
  }
  o.message = message;
  return o;
}

std::optional<std::string> findTrialHelper(std::string* searched) {
  std::vector<std::string> tried;
  auto found = [&](const std::string& path) -> std::optional<std::string> {
    tried.push_back(path);
    if (dgps::isExecutable(path)) return path;
    return std::nullopt;
  };
  auto result = [&](std::optional<std::string> r) {
    if (searched) {
      std::string s;
      for (const std::string& t : tried) s += (s.empty() ? "" : ", ") + t;
      *searched = s;
    }
    return r;
  };
  if (const char* env = std::getenv("DGPS_TUNE_TRIAL"); env && *env) {
    // An explicit choice is never silently replaced by another copy.
    return result(found(env));
  }
  const std::string name = "dgps-tune-trial";
  if (std::string dir = dgps::selfExeDir(); !dir.empty())
    if (auto p = found(dir + "/" + name)) return result(p);
#ifdef DGPS_TUNE_TRIAL_BUILD_PATH
  if (auto p = found(DGPS_TUNE_TRIAL_BUILD_PATH)) return result(p);
#endif
#ifdef DGPS_TUNE_TRIAL_INSTALL_PATH
  if (auto p = found(DGPS_TUNE_TRIAL_INSTALL_PATH)) return result(p);
#endif
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty())
        if (auto p = found(dir + "/" + name)) return result(p);
  }
  return result(std::nullopt);
}

}  // namespace tune
}  // namespace dgps
