#include "dgps/runtime/tune/TuneCli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "dgps/runtime/Error.h"

namespace dgps {
namespace tune {
namespace {

[[noreturn]] void bad(const std::string& m) { throw RuntimeError(RuntimeErrorCode::InvalidArgument, m); }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

ShapeArg parseShapeArg(const std::string& text) {
  const std::string accepted = "accepted keys: B, T, H, HV, K, V, e.g. B=8,T=4096,H=16,K=128,V=128";
  if (trim(text).empty()) bad("--shape is empty; " + accepted);
  ShapeArg a;
  std::stringstream ss(text);
  std::string piece;
  std::vector<std::string> seen;
  while (std::getline(ss, piece, ',')) {
    const std::string p = trim(piece);
    if (p.empty()) bad("--shape '" + text + "': empty entry (stray comma); " + accepted);
    const auto eq = p.find('=');
    if (eq == std::string::npos) bad("--shape: '" + p + "' is not KEY=VALUE; " + accepted);
    const std::string key = trim(p.substr(0, eq));
    const std::string val = trim(p.substr(eq + 1));
    std::int64_t* slot = key == "B" ? &a.B : key == "T" ? &a.T : key == "H" ? &a.H : key == "HV" ? &a.HV
                       : key == "K" ? &a.K : key == "V" ? &a.V : nullptr;
    if (!slot) bad("--shape: unknown key '" + key + "' in '" + p + "'; " + accepted);
    for (const std::string& s : seen)
      if (s == key) bad("--shape: key " + key + " given twice");
    seen.push_back(key);
    char* end = nullptr;
    errno = 0;
    const long long v = val.empty() ? 0 : std::strtoll(val.c_str(), &end, 10);
    if (val.empty() || *end != '\0' || errno == ERANGE || v <= 0 || v > (1ll << 40)) {
      bad("--shape: '" + p + "': " + key + " must be a positive integer");
    }
    *slot = v;
  }
  if (!text.empty() && text.back() == ',') bad("--shape '" + text + "': trailing comma; " + accepted);
  return a;
}

ProblemShape resolveShapeArg(const ShapeArg& a, const Spec& spec) {
  for (const auto& need : {std::make_pair("T", a.T), std::make_pair("K", a.K), std::make_pair("V", a.V)}) {
    if (need.second == 0) bad(std::string("--shape: ") + need.first + " is required (e.g. B=8,T=4096,H=16,K=128,V=128)");
  }
  ProblemShape s;
  s.batch = a.B ? a.B : 1;
  s.seq_len = a.T;
  s.key_dim = a.K;
  s.value_dim = a.V;
  if (spec.heads_qk > 0) {
    if (a.H && a.H != spec.heads_qk) {
      bad("--shape: H=" + std::to_string(a.H) + " but spec '" + spec.name + "' fixes H=" + std::to_string(spec.heads_qk));
    }
    s.heads_qk = spec.heads_qk;
  } else {
    if (!a.H) bad("--shape: H is required (spec '" + spec.name + "' does not fix the number of query/key heads)");
    s.heads_qk = a.H;
  }
  const std::int64_t hv = s.heads_qk * spec.gva_ratio;
  if (a.HV && a.HV != hv) {
    bad("--shape: HV=" + std::to_string(a.HV) + " but spec '" + spec.name + "' has gva_ratio " +
        std::to_string(spec.gva_ratio) + ", so HV must be H*" + std::to_string(spec.gva_ratio) + " = " +
        std::to_string(hv));
  }
  s.heads_v = hv;
  return s;
}

ProgressPrinter::ProgressPrinter(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}

void ProgressPrinter::operator()(const tuning::TuneProgress& p) {
  if (p.phase == tuning::TunePhase::Done) {
    if (line_open_) out_ << "\n";
    line_open_ = false;
    out_.flush();
    return;
  }
  const int width = 24;
  const int filled = p.total > 0 ? p.done * width / p.total : width;
  char head[64];
  std::snprintf(head, sizeof head, "[%-7s] ", tuning::toString(p.phase));
  std::string bar(std::size_t(filled), '#');
  bar += std::string(std::size_t(width - filled), '-');
  char count[32];
  std::snprintf(count, sizeof count, " %3d/%-3d ", p.done, p.total);
  const std::string line = head + bar + count + p.config.str() + "  " + tuning::toString(p.status);
  if (terminal_) {
    out_ << "\r" << line << "\033[K";
    line_open_ = true;
    if (p.done >= p.total) {
      out_ << "\n";
      line_open_ = false;
    }
  } else if (p.done >= p.total || p.status != tuning::TrialStatus::Ok) {
    out_ << line << "\n";  // one line per finished phase, plus every failure
  }
  out_.flush();
}

}  // namespace tune
}  // namespace dgps
