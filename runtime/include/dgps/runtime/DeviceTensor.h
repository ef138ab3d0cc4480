// A device tensor that owns its memory: host Tensor <-> GPU copies for tools, tests and the example
// app. Not a compute library; production callers pass their framework's memory as TensorView.
#pragma once

#include <cstdint>
#include <vector>

#include "dgps/dsl/Tensor.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/TensorView.h"

namespace dgps {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  /// Uninitialised memory of `dtype` and `shape` on `device` (cuMemAlloc: 256-byte aligned).
  DeviceTensor(ScalarType dtype, std::vector<std::int64_t> shape, int device);
  /// A copy of `host` on `device`.
  static DeviceTensor upload(const Tensor& host, int device);

  /// Copies the contents back (synchronous).
  Tensor download() const;
  /// Fills with NaN (float dtypes; f16/bf16 quiet NaN) or all-ones bits (integers), so an element a
  /// kernel fails to write is visible (tests poison outputs before every run).
  void poison();
  /// Fills with zeros.
  void zero();

  TensorView view() const;
  ScalarType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t nbytes() const { return buffer_.size(); }
  void* data() const { return buffer_.data(); }
  int device() const { return buffer_.device(); }

 private:
  ScalarType dtype_ = ScalarType::F32;
  std::vector<std::int64_t> shape_;
  DeviceBuffer buffer_;
};

}  // namespace dgps
