#include "Results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "Anchors.h"

namespace dgps {
namespace bench {
namespace {

std::string fmt(const char* format, double v) {
  if (!std::isfinite(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string oneLine(std::string s, std::size_t max_len) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '|', '/');
  if (s.size() > max_len) s = s.substr(0, max_len - 3) + "...";
  return s;
}

std::string checkColumn(const ResultRow& r) {
  if (r.status == "unchecked") return "UNCHECKED";
  if (r.status == "wrong") return "WRONG " + fmt("%.1e", r.check_err);
  if (r.status == "error") return "ERROR";
  return fmt("%.1e", r.check_err);
}

const ResultRow* pick(const std::vector<ResultRow>& rows, const std::string& spec, const std::string& shape_label,
                      Kind kind) {
  const ResultRow* fallback = nullptr;
  for (const ResultRow& r : rows) {
    if (r.spec != spec || r.shape.label() != shape_label || r.shape.kind != kind || !r.timed()) continue;
    if (r.variant == "tuned") return &r;
    if (r.variant == "default") fallback = &r;
  }
  return fallback;
}

// "0.112 mem | 45.3 | ": the roofline time and its bound, then the share of it the measured time reaches.
std::string rooflineColumns(const ResultRow& r) {
  if (!(r.roofline_bytes > 0) && !(r.flops > 0)) return "– | – | ";
  const Roofline roof = r.rooflineAt();
  return fmt("%.4f", roof.ms()) + " " + roof.bound() + " | " + (r.timed() ? fmt("%.1f", r.rooflinePercent()) : "–") +
         " | ";
}

void tableRow(std::ostringstream& os, const ResultRow& r, double copy_bps) {
  os << "| " << r.spec << " | " << toString(r.shape.kind) << " | " << r.shape.label() << " | " << r.variant << " "
     << r.config << " | ";
  if (r.timed()) {
    os << fmt("%.3f", r.ms) << " [" << fmt("%.3f", r.p20_ms) << ", " << fmt("%.3f", r.p80_ms) << "]"
       << (r.reps_cut ? " n=" + std::to_string(r.samples) : std::string()) << " | "
       << fmt("%.0f", r.gbps()) << " | " << fmt("%.1f", r.tflops()) << " | "
       << (copy_bps > 0 ? fmt("%.1f", r.floorPercent(copy_bps)) : std::string("–")) << " | "
       << rooflineColumns(r) << fmt("%.1f", r.host_us) << " | ";
    if (std::isfinite(r.fla_ms)) {
      os << fmt("%.2f", r.vsFla()) << "x (FLA " << fmt("%.3f", r.fla_ms) << ")";
    } else {
      os << "–";
    }
  } else {
    os << "– | – | – | – | " << rooflineColumns(r) << "– | " << (std::isfinite(r.fla_ms) ? "FLA " + fmt("%.3f", r.fla_ms) : std::string("–"));
  }
  os << " | " << checkColumn(r) << " |\n";
}

}  // namespace

std::string shortConfig(int chunk, int block_v, int warps, int stages) {
  return "C" + std::to_string(chunk) + " BV" + std::to_string(block_v) + " W" + std::to_string(warps) + " S" +
         std::to_string(stages);
}

void Results::record(const ResultRow& row) {
  std::lock_guard<std::mutex> lock(mu_);
  for (ResultRow& r : rows_) {
    if (r.benchmark == row.benchmark) {
      r = row;
      return;
    }
  }
  rows_.push_back(row);
}

void Results::notTimed(const NotTimed& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  not_timed_.push_back(entry);
}

std::vector<ResultRow> Results::rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_;
}

std::vector<NotTimed> Results::notTimedRows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return not_timed_;
}

bool Results::anyFailed() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ResultRow& r : rows_) {
    if (r.status == "wrong" || r.status == "error") return true;
  }
  return false;
}

double specRatio(const std::vector<ResultRow>& rows, const std::string& numerator, const std::string& denominator,
                 const std::string& shape_label) {
  const ResultRow* a = pick(rows, numerator, shape_label, Kind::Forward);
  const ResultRow* b = pick(rows, denominator, shape_label, Kind::Forward);
  if (!a || !b) return std::nan("");
  return a->ms / b->ms;
}

std::string formatSummary(const std::vector<ResultRow>& rows, const std::vector<NotTimed>& not_timed,
                          const SummaryInfo& info) {
  std::ostringstream os;
  os << "\n## dgps-bench summary: " << info.gpu << ", commit " << info.commit << ", " << info.date << "\n\n";
  os << "Copy bandwidth (device-to-device copy kernel, bytes read + written): "
     << (info.copy_bytes_per_s > 0 ? fmt("%.2f", info.copy_bytes_per_s / 1e12) + " TB/s" : std::string("not measured"))
     << ". Times: " << info.timing << "; ms is the median [p20, p80].\n";
  os << "GB/s and % floor count the bytes floor (q,k,v,o bf16 + gates f32 read/written once; decode: state "
        "read+write); vs FLA = FLA ms / our ms, FLA timed in the same run by scripts/fla_bench.py (>1 is faster; – = not timed).\n";
  os << "Roofline ms = max(bytes / peak bandwidth, FLOPs / peak rate) at the " << kH200Peaks.source
     << " (bytes: the manifest plan's forward traffic when costed at this K, V, else the bytes floor; bench/Roofline.h), "
        "with the bound (mem or compute); % roofline = roofline ms / ms. host µs = wall time of one warm call on the "
        "host (median of the warm-up calls).\n\n";
  os << "| spec | kind | shape | config | ms [p20, p80] | GB/s | TFLOP/s | % bytes floor | roofline ms | % roofline | "
        "host µs | vs FLA | check |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  bool any_sweep = false;
  for (const ResultRow& r : rows) {
    if (r.variant == "sweep") {
      any_sweep = true;
      continue;
    }
    tableRow(os, r, info.copy_bytes_per_s);
  }

  os << "\nRatios (tuned row if timed, else default):\n";
  // gated_deltaproduct/gdn: the cost of a second Householder step per token (twice the steps of GDN's walk)
  const std::pair<const char*, const char*> pairs[] = {
      {"pgdn", "gdn"}, {"osdn", "deltanet"}, {"pkda", "kda"}, {"gated_deltaproduct", "gdn"}};
  for (const auto& pr : pairs) {
    os << "- " << pr.first << "/" << pr.second << ":";
    std::vector<std::string> seen;
    for (const ResultRow& row : rows) {
      const BenchShape& s = row.shape;
      if (s.kind != Kind::Forward) continue;
      if (std::find(seen.begin(), seen.end(), s.label()) != seen.end()) continue;
      seen.push_back(s.label());
      const double ours = specRatio(rows, pr.first, pr.second, s.label());
      auto fla = flaRatio(pr.first, pr.second, s);
      os << " " << s.label() << " " << fmt("%.2f", ours);
      if (fla) os << " (FLA " << fmt("%.2f", *fla) << ")";
      os << ";";
    }
    os << "\n";
  }

  os << "\nDecode (one token; TB/s over all bytes of the floor, and over the fp32 state read+write alone):\n";
  bool any_decode = false;
  for (const ResultRow& r : rows) {
    if (r.shape.kind != Kind::Decode || r.variant == "sweep" || !r.timed()) continue;
    any_decode = true;
    os << "- " << r.spec << " " << r.shape.label() << " " << r.variant << ": " << fmt("%.4f", r.ms) << " ms = "
       << fmt("%.1f", r.ms * 1e3) << " µs per step = " << fmt("%.2f", r.bytes / (r.ms * 1e-3) / 1e12) << " TB/s";
    if (std::isfinite(r.fla_ms)) {
      const double state_bytes =
          2.0 * double(r.shape.batch) * double(r.heads_v) * double(r.shape.key_dim) * double(r.shape.value_dim) * 4;
      os << ", state only " << fmt("%.2f", state_bytes / (r.ms * 1e-3) / 1e12) << " TB/s (FLA "
         << fmt("%.3f", r.fla_ms) << " ms = " << fmt("%.2f", state_bytes / (r.fla_ms * 1e-3) / 1e12) << " TB/s)";
    }
    os << "\n";
  }
  if (!any_decode) os << "- none timed\n";

  if (any_sweep) {
    os << "\nSweep (every tunable configuration; fastest first):\n";
    std::map<std::string, std::vector<const ResultRow*>> groups;
    std::vector<std::string> order;
    for (const ResultRow& r : rows) {
      const std::string key = r.spec + " " + r.shape.label();
      if (!groups.count(key)) order.push_back(key);
      groups[key].push_back(&r);
    }
    for (const std::string& key : order) {
      auto& g = groups[key];
      bool has_sweep = std::any_of(g.begin(), g.end(), [](const ResultRow* r) { return r->variant == "sweep"; });
      if (!has_sweep) continue;
      std::stable_sort(g.begin(), g.end(), [](const ResultRow* a, const ResultRow* b) {
        if (a->timed() != b->timed()) return a->timed();
        return a->timed() && a->ms < b->ms;
      });
      os << "- " << key << ":";
      for (const ResultRow* r : g) {
        os << " " << r->config << (r->variant == "sweep" ? "" : " (" + r->variant + ")") << " "
           << (r->timed() ? fmt("%.3f", r->ms) + " ms" : (r->status == "wrong" ? "WRONG" : "ERROR")) << ";";
      }
      os << "\n";
    }
  }

  bool any_failed = false;
  for (const ResultRow& r : rows) {
    if (r.timed()) continue;
    if (!any_failed) os << "\nNot timed because of an error or a wrong result:\n";
    any_failed = true;
    os << "- " << r.benchmark << ": " << oneLine(r.message, 600) << "\n";
  }
  if (!not_timed.empty()) {
    // one line per (shape, reason), naming every spec it holds for in order of appearance: the standard GVA
    // shape alone would otherwise add a line per spec of another GVA ratio
    os << "\nNot registered (the package does not support the shape):\n";
    std::vector<std::pair<const NotTimed*, std::string>> lines;
    for (const NotTimed& n : not_timed) {
      auto same = std::find_if(lines.begin(), lines.end(), [&](const auto& l) {
        return l.first->shape == n.shape && l.first->reason == n.reason;
      });
      if (same == lines.end())
        lines.emplace_back(&n, n.spec);
      else
        same->second += ", " + n.spec;
    }
    for (const auto& [n, specs] : lines) os << "- " << specs << " " << n->shape << ": " << n->reason << "\n";
  }
  return os.str();
}

}  // namespace bench
}  // namespace dgps
