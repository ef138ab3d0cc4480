#include "BenchInputs.h"

#include <cmath>
#include <cstring>

#include "dgps/dsl/InputGen.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace bench {
namespace {

// The largest divisor of n that is <= limit (at least 1).
std::int64_t largestDivisorAtMost(std::int64_t n, std::int64_t limit) {
  if (limit >= n) return n;
  for (std::int64_t d = limit; d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Records the full shape of every generated tensor from the slots at the full problem shape.
HostInputs withFullShapes(const Spec& spec, const ReferenceProblem& full, TensorMap tiles,
                          const std::map<std::string, std::string>& renames) {
  HostInputs h;
  for (const TensorSlot& slot : referenceInputSlots(spec, full)) {
    auto it = tiles.find(slot.name);
    if (it == tiles.end()) continue;
    auto r = renames.find(slot.name);
    const std::string name = r == renames.end() ? slot.name : r->second;
    h.full_shapes[name] = slot.shape;
    h.tiles.emplace(name, std::move(it->second));
  }
  return h;
}

}  // namespace

HostInputs forwardHostInputs(const Spec& spec, const ReferenceProblem& full, std::int64_t tile_tokens, std::uint64_t seed) {
  ReferenceProblem tile = full;
  if (tile_tokens > 0 && full.batch * full.seq_len > tile_tokens) {
    tile.batch = 1;
    tile.seq_len = largestDivisorAtMost(full.seq_len, tile_tokens);
  }
  InputGenOptions opt;
  opt.initial_state = false;
  opt.initial_precond_state = false;
  return withFullShapes(spec, full, generateInputs(spec, tile, seed, ScalarType::BF16, opt), {});
}

HostInputs decodeHostInputs(const Spec& spec, const ReferenceProblem& full, std::int64_t tile_batch, std::uint64_t seed) {
  // The decode step always reads a state, whatever the spec says about the forward's optional
  // initial state: ask the generator for one (and for the preconditioner state).
  Spec s = spec;
  s.initial_state = true;
  s.initial_precond_state = hasPrecond(spec);
  ReferenceProblem one = full;
  one.seq_len = 1;
  ReferenceProblem tile = one;
  if (tile_batch > 0) tile.batch = largestDivisorAtMost(one.batch, tile_batch);
  InputGenOptions opt;
  opt.initial_state = true;
  opt.initial_precond_state = true;
  return withFullShapes(s, one, generateInputs(s, tile, seed, ScalarType::BF16, opt),
                        {{"initial_state", "state"}, {"initial_precond_state", "precond_state"}});
}

void DeviceSet::add(const std::string& name, DeviceTensor tensor) {
  tensors_.erase(name);
  tensors_.emplace(name, std::move(tensor));
}

DeviceTensor& DeviceSet::at(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw RuntimeError(RuntimeErrorCode::InvalidArgument, "dgps-bench: no tensor '" + name + "'");
  return it->second;
}

const DeviceTensor& DeviceSet::at(const std::string& name) const { return const_cast<DeviceSet*>(this)->at(name); }

TensorView DeviceSet::view(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? TensorView() : it->second.view();
}

DeviceSet uploadInputs(const HostInputs& host, int device) {
  DeviceSet set;
  const CudaDriver& d = cudaDriver();
  for (const auto& kv : host.tiles) {
    const Tensor& tile = kv.second;
    const std::vector<std::int64_t>& shape = host.full_shapes.at(kv.first);
    const std::int64_t full_n = numel(shape);
    if (tile.numel() == 0 || full_n % tile.numel() != 0) {
      throw DataError("dgps-bench: tensor '" + kv.first + "': a tile of " + tile.shapeString() +
                      " does not divide its full shape " + shapeToString(shape));
    }
    DeviceTensor t(tile.dtype(), shape, device);
    const std::int64_t repeats = full_n / tile.numel();
    const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(t.data());
    for (std::int64_t r = 0; r < repeats; ++r) {
      checkCuda(d.cuMemcpyHtoD(base + CUdeviceptr(r) * tile.nbytes(), tile.data(), tile.nbytes()),
                "cuMemcpyHtoD(" + kv.first + ")");
    }
    set.add(kv.first, std::move(t));
  }
  return set;
}

void addOutput(DeviceSet& set, const std::string& name, ScalarType dtype, std::vector<std::int64_t> shape, int device) {
  set.add(name, DeviceTensor(dtype, std::move(shape), device));
}

void addWorkspace(DeviceSet& set, std::size_t bytes, int device) {
  if (bytes == 0) return;
  set.add("workspace", DeviceTensor(ScalarType::I64, {std::int64_t((bytes + 7) / 8)}, device));
}

ForwardTensors forwardTensors(const DeviceSet& s) {
  ForwardTensors t;
  t.q = s.view("q");
  t.k = s.view("k");
  t.v = s.view("v");
  t.g = s.view("g");
  t.beta = s.view("beta");
  t.precond_g = s.view("precond_g");
  t.precond_beta = s.view("precond_beta");
  t.precond_center = s.view("precond_center");
  t.o = s.view("o");
  t.workspace = s.view("workspace");
  return t;
}

DecodeTensors decodeTensors(const DeviceSet& s) {
  DecodeTensors t;
  t.q = s.view("q");
  t.k = s.view("k");
  t.v = s.view("v");
  t.g = s.view("g");
  t.beta = s.view("beta");
  t.precond_g = s.view("precond_g");
  t.precond_beta = s.view("precond_beta");
  t.precond_center = s.view("precond_center");
  t.state = s.view("state");
  t.precond_state = s.view("precond_state");
  t.o = s.view("o");
  return t;
}

std::int64_t countNonFinite(const Tensor& t) {
  std::int64_t bad = 0;
  const std::int64_t n = t.numel();
  const std::uint8_t* p = t.data();
  switch (t.dtype()) {
    case ScalarType::BF16:
    case ScalarType::F16: {
      const std::uint16_t exp_mask = t.dtype() == ScalarType::BF16 ? 0x7f80 : 0x7c00;
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        bad += (bits & exp_mask) == exp_mask;
      }
      break;
    }
    case ScalarType::F32:
      for (std::int64_t i = 0; i < n; ++i) {
        float x;
        std::memcpy(&x, p + 4 * i, 4);
        bad += !std::isfinite(x);
      }
      break;
    case ScalarType::F64:
      for (std::int64_t i = 0; i < n; ++i) {
        double x;
        std::memcpy(&x, p + 8 * i, 8);
        bad += !std::isfinite(x);
      }
      break;
    default:
      break;
  }
  return bad;
}

}  // namespace bench
}  // namespace dgps
