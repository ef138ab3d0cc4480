#include "ReferenceBinding.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "TensorArgs.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"

namespace py = pybind11;

namespace dgps::python {
namespace {

Tensor toHostTensor(const std::string& name, const py::handle& entry) {
  if (!py::isinstance<py::tuple>(entry) || py::len(entry) != 3) {
    throw DataError("reference: input '" + name + "': expected (dtype, shape, bytes)");
  }
  py::tuple t = py::reinterpret_borrow<py::tuple>(entry);
  const ScalarType dtype = parseScalarType(t[0].cast<std::string>(), "reference", name.c_str());
  std::vector<std::int64_t> shape = t[1].cast<std::vector<std::int64_t>>();
  std::string raw = t[2].cast<std::string>();  // bytes -> std::string keeps every byte
  std::vector<std::uint8_t> bytes(raw.begin(), raw.end());
  return Tensor::fromBytes(dtype, std::move(shape), std::move(bytes));  // checks the byte count
}

py::tuple toPython(const Tensor& t) {
  return py::make_tuple(t.shape(), py::bytes(reinterpret_cast<const char*>(t.data()), t.nbytes()));
}

py::tuple toPythonTyped(const Tensor& t) {
  static const char* names[] = {"f32", "f64", "bf16", "f16", "i32", "i64"};  // ScalarType order
  return py::make_tuple(names[static_cast<int>(t.dtype())], t.shape(),
                        py::bytes(reinterpret_cast<const char*>(t.data()), t.nbytes()));
}

}  // namespace

py::dict runReferenceOnBytes(const Package& package, const py::dict& inputs) {
  ReferenceInputs in;
  for (auto item : inputs) {
    const std::string name = item.first.cast<std::string>();
    in[name] = toHostTensor(name, item.second);
  }
  ReferenceOutputs out;
  {
    py::gil_scoped_release unlocked;
    out = runReference(package.spec(), in);
  }
  py::dict result;
  for (const auto& [name, tensor] : out.toMap()) result[py::str(name)] = toPython(tensor);
  return result;
}

}  // namespace dgps::python

namespace dgps::python {

py::dict generateInputsBytes(const Package& package, std::int64_t batch, std::int64_t seq_len, std::int64_t heads_qk,
                             std::int64_t heads_v, std::int64_t key_dim, std::int64_t value_dim, std::uint64_t seed,
                             const std::string& dtype, const std::vector<std::int64_t>& cu_seqlens,
                             bool initial_state) {
  ReferenceProblem shape;
  shape.batch = batch;
  shape.seq_len = seq_len;
  shape.heads_qk = heads_qk;
  shape.heads_v = heads_v;
  shape.key_dim = key_dim;
  shape.value_dim = value_dim;
  shape.cu_seqlens = cu_seqlens;
  InputGenOptions opts;
  opts.initial_state = opts.initial_precond_state = initial_state;
  const ReferenceInputs in =
      generateInputs(package.spec(), shape, seed, parseScalarType(dtype, "generate_inputs", "q"), opts);
  py::dict out;
  for (const auto& [name, tensor] : in) out[py::str(name)] = toPythonTyped(tensor);
  return out;
}

}  // namespace dgps::python
