#include "dgps/runtime/DeviceTensor.h"

#include "dgps/runtime/Error.h"

namespace dgps {

DeviceTensor::DeviceTensor(ScalarType dtype, std::vector<std::int64_t> shape, int device)
    : dtype_(dtype), shape_(std::move(shape)) {
  Tensor probe(dtype_, {0});  // validates the dtype
  std::int64_t n = 1;
  for (std::int64_t d : shape_) {
    if (d < 0) throw RuntimeError(RuntimeErrorCode::InvalidArgument, "DeviceTensor: negative dim in " + shapeToString(shape_));
    n *= d;
  }
  buffer_ = DeviceBuffer(device, std::size_t(n) * elementSize(dtype_));
}

DeviceTensor DeviceTensor::upload(const Tensor& host, int device) {
  DeviceTensor t(host.dtype(), host.shape(), device);
  t.buffer_.upload(host.data(), host.nbytes());
  return t;
}

Tensor DeviceTensor::download() const {
  std::vector<std::uint8_t> bytes(buffer_.size());
  buffer_.download(bytes.data(), bytes.size());
  return Tensor::fromBytes(dtype_, shape_, std::move(bytes));
}

void DeviceTensor::poison() {
  if (buffer_.size() == 0) return;
  DeviceContextGuard guard(buffer_.device());
  const CudaDriver& d = cudaDriver();
  std::uint32_t pattern = 0xffffffffu;
  switch (dtype_) {
    case ScalarType::F32: pattern = 0x7fc00000u; break;
    case ScalarType::BF16: pattern = 0x7fc07fc0u; break;
    case ScalarType::F16: pattern = 0x7e007e00u; break;
    case ScalarType::F64: pattern = 0x7ff80000u; break;  // every 32-bit half: NaN whichever word is high
    default: break;
  }
  if (dtype_ == ScalarType::F64) {
    // 0x7ff800007ff80000 is a NaN too (exponent all ones, mantissa non-zero).
    checkCuda(d.cuMemsetD32Async(buffer_.ptr(), pattern, buffer_.size() / 4, nullptr), "cuMemsetD32Async(poison)");
  } else if (buffer_.size() % 4 == 0) {
    checkCuda(d.cuMemsetD32Async(buffer_.ptr(), pattern, buffer_.size() / 4, nullptr), "cuMemsetD32Async(poison)");
  } else {
    checkCuda(d.cuMemsetD8(buffer_.ptr(), 0xff, buffer_.size()), "cuMemsetD8(poison)");  // odd-sized 16-bit: 0xffff is NaN
  }
  checkCuda(d.cuCtxSynchronize(), "cuCtxSynchronize(poison)");
}

void DeviceTensor::zero() {
  if (buffer_.size() == 0) return;
  DeviceContextGuard guard(buffer_.device());
  checkCuda(cudaDriver().cuMemsetD8(buffer_.ptr(), 0, buffer_.size()), "cuMemsetD8(zero)");
}

TensorView DeviceTensor::view() const { return TensorView(buffer_.data(), dtype_, shape_, buffer_.device()); }

}  // namespace dgps
