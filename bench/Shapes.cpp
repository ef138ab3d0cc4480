#include "Shapes.h"

#include <algorithm>

#include "dgps/dsl/ShapeArg.h"

namespace dgps {
namespace bench {

const char* toString(Kind kind) { return kind == Kind::Forward ? "forward" : "decode"; }

std::string BenchShape::label() const {
  std::string s = "B" + std::to_string(batch);
  if (kind == Kind::Forward) s += "_T" + std::to_string(seq_len);
  s += "_H" + std::to_string(heads_qk);
  if (heads_v > 0) s += "_HV" + std::to_string(heads_v);
  s += "_K" + std::to_string(key_dim) + "_V" + std::to_string(value_dim);
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
  // One long sequence with 2 query/key heads and 8 value heads (GVA ratio 4: Qwen3-Next-style layers, the shape
  // FlashQLA publishes its GDN time at); only specs with that ratio run it (unsupportedReason).
  BenchShape g = b;
  g.heads_qk = 2;
  g.heads_v = 8;
  BenchShape d;
  d.kind = Kind::Decode;
  d.batch = 256;
  d.seq_len = 1;
  // Small-batch decode (serving at low concurrency): per-step latency, where launch and host costs show.
  BenchShape d1 = d, d8 = d, d32 = d;
  d1.batch = 1;
  d8.batch = 8;
  d32.batch = 32;
  return {a, b, g, d, d1, d8, d32};
}

std::int64_t valueHeads(const Spec& spec, const BenchShape& shape) {
  if (shape.heads_v > 0) return shape.heads_v;
  return shape.heads_qk * std::max(1, spec.gva_ratio);
}

ReferenceProblem toProblemShape(const Spec& spec, const BenchShape& shape) {
  ReferenceProblem p;
  p.batch = shape.batch;
  p.seq_len = shape.seq_len;
  p.heads_qk = shape.heads_qk;
  p.heads_v = valueHeads(spec, shape);
  p.key_dim = shape.key_dim;
  p.value_dim = shape.value_dim;
  return p;
}

ForwardProblem forwardProblemOf(const Spec& spec, const BenchShape& shape) {
  ForwardProblem p;
  p.batch = shape.batch;
  p.num_seqs = shape.batch;
  p.seq_len = shape.seq_len;
  p.row_steps = householderSteps(spec);
  p.heads_qk = shape.heads_qk;
  p.heads_v = valueHeads(spec, shape);
  p.key_dim = shape.key_dim;
  p.value_dim = shape.value_dim;
  return p;
}

bool parseShapes(const std::string& text, std::vector<BenchShape>* out, std::string* error) {
  std::vector<BenchShape> shapes;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    const std::string kind = colon == std::string::npos ? std::string() : item.substr(0, colon);
    if (kind != "forward" && kind != "decode") {
      *error = "shape '" + item + "': expected forward:... or decode:...";
      return false;
    }
    // The fields are dgps-tune's --shape spelling (dsl/include/dgps/dsl/ShapeArg.h).
    ShapeArg a;
    try {
      a = parseShapeOption(item.substr(colon + 1));
    } catch (const DataError& e) {
      *error = "shape '" + item + "': " + e.what();
      return false;
    }
    BenchShape s;
    s.kind = kind == "forward" ? Kind::Forward : Kind::Decode;
    if (a.B == 0 || a.H == 0 || a.K == 0 || a.V == 0 || (s.kind == Kind::Forward && a.T == 0)) {
      *error = "shape '" + item + "': needs B, H, K, V" + std::string(s.kind == Kind::Forward ? " and T" : "");
      return false;
    }
    if (s.kind == Kind::Decode && a.T > 1) {
      *error = "shape '" + item + "': a decode shape has T=1";
      return false;
    }
    s.batch = a.B, s.seq_len = s.kind == Kind::Decode ? 1 : a.T, s.heads_qk = a.H, s.heads_v = a.HV;
    s.key_dim = a.K, s.value_dim = a.V;
    if (s.heads_v > 0 && s.heads_v % s.heads_qk != 0) {
      *error = "shape '" + item + "': HV must be a multiple of H";
      return false;
    }
    shapes.push_back(s);
  }
  if (shapes.empty()) {
    *error = "no shape given (expected e.g. forward:B=1,T=32768,H=16,K=128,V=128)";
    return false;
  }
  *out = std::move(shapes);
  return true;
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
  if (shape.heads_v > 0 && shape.heads_v != shape.heads_qk * std::max(1, s.gva_ratio)) {
    return "the spec's GVA ratio is " + std::to_string(s.gva_ratio) + ", the shape has HV/H = " +
           std::to_string(shape.heads_v) + "/" + std::to_string(shape.heads_qk);
  }
  if (s.heads_qk != 0 && s.heads_qk != shape.heads_qk) {
    return "the spec fixes H=" + std::to_string(s.heads_qk) + ", the shape has H=" + std::to_string(shape.heads_qk);
  }
  return std::nullopt;
}

}  // namespace bench
}  // namespace dgps
