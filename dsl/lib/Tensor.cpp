#include "dgps/dsl/Tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

// Tensor bytes are stored little-endian (the safetensors byte order) and read with memcpy.
#if defined(__BYTE_ORDER__) && (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
#error "dgps::Tensor assumes a little-endian host"
#endif

namespace dgps {

const char* toString(ScalarType t) {
  switch (t) {
    case ScalarType::F32: return "f32";
    case ScalarType::F64: return "f64";
    case ScalarType::BF16: return "bf16";
    case ScalarType::F16: return "f16";
    case ScalarType::I32: return "i32";
    case ScalarType::I64: return "i64";
  }
  return "?";
}

const char* safetensorsName(ScalarType t) {
  switch (t) {
    case ScalarType::F32: return "F32";
    case ScalarType::F64: return "F64";
    case ScalarType::BF16: return "BF16";
    case ScalarType::F16: return "F16";
    case ScalarType::I32: return "I32";
    case ScalarType::I64: return "I64";
  }
  return "?";
}

bool scalarTypeFromSafetensors(const std::string& name, ScalarType& out) {
  static const ScalarType all[] = {ScalarType::F32,  ScalarType::F64, ScalarType::BF16,
                                   ScalarType::F16,  ScalarType::I32, ScalarType::I64};
  for (ScalarType t : all) {
    if (name == safetensorsName(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

std::size_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::F32: return 4;
    case ScalarType::F64: return 8;
    case ScalarType::BF16: return 2;
    case ScalarType::F16: return 2;
    case ScalarType::I32: return 4;
    case ScalarType::I64: return 8;
  }
  return 0;
}

bool isFloating(ScalarType t) { return t != ScalarType::I32 && t != ScalarType::I64; }

ScalarType toScalarType(DType d) {
  switch (d) {
    case DType::F32: return ScalarType::F32;
    case DType::F16: return ScalarType::F16;
    case DType::BF16: return ScalarType::BF16;
  }
  return ScalarType::F32;
}

namespace {

// IEEE-754 binary format with `expBits` exponent and `manBits` stored mantissa bits (bf16: 8/7, f16: 5/10).
// Rounds |x| to the format's grid directly from double: the quantum at x's binade is a power of two, so
// x / quantum is exact and std::nearbyint (default rounding mode) rounds it half-to-even.
std::uint32_t encodeBinary(double x, int expBits, int manBits) {
  const std::uint32_t signBit = std::signbit(x) ? (1u << (expBits + manBits)) : 0u;
  const std::uint32_t expAllOnes = ((1u << expBits) - 1u) << manBits;
  if (std::isnan(x)) return signBit | expAllOnes | (1u << (manBits - 1));  // quiet NaN
  if (std::isinf(x)) return signBit | expAllOnes;
  const double a = std::fabs(x);
  if (a == 0.0) return signBit;
  const int bias = (1 << (expBits - 1)) - 1;
  const int emin = 1 - bias;
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;      // a = 1.m * 2^e
  if (e < emin) {
    // Subnormal range: quantum 2^(emin - manBits). A round-up to 2^manBits yields the smallest
    // normal, which the bit pattern (exponent field 1, mantissa 0) encodes naturally.
    const double q = std::nearbyint(std::ldexp(a, manBits - emin));
    return signBit | static_cast<std::uint32_t>(q);
  }
  double q = std::nearbyint(std::ldexp(a, manBits - e));  // in [2^manBits, 2^(manBits+1)]
  if (q == std::ldexp(1.0, manBits + 1)) {
    q = std::ldexp(1.0, manBits);
    ++e;
  }
  if (e > bias) return signBit | expAllOnes;  // overflow to infinity
  const std::uint32_t mant = static_cast<std::uint32_t>(q) - (1u << manBits);
  return signBit | (static_cast<std::uint32_t>(e + bias) << manBits) | mant;
}

double decodeBinary(std::uint32_t bits, int expBits, int manBits) {
  const bool neg = (bits >> (expBits + manBits)) & 1u;
  const std::uint32_t expField = (bits >> manBits) & ((1u << expBits) - 1u);
  const std::uint32_t mant = bits & ((1u << manBits) - 1u);
  const int bias = (1 << (expBits - 1)) - 1;
  double v;
  if (expField == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias - manBits);
  } else if (expField == (1u << expBits) - 1u) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << manBits)), static_cast<int>(expField) - bias - manBits);
  }
  return neg ? -v : v;
}

std::int64_t checkedNumel(const std::vector<std::int64_t>& shape, ScalarType dtype) {
  const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 8;
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw DataError("tensor shape " + shapeToString(shape) + " has a negative dimension");
    if (d != 0 && n > limit / d) throw DataError("tensor shape " + shapeToString(shape) + " is too large");
    n *= d;
  }
  (void)dtype;
  return n;
}

template <typename T>
T loadAs(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void storeAs(std::uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <typename I>
I saturatingRound(double value) {
  if (std::isnan(value)) return 0;
  const double r = std::nearbyint(value);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

}  // namespace

std::uint16_t doubleToBf16Bits(double x) { return static_cast<std::uint16_t>(encodeBinary(x, 8, 7)); }
std::uint16_t doubleToF16Bits(double x) { return static_cast<std::uint16_t>(encodeBinary(x, 5, 10)); }
// bf16 is the upper half of an f32, so widening is exact bit placement (NaN payloads included).
double bf16BitsToDouble(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// All 65536 f16 values, decoded once (decoding sits on the hot path of Tensor::get).
double f16BitsToDouble(std::uint16_t b) {
  static const std::vector<double> table = [] {
    std::vector<double> t(1u << 16);
    for (std::uint32_t i = 0; i < t.size(); ++i) t[i] = decodeBinary(i, 5, 10);
    return t;
  }();
  return table[b];
}

std::string shapeToString(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Tensor::Tensor(ScalarType dtype, std::vector<std::int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = checkedNumel(shape_, dtype_);
  bytes_.assign(static_cast<std::size_t>(numel_) * elementSize(dtype_), 0);
}

Tensor Tensor::fromDoubles(ScalarType dtype, std::vector<std::int64_t> shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != t.numel_) {
    throw DataError("Tensor::fromDoubles: shape " + t.shapeString() + " holds " + std::to_string(t.numel_) +
                    " elements but " + std::to_string(values.size()) + " values were given");
  }
  for (std::int64_t i = 0; i < t.numel_; ++i) t.set(i, values[static_cast<std::size_t>(i)]);
  return t;
}

Tensor Tensor::fromBytes(ScalarType dtype, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = checkedNumel(t.shape_, dtype);
  const std::size_t want = static_cast<std::size_t>(t.numel_) * elementSize(dtype);
  if (bytes.size() != want) {
    throw DataError("Tensor::fromBytes: " + std::string(toString(dtype)) + " shape " + t.shapeString() + " needs " +
                    std::to_string(want) + " bytes but " + std::to_string(bytes.size()) + " were given");
  }
  t.bytes_ = std::move(bytes);
  return t;
}

double Tensor::get(std::int64_t flat) const {
  const std::uint8_t* p = bytes_.data() + static_cast<std::size_t>(flat) * elementSize(dtype_);
  switch (dtype_) {
    case ScalarType::F32: return loadAs<float>(p);
    case ScalarType::F64: return loadAs<double>(p);
    case ScalarType::BF16: return bf16BitsToDouble(loadAs<std::uint16_t>(p));
    case ScalarType::F16: return f16BitsToDouble(loadAs<std::uint16_t>(p));
    case ScalarType::I32: return loadAs<std::int32_t>(p);
    case ScalarType::I64: return static_cast<double>(loadAs<std::int64_t>(p));
  }
  return 0.0;
}

void Tensor::set(std::int64_t flat, double value) {
  std::uint8_t* p = bytes_.data() + static_cast<std::size_t>(flat) * elementSize(dtype_);
  switch (dtype_) {
    case ScalarType::F32: storeAs<float>(p, static_cast<float>(value)); return;
    case ScalarType::F64: storeAs<double>(p, value); return;
    case ScalarType::BF16: storeAs<std::uint16_t>(p, doubleToBf16Bits(value)); return;
    case ScalarType::F16: storeAs<std::uint16_t>(p, doubleToF16Bits(value)); return;
    case ScalarType::I32: storeAs<std::int32_t>(p, saturatingRound<std::int32_t>(value)); return;
    case ScalarType::I64: storeAs<std::int64_t>(p, saturatingRound<std::int64_t>(value)); return;
  }
}

std::int64_t Tensor::getInt(std::int64_t flat) const {
  const std::uint8_t* p = bytes_.data() + static_cast<std::size_t>(flat) * elementSize(dtype_);
  switch (dtype_) {
    case ScalarType::I32: return loadAs<std::int32_t>(p);
    case ScalarType::I64: return loadAs<std::int64_t>(p);
    default: {
      const double v = get(flat);
      if (std::isnan(v)) return 0;
      return saturatingRound<std::int64_t>(std::trunc(v));
    }
  }
}

void Tensor::setInt(std::int64_t flat, std::int64_t value) {
  std::uint8_t* p = bytes_.data() + static_cast<std::size_t>(flat) * elementSize(dtype_);
  switch (dtype_) {
    case ScalarType::I32: storeAs<std::int32_t>(p, saturatingRound<std::int32_t>(static_cast<double>(value))); return;
    case ScalarType::I64: storeAs<std::int64_t>(p, value); return;
    default: set(flat, static_cast<double>(value)); return;
  }
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> out(static_cast<std::size_t>(numel_));
  for (std::int64_t i = 0; i < numel_; ++i) out[static_cast<std::size_t>(i)] = get(i);
  return out;
}

Tensor Tensor::to(ScalarType dtype) const {
  Tensor t(dtype, shape_);
  const bool ints = !isFloating(dtype_) && !isFloating(dtype);
  for (std::int64_t i = 0; i < numel_; ++i) {
    if (ints) {
      t.setInt(i, getInt(i));
    } else {
      t.set(i, get(i));
    }
  }
  return t;
}

std::string Tensor::shapeString() const { return shapeToString(shape_); }

}  // namespace dgps
