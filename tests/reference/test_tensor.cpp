// Tensor element conversions: bf16/f16 round-to-nearest-even from double, subnormals, overflow, NaN,
// checked against known bit patterns and against independent conversions (the f32 bit trick for bf16,
// the compiler's _Float16 for f16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "TestUtil.h"

namespace dgps::test {
namespace {

std::uint32_t floatBits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// bf16 of a (non-NaN) float by the classic integer rounding trick: an independent algorithm.
std::uint16_t bf16ViaFloatTrick(float f) {
  const std::uint32_t u = floatBits(f);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

TEST(TensorConversion, Bf16KnownValues) {
  EXPECT_EQ(doubleToBf16Bits(1.0), 0x3F80);
  EXPECT_EQ(doubleToBf16Bits(-2.0), 0xC000);
  EXPECT_EQ(doubleToBf16Bits(0.0), 0x0000);
  EXPECT_EQ(doubleToBf16Bits(-0.0), 0x8000);
  EXPECT_EQ(doubleToBf16Bits(1.0 + std::ldexp(1.0, -8)), 0x3F80);      // tie → even (down)
  EXPECT_EQ(doubleToBf16Bits(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);  // tie → even (up)
  EXPECT_EQ(doubleToBf16Bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3F81);  // above tie
  // Direct rounding: via float the 2^-30 would be lost and the tie would round down to 0x3F80.
  EXPECT_EQ(doubleToBf16Bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)), 0x3F81);
  EXPECT_EQ(doubleToBf16Bits(INFINITY), 0x7F80);
  EXPECT_EQ(doubleToBf16Bits(-INFINITY), 0xFF80);
  EXPECT_EQ(doubleToBf16Bits(1e39), 0x7F80);                      // beyond max bf16 → inf
  EXPECT_EQ(doubleToBf16Bits(3.3895313892515355e38), 0x7F7F);     // max finite bf16
  EXPECT_EQ(doubleToBf16Bits(std::ldexp(1.0, -133)), 0x0001);     // smallest subnormal
  EXPECT_EQ(doubleToBf16Bits(std::ldexp(1.0, -134)), 0x0000);     // half of it: tie → even 0
  EXPECT_EQ(doubleToBf16Bits(std::ldexp(3.0, -135)), 0x0001);     // 0.75 of it → 1
  EXPECT_EQ(doubleToBf16Bits(std::ldexp(127.5, -133)), 0x0080);   // rounds up into the smallest normal
  const std::uint16_t nan = doubleToBf16Bits(std::nan(""));
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_TRUE(std::isnan(bf16BitsToDouble(nan)));
}

TEST(TensorConversion, F16KnownValues) {
  EXPECT_EQ(doubleToF16Bits(1.0), 0x3C00);
  EXPECT_EQ(doubleToF16Bits(-1.5), 0xBE00);
  EXPECT_EQ(doubleToF16Bits(65504.0), 0x7BFF);
  EXPECT_EQ(doubleToF16Bits(65519.99), 0x7BFF);
  EXPECT_EQ(doubleToF16Bits(65520.0), 0x7C00);  // tie between max and 2^16 → even → inf
  EXPECT_EQ(doubleToF16Bits(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(doubleToF16Bits(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(doubleToF16Bits(std::ldexp(3.0, -25)), 0x0002);  // 1.5 quanta → tie → even 2
  EXPECT_EQ(doubleToF16Bits(std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(doubleToF16Bits(std::ldexp(1023.5, -24)), 0x0400);
  EXPECT_EQ(doubleToF16Bits(1.0 + std::ldexp(1.0, -11)), 0x3C00);
  EXPECT_EQ(doubleToF16Bits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(doubleToF16Bits(-0.0), 0x8000);
  EXPECT_EQ(doubleToF16Bits(-INFINITY), 0xFC00);
  EXPECT_TRUE(std::isnan(f16BitsToDouble(doubleToF16Bits(NAN))));
  EXPECT_EQ(f16BitsToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16BitsToDouble(0x7BFF), 65504.0);
  EXPECT_EQ(f16BitsToDouble(0x3555), 0.333251953125);
}

TEST(TensorConversion, EveryBitPatternRoundTrips) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const double vb = bf16BitsToDouble(bits), vf = f16BitsToDouble(bits);
    if (std::isnan(vb)) {
      EXPECT_TRUE(std::isnan(bf16BitsToDouble(doubleToBf16Bits(vb))));
    } else {
      ASSERT_EQ(doubleToBf16Bits(vb), bits) << std::hex << b;
      // bf16 is the top half of an f32.
      const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      ASSERT_EQ(static_cast<double>(f), vb) << std::hex << b;
    }
    if (std::isnan(vf)) {
      EXPECT_TRUE(std::isnan(f16BitsToDouble(doubleToF16Bits(vf))));
    } else {
      ASSERT_EQ(doubleToF16Bits(vf), bits) << std::hex << b;
    }
  }
}

TEST(TensorConversion, RandomValuesMatchIndependentConversions) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-150, 130);
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(mant(rng), ex(rng));
    const float xf = static_cast<float>(x);
    // For a float input, double→bf16 directly must equal the integer trick on that float.
    ASSERT_EQ(doubleToBf16Bits(xf), bf16ViaFloatTrick(xf)) << x;
    // Rounding is to nearest: no other bf16 neighbour is closer.
    const double r = bf16BitsToDouble(doubleToBf16Bits(x));
    if (std::isfinite(r) && r != 0.0) {
      const double up = bf16BitsToDouble(static_cast<std::uint16_t>(doubleToBf16Bits(x) + 1));
      const double dn = bf16BitsToDouble(static_cast<std::uint16_t>(doubleToBf16Bits(x) - 1));
      if (std::isfinite(up)) ASSERT_LE(std::fabs(r - x), std::fabs(up - x)) << x;
      if (std::isfinite(dn)) ASSERT_LE(std::fabs(r - x), std::fabs(dn - x)) << x;
    }
#if defined(__FLT16_MAX__) && !defined(__clang__)
    const _Float16 h = static_cast<_Float16>(x);
    std::uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(doubleToF16Bits(x), hb) << x;
#endif
  }
}

TEST(TensorAccess, EveryDtypeStoresAndLoads) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 3.0);
  for (ScalarType t : {ScalarType::F32, ScalarType::F64, ScalarType::BF16, ScalarType::F16, ScalarType::I32,
                       ScalarType::I64}) {
    SCOPED_TRACE(toString(t));
    std::vector<double> vals(24);
    for (double& v : vals) v = nd(rng);
    const Tensor x = Tensor::fromDoubles(t, {2, 3, 4}, vals);
    EXPECT_EQ(x.numel(), 24);
    EXPECT_EQ(x.nbytes(), 24 * elementSize(t));
    for (std::int64_t i = 0; i < 24; ++i) {
      double want = vals[i];
      switch (t) {
        case ScalarType::F32: want = static_cast<float>(want); break;
        case ScalarType::BF16: want = bf16BitsToDouble(doubleToBf16Bits(want)); break;
        case ScalarType::F16: want = f16BitsToDouble(doubleToF16Bits(want)); break;
        case ScalarType::I32:
        case ScalarType::I64: want = std::nearbyint(want); break;
        default: break;
      }
      ASSERT_EQ(x.get(i), want) << i;
    }
  }
  Tensor big(ScalarType::I64, {2});
  big.setInt(0, (std::int64_t{1} << 62) + 1);
  EXPECT_EQ(big.getInt(0), (std::int64_t{1} << 62) + 1);
  Tensor small(ScalarType::I32, {1});
  small.set(0, 1e12);
  EXPECT_EQ(small.getInt(0), std::numeric_limits<std::int32_t>::max());
}

TEST(TensorAccess, ShapeErrorsAreReported) {
  EXPECT_THROW(Tensor(ScalarType::F32, {2, -1}), DataError);
  try {
    Tensor::fromDoubles(ScalarType::F32, {2, 2}, {1.0, 2.0, 3.0});
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 4 elements but 3 values"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::fromBytes(ScalarType::F64, {3}, std::vector<std::uint8_t>(23)), DataError);
  EXPECT_EQ(Tensor(ScalarType::F32, {}).numel(), 1);  // a scalar
  EXPECT_EQ(Tensor(ScalarType::F32, {4, 0}).numel(), 0);
  EXPECT_EQ(shapeToString({2, 3}), "[2, 3]");
}

}  // namespace
}  // namespace dgps::test
