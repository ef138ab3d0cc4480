#include "TensorArgs.h"

#include <cstdint>

#include "dgps/runtime/Error.h"

namespace py = pybind11;

namespace dgps::python {
namespace {

[[noreturn]] void bad(const char* call, const char* name, const std::string& what) {
  throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                     std::string(call) + ": tensor '" + name + "': " + what);
}

constexpr const char* kForwardSlots[] = {"q",          "k",
                                         "v",          "g",
                                         "beta",       "precond_g",
                                         "precond_beta", "precond_center",
                                         "initial_state", "initial_precond_state",
                                         "cu_seqlens", "o",
                                         "final_state", "final_precond_state",
                                         "workspace"};
constexpr const char* kDecodeSlots[] = {"q",         "k",         "v",          "g",
                                        "beta",      "precond_g", "precond_beta", "precond_center",
                                        "state",     "precond_state", "o"};

template <std::size_t N>
void checkCount(const py::sequence& views, const char* const (&)[N], const char* call) {
  if (views.size() != N) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string(call) + ": expected " + std::to_string(N) + " tensor slots, got " +
                           std::to_string(views.size()));
  }
}

}  // namespace

ScalarType parseScalarType(const std::string& name, const char* call, const char* tensor) {
  if (name == "bf16") return ScalarType::BF16;
  if (name == "f16") return ScalarType::F16;
  if (name == "f32") return ScalarType::F32;
  if (name == "f64") return ScalarType::F64;
  if (name == "i32") return ScalarType::I32;
  if (name == "i64") return ScalarType::I64;
  bad(call, tensor, "unknown dtype '" + name + "' (expected bf16, f16, f32, f64, i32 or i64)");
}

TensorView toView(const py::handle& obj, const char* call, const char* name) {
  if (obj.is_none()) return {};
  if (!py::isinstance<py::tuple>(obj) || py::len(obj) != 4) {
    bad(call, name, "expected a view tuple (data_ptr, dtype, shape, device) or None");
  }
  py::tuple t = py::reinterpret_borrow<py::tuple>(obj);
  TensorView v;
  v.data = reinterpret_cast<void*>(t[0].cast<std::uintptr_t>());
  v.dtype = parseScalarType(t[1].cast<std::string>(), call, name);
  for (py::handle d : t[2]) {
    const std::int64_t n = d.cast<std::int64_t>();
    if (n < 0) bad(call, name, "negative dimension " + std::to_string(n));
    v.shape.push_back(n);
  }
  v.device = t[3].cast<int>();
  return v;
}

ForwardTensors toForwardTensors(const py::sequence& views) {
  checkCount(views, kForwardSlots, "forward");
  ForwardTensors f;
  TensorView* slots[] = {&f.q,
                         &f.k,
                         &f.v,
                         &f.g,
                         &f.beta,
                         &f.precond_g,
                         &f.precond_beta,
                         &f.precond_center,
                         &f.initial_state,
                         &f.initial_precond_state,
                         &f.cu_seqlens,
                         &f.o,
                         &f.final_state,
                         &f.final_precond_state,
                         &f.workspace};
  for (std::size_t i = 0; i < std::size(slots); ++i) *slots[i] = toView(views[i], "forward", kForwardSlots[i]);
  return f;
}

DecodeTensors toDecodeTensors(const py::sequence& views) {
  checkCount(views, kDecodeSlots, "decode");
  DecodeTensors d;
  TensorView* slots[] = {&d.q,         &d.k,         &d.v,          &d.g,
                         &d.beta,      &d.precond_g, &d.precond_beta, &d.precond_center,
                         &d.state,     &d.precond_state, &d.o};
  for (std::size_t i = 0; i < std::size(slots); ++i) *slots[i] = toView(views[i], "decode", kDecodeSlots[i]);
  return d;
}

}  // namespace dgps::python
