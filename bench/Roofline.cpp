#include "Roofline.h"

#include <algorithm>

#include "Floors.h"

namespace dgps {
namespace bench {

Roofline roofline(double bytes, double flops, const DevicePeaks& peaks) {
  Roofline r;
  r.memory_ms = peaks.bytes_per_s > 0 ? bytes / peaks.bytes_per_s * 1e3 : 0;
  r.compute_ms = peaks.flops_per_s > 0 ? flops / peaks.flops_per_s * 1e3 : 0;
  return r;
}

double rooflineBytes(const Package& package, const BenchShape& shape, std::string* source) {
  const Spec& spec = package.spec();
  const Manifest& m = package.manifest();
  if (shape.kind == Kind::Forward && m.bytes_per_token_head > 0 && !m.key_dims.empty() && !m.value_dims.empty() &&
      *std::max_element(m.key_dims.begin(), m.key_dims.end()) == shape.key_dim &&
      *std::max_element(m.value_dims.begin(), m.value_dims.end()) == shape.value_dim) {
    *source = "manifest plan";
    return m.bytes_per_token_head * double(shape.batch) * double(shape.seq_len) * double(valueHeads(spec, shape));
  }
  *source = "bytes floor";
  return shape.kind == Kind::Forward ? forwardBytesFloor(spec, shape) : decodeBytesFloor(spec, shape);
}

}  // namespace bench
}  // namespace dgps
