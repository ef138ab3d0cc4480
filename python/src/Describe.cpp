#include "Describe.h"

#include <pybind11/stl.h>

#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/Validation.h"

namespace py = pybind11;

namespace dgps::python {

py::dict describePackage(const Package& package) {
  const Spec& s = package.spec();
  const Manifest& m = package.manifest();
  py::dict d;
  d["name"] = m.name;
  d["directory"] = package.directory();
  d["spec_hash"] = m.spec_hash;
  d["decay"] = toString(s.decay.kind);
  d["gain"] = toString(s.gain.kind);
  d["gain_range"] = py::make_tuple(s.gain.lo, s.gain.hi);
  d["precond"] = toString(s.precond.kind);
  d["precond_side"] = toString(s.precond.side);
  d["precond_source"] = toString(s.precond.source);
  d["solve"] = toString(s.solve.kind);
  d["takes_precond_g"] = specTakesPrecondGate(s);
  d["takes_precond_beta"] = specTakesPrecondGain(s);
  d["takes_precond_center"] = specTakesPrecondCenter(s);
  d["center_init"] = s.precond.squash.center_init;
  d["squash_x"] = s.precond.squash.x;
  d["squash_eps"] = s.precond.squash.eps;
  d["hypergrad_retention"] = s.precond.hypergrad.has_retention;
  d["qk_l2norm"] = s.qk_l2norm;
  d["l2norm_eps"] = s.l2norm_eps;
  d["scale"] = s.scale ? py::object(py::float_(*s.scale)) : py::object(py::none());
  d["heads_qk"] = s.heads_qk;
  d["gva_ratio"] = s.gva_ratio;
  d["key_dims"] = m.key_dims;
  d["value_dims"] = m.value_dims;
  py::list dtypes;
  for (DType t : m.input_dtypes) dtypes.append(toString(t));
  d["input_dtypes"] = dtypes;
  d["initial_state"] = m.io.initial_state;
  d["final_state"] = m.io.final_state;
  d["initial_precond_state"] = m.io.initial_precond_state;
  d["final_precond_state"] = m.io.final_precond_state;
  d["varlen"] = m.io.varlen;
  d["has_forward"] = m.has_forward;
  d["has_decode"] = m.has_decode;
  // Householder steps per token (solve.steps): k, v and beta carry this many rows per token
  d["steps"] = m.features.steps;
  // the context-parallel forward (and the sequence-parallel state pass) need the segment kernels
  d["segment_kernels"] = !m.launch.forward_segmented.empty();
  // the runtime's one rule (contextParallelSupport): whether cp_group= is accepted, why not, and whether the
  // preconditioner round (phase 0) runs first
  const ContextParallelSupport cp = contextParallelSupport(m);
  d["context_parallel"] = cp.supported;
  d["context_parallel_reason"] = cp.reason;
  d["context_parallel_precond"] = cp.precond_round;
  // the round's map: K×K per key head (hypergrad_ogd) or per channel (ema_sq_squash); sizes phase 0's slot
  d["context_parallel_precond_full_map"] = cp.precond_full_map;
  d["default_config"] = toString(m.default_config);
  return d;
}

}  // namespace dgps::python
