// dgps._dgps.tune: autotune a package's chunked forward for one dense shape on the GPU at hand and record
// the winner in the tuning database (tune::tunePackage, runtime/include/dgps/runtime/tune/TuneJob.h).
// Later forward calls of any Runtime in `recorded` mode (the default) pick the record up.
//
// Returns {"ok": bool, "message": str, "config": "chunk=..,block_v=..,warps=..,stages=.." or None,
//          "median_ms": float, "reused": bool, "db_path": str, "table": str (the candidate table)}.
// Throws dgps.DgpsError before any trial for: no GPU, an unsupported shape or dtype, no trial helper.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "dgps/runtime/Package.h"

namespace dgps::python {

pybind11::dict tuneForward(const Package& package, std::int64_t batch, std::int64_t seq_len, std::int64_t heads_qk,
                           std::int64_t heads_v, std::int64_t key_dim, std::int64_t value_dim,
                           const std::string& dtype, int device, bool force, const std::string& db_path,
                           const std::string& cache_dir, bool isolate);

}  // namespace dgps::python
