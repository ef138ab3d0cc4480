#include "TuneBinding.h"

#include "TensorArgs.h"
#include "dgps/runtime/Tune.h"

namespace py = pybind11;

namespace dgps::python {

py::dict tuneForward(const Package& package, std::int64_t batch, std::int64_t seq_len, std::int64_t heads_qk,
                     std::int64_t heads_v, std::int64_t key_dim, std::int64_t value_dim, const std::string& dtype,
                     int device, bool force, const std::string& db_path, const std::string& cache_dir,
                     bool isolate) {
  tune::TuneJob job;
  job.shape.batch = batch;
  job.shape.seq_len = seq_len;
  job.shape.heads_qk = heads_qk;
  job.shape.heads_v = heads_v;
  job.shape.key_dim = key_dim;
  job.shape.value_dim = value_dim;
  job.dtype = parseScalarType(dtype, "tune", "q");
  job.device = device;
  job.force = force;
  job.db_path = db_path;
  job.cache_dir = cache_dir;
  job.isolate = isolate;
  tune::TuneOutcome r;
  {
    py::gil_scoped_release unlocked;  // a tuning run takes seconds to minutes
    r = tune::tunePackage(package, job);
  }
  py::dict d;
  d["ok"] = r.result.status.ok;
  d["message"] = r.result.status.message;
  if (r.result.record) {
    d["config"] = toString(r.result.record->config);  // the form parseTileConfig reads
  } else {
    d["config"] = py::none();
  }
  d["median_ms"] = r.result.record ? r.result.record->median_ms : 0.0;
  d["reused"] = r.result.reused;
  d["db_path"] = r.db_path;
  d["table"] = tuning::formatTable(r.result);
  return d;
}

}  // namespace dgps::python
