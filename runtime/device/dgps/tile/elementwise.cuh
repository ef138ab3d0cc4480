// Elementwise maths over register tiles (any type with `kN` and `float x[kN]`) and uniform scalars
// (`float`, the same in every thread). A scalar operand broadcasts; two scalars give a scalar.
// exp/exp2/log/rsqrt are the fast special-function units (platform.cuh), not correctly rounded.
#pragma once

#include "dgps/device/platform.cuh"

namespace dgps {
namespace tile {
namespace detail {

DGPS_DEV float at(float s, int) { return s; }
template <class T>
DGPS_DEV float at(const T& t, int i) {
  return t.x[i];
}

/// The result type of a binary op: the tile operand's type, or float for two scalars.
template <class A, class B>
struct Zip {
  using type = A;
};
template <class B>
struct Zip<float, B> {
  using type = B;
};

template <class A, class B, class F>
DGPS_DEV typename Zip<A, B>::type zip(const A& a, const B& b, F f) {
  typename Zip<A, B>::type r;
#pragma unroll
  for (int i = 0; i < r.kN; ++i) r.x[i] = f(at(a, i), at(b, i));
  return r;
}
template <class F>
DGPS_DEV float zip(float a, float b, F f) {
  return f(a, b);
}
template <class T, class F>
DGPS_DEV T map(const T& a, F f) {
  T r;
#pragma unroll
  for (int i = 0; i < r.kN; ++i) r.x[i] = f(a.x[i]);
  return r;
}
template <class F>
DGPS_DEV float map(float a, F f) {
  return f(a);
}

struct AddF { DGPS_DEV float operator()(float a, float b) const { return a + b; } };
struct SubF { DGPS_DEV float operator()(float a, float b) const { return a - b; } };
struct MulF { DGPS_DEV float operator()(float a, float b) const { return a * b; } };
struct DivF { DGPS_DEV float operator()(float a, float b) const { return a / b; } };
struct MaxF { DGPS_DEV float operator()(float a, float b) const { return dev::fmax_(a, b); } };
struct MinF { DGPS_DEV float operator()(float a, float b) const { return dev::fmin_(a, b); } };
struct ExpF { DGPS_DEV float operator()(float a) const { return dev::exp_(a); } };
struct Exp2F { DGPS_DEV float operator()(float a) const { return dev::ex2(a); } };
struct LogF { DGPS_DEV float operator()(float a) const { return dev::log_(a); } };
struct AbsF { DGPS_DEV float operator()(float a) const { return dev::fabs_(a); } };
struct RsqrtF { DGPS_DEV float operator()(float a) const { return dev::rsqrt(a); } };

}  // namespace detail

template <class A, class B> DGPS_DEV auto add(const A& a, const B& b) { return detail::zip(a, b, detail::AddF{}); }
template <class A, class B> DGPS_DEV auto sub(const A& a, const B& b) { return detail::zip(a, b, detail::SubF{}); }
template <class A, class B> DGPS_DEV auto mul(const A& a, const B& b) { return detail::zip(a, b, detail::MulF{}); }
template <class A, class B> DGPS_DEV auto div(const A& a, const B& b) { return detail::zip(a, b, detail::DivF{}); }
template <class A, class B> DGPS_DEV auto max(const A& a, const B& b) { return detail::zip(a, b, detail::MaxF{}); }
template <class A, class B> DGPS_DEV auto min(const A& a, const B& b) { return detail::zip(a, b, detail::MinF{}); }
template <class T> DGPS_DEV T exp(const T& x) { return detail::map(x, detail::ExpF{}); }
template <class T> DGPS_DEV T exp2(const T& x) { return detail::map(x, detail::Exp2F{}); }
template <class T> DGPS_DEV T log(const T& x) { return detail::map(x, detail::LogF{}); }
template <class T> DGPS_DEV T abs(const T& x) { return detail::map(x, detail::AbsF{}); }
template <class T> DGPS_DEV T rsqrt(const T& x) { return detail::map(x, detail::RsqrtF{}); }

/// Uniform select guarding a division: c > 0 ? a : b.
DGPS_DEV float select_positive(float c, float a, float b) { return c > 0.f ? a : b; }

}  // namespace tile
}  // namespace dgps
