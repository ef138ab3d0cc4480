// dgps._dgps: the thin binding of the C++ runtime that the Python package (python/dgps) drives.
//
//   Package(path)                 Package::open; .info() describes the spec and manifest as a dict
//   Runtime(cache_dir, check_pointers, tune_mode)
//     .forward(pkg, views[15], stream, config)       Runtime::forward on the CUstream `stream` (an int)
//     .decode(pkg, views[11], stream)                Runtime::decode
//     .forward_workspace_bytes(pkg, views[15], config) bytes of scratch forward needs for this call
//   reference(pkg, inputs)        the float64 reference (dsl/Reference.h) on host bytes
//   tune(pkg, ...)                tune::tunePackage (runtime/include/dgps/runtime/Tune.h)
//   CpPlan, cp_*, Runtime.cp_*    one rank's context-parallel forward (ContextParallelBinding.h)
// Views are tuples (data_ptr, dtype, shape, device) (TensorArgs.h). Errors: dgps.DgpsError (a
// RuntimeError) carrying the runtime's message, or dgps.InvalidArgument (also a ValueError) when the
// runtime says nothing was launched because an argument was wrong.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "ContextParallelBinding.h"
#include "Describe.h"
#include "PyRuntime.h"
#include "ReferenceBinding.h"
#include "TensorArgs.h"
#include "TuneBinding.h"
#include "dgps/dsl/Tensor.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tune/TuningResolver.h"

namespace py = pybind11;

namespace dgps::python {
namespace {

// The exception classes live as long as the process: raw references, never released, so nothing is
// decref'd after the interpreter has finalised (static py::object destructors would be).
PyObject* g_error = nullptr;    // dgps.DgpsError(RuntimeError)
PyObject* g_invalid = nullptr;  // dgps.InvalidArgument(DgpsError, ValueError)

void registerErrors(py::module_& m) {
  g_error = PyErr_NewException("dgps._dgps.DgpsError", PyExc_RuntimeError, nullptr);
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_invalid = PyErr_NewException("dgps._dgps.InvalidArgument", bases.ptr(), nullptr);
  if (!g_error || !g_invalid) throw py::error_already_set();
  m.attr("DgpsError") = py::handle(g_error);
  m.attr("InvalidArgument") = py::handle(g_invalid);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const RuntimeError& e) {
      // InvalidArgument: nothing was launched because an argument was wrong; also a ValueError.
      PyErr_SetString(e.code() == RuntimeErrorCode::InvalidArgument ? g_invalid : g_error, e.what());
    } catch (const DataError& e) {
      PyErr_SetString(g_invalid, e.what());
    }
  });
}

}  // namespace
}  // namespace dgps::python

PYBIND11_MODULE(_dgps, m) {
  using namespace dgps;
  using namespace dgps::python;
  m.doc() = "DGPS runtime binding (see python/dgps for the user API)";
  registerErrors(m);

  py::class_<Package>(m, "Package")
      .def(py::init([](const std::string& path) { return Package::open(path); }), py::arg("path"))
      .def_property_readonly("name", &Package::name)
      .def_property_readonly("directory", &Package::directory)
      .def("info", &describePackage, "the spec and manifest as a dict (Describe.h)");

  py::class_<PyRuntime> runtime(m, "Runtime");
  runtime
      .def(py::init<const std::string&, bool, const std::optional<std::string>&>(), py::arg("cache_dir") = "",
           py::arg("check_pointers") = true, py::arg("tune_mode") = py::none())
      .def("forward", &PyRuntime::forward, py::arg("package"), py::arg("views"), py::arg("stream"),
           py::arg("config") = py::none())
      .def("decode", &PyRuntime::decode, py::arg("package"), py::arg("views"), py::arg("stream"))
      .def("forward_workspace_bytes", &PyRuntime::forwardWorkspaceBytes, py::arg("package"), py::arg("views"),
           py::arg("config") = py::none())
      .def("validate_forward", &PyRuntime::validateForwardViews, py::arg("package"), py::arg("views"),
           "Validation.h's checks only (reads the views, launches nothing)")
      .def("validate_decode", &PyRuntime::validateDecodeViews, py::arg("package"), py::arg("views"))
      .def("resolve_config", &PyRuntime::resolveConfig, py::arg("package"), py::arg("views"));
  registerContextParallel(m);
  registerContextParallelMethods(runtime);

  m.def("reference", &runReferenceOnBytes, py::arg("package"), py::arg("inputs"),
        "float64 reference: inputs {name: (dtype, shape, bytes)} -> outputs {name: (shape, f64 bytes)}");
  m.def("generate_inputs", &generateInputsBytes, py::arg("package"), py::arg("batch"), py::arg("seq_len"),
        py::arg("heads_qk"), py::arg("heads_v"), py::arg("key_dim"), py::arg("value_dim"), py::arg("seed"),
        py::arg("dtype") = "bf16", py::arg("cu_seqlens") = std::vector<std::int64_t>{},
        py::arg("initial_state") = true, "random inputs for the spec (dsl/InputGen.h)");
  m.def("tune", &tuneForward, py::arg("package"), py::arg("batch"), py::arg("seq_len"), py::arg("heads_qk"),
        py::arg("heads_v"), py::arg("key_dim"), py::arg("value_dim"), py::arg("dtype") = "bf16",
        py::arg("device") = 0, py::arg("force") = false, py::arg("db_path") = "", py::arg("cache_dir") = "",
        py::arg("isolate") = true);
}
