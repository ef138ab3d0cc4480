#include "dgps/dsl/ShapeArg.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "dgps/dsl/Tensor.h"

namespace dgps {
namespace {

[[noreturn]] void bad(const std::string& m) { throw DataError(m); }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// A decimal integer in [lo, 2^40], or false (no sign, no suffix, no overflow).
bool parseBounded(const std::string& text, long long lo, long long& v) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(text.c_str(), &end, 10);
  return *end == '\0' && errno != ERANGE && v >= lo && v <= (1ll << 40);
}

}  // namespace

ShapeArg parseShapeOption(const std::string& text) {
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
    long long v = 0;
    if (!parseBounded(val, 1, v)) bad("--shape: '" + p + "': " + key + " must be a positive integer");
    *slot = v;
  }
  if (!text.empty() && text.back() == ',') bad("--shape '" + text + "': trailing comma; " + accepted);
  return a;
}

ReferenceProblem resolveShapeOption(const ShapeArg& a, const Spec& spec) {
  for (const auto& need : {std::make_pair("T", a.T), std::make_pair("K", a.K), std::make_pair("V", a.V)}) {
    if (need.second == 0) bad(std::string("--shape: ") + need.first + " is required (e.g. B=8,T=4096,H=16,K=128,V=128)");
  }
  ReferenceProblem s;
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

std::vector<std::int64_t> parseCuSeqlensArg(const std::string& text) {
  const std::string example = "e.g. --cu-seqlens 0,1500,3000";
  std::vector<std::int64_t> cu;
  std::stringstream ss(text);
  std::string piece;
  while (std::getline(ss, piece, ',')) {
    const std::string p = trim(piece);
    long long v = 0;
    if (!parseBounded(p, 0, v)) {
      bad("--cu-seqlens '" + text + "': entry " + std::to_string(cu.size()) + " ('" + p +
          "') is not a non-negative integer; " + example);
    }
    cu.push_back(v);
  }
  if (!text.empty() && text.back() == ',') bad("--cu-seqlens '" + text + "': trailing comma; " + example);
  if (cu.size() < 2) bad("--cu-seqlens '" + text + "': needs at least 2 entries (N + 1 for N >= 1 sequences); " + example);
  return cu;
}

}  // namespace dgps
