// A small host tensor: element type, shape and contiguous row-major bytes, with element accessors that
// convert to and from double. It is the currency of the float64 reference (Reference.h), the input
// generator (InputGen.h) and safetensors I/O (Safetensors.h); it is not a compute library.
//
// Conversions to narrow float types round to nearest, ties to even, directly from double (no double
// rounding through float), produce subnormals, overflow to ±inf, and keep NaN as a quiet NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dgps/dsl/Spec.h"

namespace dgps {

/// Every error raised by Tensor, Safetensors, Reference and InputGen: a bad tensor, a corrupt file, an
/// input that breaks the spec's contract. The message names the file or tensor, what was expected and
/// what came. Command entry points (runReferenceCommand, runDemoCommand) catch it and return 1.
class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& what) : std::runtime_error(what) {}
};

/// Element types a Tensor can hold (the safetensors names are BF16, F16, F32, F64, I32, I64).
enum class ScalarType { F32, F64, BF16, F16, I32, I64 };

const char* toString(ScalarType);            ///< "f32", "f64", "bf16", "f16", "i32", "i64".
const char* safetensorsName(ScalarType);     ///< "F32", "F64", "BF16", "F16", "I32", "I64".
/// Parses a safetensors dtype name; returns false (and leaves `out` alone) for any other string.
bool scalarTypeFromSafetensors(const std::string& name, ScalarType& out);
std::size_t elementSize(ScalarType);
bool isFloating(ScalarType);
/// The Tensor element type used to store values of a spec dtype.
ScalarType toScalarType(DType);

// Bit-exact conversions of one value (round to nearest even; subnormals, ±inf and NaN handled).
std::uint16_t doubleToBf16Bits(double);
std::uint16_t doubleToF16Bits(double);
double bf16BitsToDouble(std::uint16_t);
double f16BitsToDouble(std::uint16_t);

class Tensor {
 public:
  Tensor() = default;
  /// A zero-filled tensor. Throws DataError for a negative dimension or a byte size that overflows.
  Tensor(ScalarType dtype, std::vector<std::int64_t> shape);
  /// A tensor holding `values` (row-major) rounded to `dtype`; values.size() must equal the element count.
  static Tensor fromDoubles(ScalarType dtype, std::vector<std::int64_t> shape, const std::vector<double>& values);
  /// A tensor taking ownership of raw little-endian bytes; bytes.size() must equal numel * elementSize.
  static Tensor fromBytes(ScalarType dtype, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes);

  ScalarType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return bytes_.size(); }
  std::uint8_t* data() { return bytes_.data(); }
  const std::uint8_t* data() const { return bytes_.data(); }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

  /// Element `flat` (row-major index) as double; i64 beyond ±2^53 loses precision (use getInt).
  double get(std::int64_t flat) const;
  /// Stores `value` rounded to the element type (integers: rounded to nearest, saturating).
  void set(std::int64_t flat, double value);
  /// Integer element access, exact for I32/I64; floating types are truncated toward zero.
  std::int64_t getInt(std::int64_t flat) const;
  void setInt(std::int64_t flat, std::int64_t value);

  std::vector<double> toDoubles() const;
  /// The same values in another element type (rounded as `set` does).
  Tensor to(ScalarType dtype) const;
  /// "[2, 3, 4]".
  std::string shapeString() const;

 private:
  ScalarType dtype_ = ScalarType::F32;
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 1;
  std::vector<std::uint8_t> bytes_;
};

/// "[2, 3, 4]" for any shape vector.
std::string shapeToString(const std::vector<std::int64_t>& shape);

/// Named tensors, ordered by name (safetensors files, reference inputs and outputs).
using TensorMap = std::map<std::string, Tensor>;

}  // namespace dgps
