#include "Shapes.h"

#include <algorithm>

namespace dgps {
namespace bench {

const char* toString(Kind kind) { return kind == Kind::Forward ? "forward" : "decode"; }

std::string BenchShape::label() const {
  std::string s = "B" + std::to_string(batch);
  if (kind == Kind::Forward) s += "_T" + std::to_string(seq_len);
  s += "_H" + std::to_string(heads_qk) + "_K" + std::to_string(key_dim) + "_V" + std::to_string(value_dim);
  return s;
}

std::vector<BenchShape> standardShapes() {
  BenchShape a;
  a.kind = Kind::Forward;
  a.batch = 8;
  a.seq_len = 4096;
  BenchShape b = a;
  b.batch = 1;
  b.seq_len = 32768;
  BenchShape d;
  d.kind = Kind::Decode;
  d.batch = 256;
  d.seq_len = 1;
  return {a, b, d};
}

std::int64_t valueHeads(const Spec& spec, const BenchShape& shape) {
  return shape.heads_qk * std::max(1, spec.gva_ratio);
}

ProblemShape toProblemShape(const Spec& spec, const BenchShape& shape) {
  ProblemShape p;
  p.batch = shape.batch;
  p.seq_len = shape.seq_len;
  p.heads_qk = shape.heads_qk;
  p.heads_v = valueHeads(spec, shape);
  p.key_dim = shape.key_dim;
  p.value_dim = shape.value_dim;
  return p;
}

namespace {
bool contains(const std::vector<int>& v, std::int64_t x) { return std::find(v.begin(), v.end(), int(x)) != v.end(); }
}  // namespace

std::optional<std::string> unsupportedReason(const Package& package, const BenchShape& shape) {
  const Manifest& m = package.manifest();
  const Spec& s = package.spec();
  if (shape.kind == Kind::Forward && !m.has_forward) return std::string("the package has no chunk_forward kernels");
  if (shape.kind == Kind::Decode && !m.has_decode) return std::string("the package has no decode kernel");
  if (!contains(m.key_dims, shape.key_dim)) return "K=" + std::to_string(shape.key_dim) + " is not in its key dims";
  if (!contains(m.value_dims, shape.value_dim)) {
    return "V=" + std::to_string(shape.value_dim) + " is not in its value dims";
  }
  if (std::find(m.input_dtypes.begin(), m.input_dtypes.end(), DType::BF16) == m.input_dtypes.end()) {
    return std::string("bf16 is not among its input dtypes");
  }
  if (s.heads_qk != 0 && s.heads_qk != shape.heads_qk) {
    return "the spec fixes H=" + std::to_string(s.heads_qk) + ", the shape has H=" + std::to_string(shape.heads_qk);
  }
  return std::nullopt;
}

}  // namespace bench
}  // namespace dgps
