// FLA's times, measured in the same run as ours: scripts/fla_bench.py times flash-linear-attention's ops on
// the GPU machine and writes a JSON file that dgps-bench reads (--dgps_fla=FILE). Nothing is compiled in:
// a row without a same-run FLA time shows "–".
//
// File format (what scripts/fla_bench.py writes):
//   {"gpu": "NVIDIA H200", "torch": "...", "triton": "...",
//    "rows": [{"spec": "gdn", "op": "chunk_gated_delta_rule", "kind": "forward",
//              "B": 8, "T": 4096, "H": 16, "HV": 16, "K": 128, "V": 128, "ms": 0.84}, ...]}
// `spec` is our spec name for the op FLA implements; `kind` is "forward" or "decode" (T = 1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "Shapes.h"

namespace dgps {
namespace bench {

struct FlaAnchor {
  double ms = 0;   ///< FLA's median time, milliseconds.
  std::string op;  ///< the FLA function it timed, e.g. "chunk_gated_delta_rule".
};

struct FlaRow {
  std::string spec;
  FlaAnchor time;
  BenchShape shape;      ///< shape.heads_v is FLA's HV (never 0 here)
};

/// The same-run FLA times of one file.
struct FlaTimes {
  std::string gpu;
  std::vector<FlaRow> rows;
};

/// Parses the JSON above. Returns false with *error naming the file, the row and the field on a bad one.
bool parseFlaTimes(const std::string& json_text, const std::string& path, FlaTimes* out, std::string* error);
/// Reads and parses `path` (bounded read; a regular file only).
bool loadFlaTimes(const std::string& path, FlaTimes* out, std::string* error);

/// The process's FLA times (set once by main from --dgps_fla; empty otherwise).
void setFlaTimes(FlaTimes times);
const FlaTimes& flaTimes();

/// FLA's time for spec `spec_name` at `shape` with `heads_v` value heads, or nullopt when not measured.
std::optional<FlaAnchor> flaAnchor(const std::string& spec_name, const BenchShape& shape, std::int64_t heads_v);

/// FLA's numerator / denominator time ratio at a shape (HV = H), or nullopt when either is missing.
std::optional<double> flaRatio(const std::string& numerator, const std::string& denominator, const BenchShape& shape);

}  // namespace bench
}  // namespace dgps
