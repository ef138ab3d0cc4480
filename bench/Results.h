// What each benchmark measured, collected as it runs, and the summary table dgps-bench prints last
// (markdown, to paste into docs/performance.md).
//
// Derived columns, for a row with median time t:
//   GB/s        = bytes floor / t                    (Floors.h)
//   TFLOP/s     = FLOP count / t
//   % floor     = (bytes floor / copy bandwidth) / t, the share of the time a perfect kernel would need
//   roofline    = max(plan bytes / peak bandwidth, FLOPs / peak FLOP rate) at the H200's datasheet peaks,
//                 and which bound it (Roofline.h); % roofline = roofline / t
//   host µs     = wall time of one warm forward()/decode() call on the host (median of the warm-up calls)
//   vs FLA      = FLA's anchor time / t (Anchors.h): above 1 means faster than FLA
#pragma once

#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "Roofline.h"
#include "Shapes.h"

namespace dgps {
namespace bench {

struct ResultRow {
  std::string benchmark;   ///< Google Benchmark name (rows with the same name replace each other)
  std::string spec;        ///< package name
  BenchShape shape;
  std::int64_t heads_v = 0;  ///< HV of the spec at this shape
  std::string variant;     ///< "default", "tuned" or "sweep"
  std::string config;      ///< "C64 BV64 W4 S1"
  std::string status;      ///< "ok", "unchecked", "wrong", "error"
  std::string message;     ///< the error, or the guard's summary
  double ms = std::numeric_limits<double>::quiet_NaN();
  double p20_ms = std::numeric_limits<double>::quiet_NaN();
  double p80_ms = std::numeric_limits<double>::quiet_NaN();
  int samples = 0;
  bool reps_cut = false;   ///< fewer repetitions than asked, to fit --dgps_budget_s
  double bytes = 0;        ///< bytes floor
  double flops = 0;
  std::string flops_source;
  double fla_ms = std::numeric_limits<double>::quiet_NaN();
  double check_err = std::numeric_limits<double>::quiet_NaN();
  double recorded_ms = std::numeric_limits<double>::quiet_NaN();  ///< tuning DB's time, tuned rows
  double roofline_bytes = 0;          ///< bytes the roofline counts (Roofline.h)
  std::string roofline_bytes_source;  ///< "manifest plan" or "bytes floor"
  double host_us = std::numeric_limits<double>::quiet_NaN();  ///< host time of one warm call

  bool timed() const { return status == "ok" || status == "unchecked"; }
  double gbps() const { return bytes / (ms * 1e-3) / 1e9; }
  double tflops() const { return flops / (ms * 1e-3) / 1e12; }
  double floorPercent(double copy_bytes_per_s) const { return 100.0 * (bytes / copy_bytes_per_s) / (ms * 1e-3); }
  double vsFla() const { return fla_ms / ms; }
  Roofline rooflineAt(const DevicePeaks& peaks = kH200Peaks) const { return roofline(roofline_bytes, flops, peaks); }
  double rooflinePercent(const DevicePeaks& peaks = kH200Peaks) const { return 100.0 * rooflineAt(peaks).ms() / ms; }
};

/// A package/shape pair that was not registered, with the reason.
struct NotTimed {
  std::string spec;
  std::string shape;
  std::string reason;
};

/// Thread-safe (the hang watchdog prints from its own thread).
class Results {
 public:
  void record(const ResultRow& row);
  void notTimed(const NotTimed& entry);
  std::vector<ResultRow> rows() const;
  std::vector<NotTimed> notTimedRows() const;
  /// True when some benchmark ended with "wrong" or "error".
  bool anyFailed() const;

 private:
  mutable std::mutex mu_;
  std::vector<ResultRow> rows_;
  std::vector<NotTimed> not_timed_;
};

struct SummaryInfo {
  std::string gpu;        ///< "NVIDIA H200 (sm_90a, 132 SMs, driver 13.0, NVRTC 13.0)"
  std::string date;       ///< UTC, "2026-11-29"
  std::string commit;
  double copy_bytes_per_s = 0;
  std::string timing;     ///< "median of 100 launches, L2 flushed"
};

/// The summary: the main table (default and tuned rows), the PGDN/GDN and OSDN/DeltaNet ratios, decode
/// bandwidth, the sweep (if any), failures and what was not timed.
std::string formatSummary(const std::vector<ResultRow>& rows, const std::vector<NotTimed>& not_timed,
                          const SummaryInfo& info);

/// Time ratio numerator/denominator at `shape_label` (forward), each spec's tuned row if timed else its
/// default row; nullopt-like NaN when either is missing.
double specRatio(const std::vector<ResultRow>& rows, const std::string& numerator, const std::string& denominator,
                 const std::string& shape_label);

/// "C64 BV64 W4 S1".
std::string shortConfig(int chunk, int block_v, int warps, int stages);

}  // namespace bench
}  // namespace dgps
