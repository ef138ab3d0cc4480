#include "CallMemo.h"

#include <algorithm>
#include <atomic>

namespace dgps {
namespace detail {

bool ViewSignature::capture(const TensorView& v) {
  if (v.shape.size() > kMaxRank) return false;
  null_data = v.data == nullptr;
  contiguous = v.isContiguous();
  rank = std::uint8_t(v.shape.size());
  dtype = v.dtype;
  device = v.device;
  dims.fill(0);
  std::copy(v.shape.begin(), v.shape.end(), dims.begin());
  return true;
}

bool ViewSignature::matches(const TensorView& v) const {
  if (v.shape.size() != rank || (v.data == nullptr) != null_data || v.dtype != dtype || v.device != device)
    return false;
  for (std::size_t i = 0; i < rank; ++i)
    if (v.shape[i] != dims[i]) return false;
  // given() is data != null || rank > 0: both compared above. Empty strides are contiguous by definition.
  return (v.strides.empty() || v.isContiguous()) == contiguous;
}

std::array<const TensorView*, kForwardViews> forwardViews(const ForwardTensors& t) {
  return {&t.q,          &t.k,           &t.v,
          &t.g,          &t.beta,        &t.precond_g,
          &t.precond_beta, &t.precond_center, &t.cu_seqlens,
          &t.initial_state, &t.initial_precond_state, &t.o,
          &t.final_state, &t.final_precond_state, &t.workspace};
}

std::array<const TensorView*, kDecodeViews> decodeViews(const DecodeTensors& t) {
  return {&t.q, &t.k, &t.v, &t.g, &t.beta, &t.precond_g, &t.precond_beta, &t.precond_center, &t.state,
          &t.precond_state, &t.o};
}

std::uint64_t newRuntimeId() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace dgps
