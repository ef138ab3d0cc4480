#include "dgps/dsl/TensorCompare.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace dgps {
namespace {

std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", x);
  return buf;
}

/// a / b with 0/0 = 0 and x/0 = inf: an all-zero reference matched exactly is no error.
double ratio(double a, double b) {
  if (b > 0) return a / b;
  return a > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

}  // namespace

TensorErrors compareTensors(const Tensor& got, const Tensor& ref) {
  if (got.shape() != ref.shape()) {
    throw DataError("shape " + got.shapeString() + " differs from the reference's " + ref.shapeString());
  }
  TensorErrors e;
  double diff2 = 0, ref2 = 0, refMax = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double g = got.get(i), r = ref.get(i);
    const bool gf = std::isfinite(g), rf = std::isfinite(r);
    e.nonfinite_got += gf ? 0 : 1;
    e.nonfinite_ref += rf ? 0 : 1;
    if (!gf || !rf) continue;
    const double d = std::fabs(g - r);
    if (d > e.max_abs) e.max_abs = d;
    if (std::fabs(r) > refMax) refMax = std::fabs(r);
    diff2 += d * d;
    ref2 += r * r;
  }
  e.max_rel = ratio(e.max_abs, refMax);
  e.rel_l2 = ratio(std::sqrt(diff2), std::sqrt(ref2));
  return e;
}

std::string toleranceFailure(const TensorErrors& e, const CompareTolerances& tol) {
  if (e.nonfinite_got > 0 || e.nonfinite_ref > 0) {
    return std::to_string(e.nonfinite_got) + " non-finite value(s) under test, " + std::to_string(e.nonfinite_ref) +
           " in the reference";
  }
  if (tol.rel_l2 >= 0 && !(e.rel_l2 <= tol.rel_l2)) return "rel_l2 " + sci(e.rel_l2) + " > " + sci(tol.rel_l2);
  if (tol.max_abs >= 0 && !(e.max_abs <= tol.max_abs)) return "max_abs " + sci(e.max_abs) + " > " + sci(tol.max_abs);
  if (tol.max_rel >= 0 && !(e.max_rel <= tol.max_rel)) return "max_rel " + sci(e.max_rel) + " > " + sci(tol.max_rel);
  return "";
}

}  // namespace dgps
