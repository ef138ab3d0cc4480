#include "dgps/runtime/tune/ScratchForward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dgps/runtime/Error.h"

namespace dgps {
namespace tune {

ReferenceProblem sliceShape(const ReferenceProblem& full) {
  ReferenceProblem s = full;
  s.cu_seqlens.clear();
  s.batch = std::min<std::int64_t>(full.cu_seqlens.empty() ? full.batch : full.numSeqs(), kSliceBatch);
  s.seq_len = std::min<std::int64_t>(full.seq_len, kSliceTokens);
  return s;
}

namespace {

bool isPerToken(const std::string& name) {
  static const char* const names[] = {"q", "k", "v", "g", "beta", "precond_g", "precond_beta"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

bool isPerSequence(const std::string& name) { return name == "initial_state" || name == "initial_precond_state"; }

// Row-block copy: out row r takes in row map(r), each row `row_bytes` long.
template <typename Map>
void copyRows(const Tensor& in, Tensor& out, std::int64_t rows, std::size_t row_bytes, Map map) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + std::size_t(r) * row_bytes, in.data() + std::size_t(map(r)) * row_bytes, row_bytes);
  }
}

}  // namespace

ReferenceInputs tileInputs(const ReferenceInputs& slice, std::int64_t batch, std::int64_t tokens) {
  // The slice's tokens are q's rows; a tensor with n times as many rows carries n rows per token (k, v and beta with
  // several Householder steps per token) and is tiled to tokens·n rows, whole tokens at a time.
  auto q = slice.find("q");
  const std::int64_t sliceTokens = q != slice.end() && q->second.rank() >= 2 ? q->second.dim(1) : 0;
  ReferenceInputs out;
  for (const auto& kv : slice) {
    const std::string& name = kv.first;
    const Tensor& t = kv.second;
    if (name == "cu_seqlens") throw DataError("tileInputs: varlen inputs (cu_seqlens) cannot be tiled");
    std::vector<std::int64_t> shape = t.shape();
    if (isPerToken(name)) {
      if (t.rank() < 2) throw DataError("tileInputs: tensor '" + name + "' must be [B,T,...], got " + t.shapeString());
      const std::int64_t Bs = t.dim(0), Ts = t.dim(1);
      std::int64_t inner = 1;
      for (std::size_t i = 2; i < t.rank(); ++i) inner *= t.dim(i);
      if (sliceTokens < 1 || Ts % sliceTokens != 0)
        throw DataError("tileInputs: tensor '" + name + "' has " + std::to_string(Ts) +
                        " rows, not a multiple of q's " + std::to_string(sliceTokens) + " tokens");
      const std::int64_t rows = tokens * (Ts / sliceTokens);  // rows per token: 1, or the Householder steps
      shape[0] = batch;
      shape[1] = rows;
      Tensor full(t.dtype(), shape);
      const std::size_t row = std::size_t(inner) * elementSize(t.dtype());
      copyRows(t, full, batch * rows, row, [&](std::int64_t r) {
        const std::int64_t b = r / rows, tt = r % rows;
        return (b % Bs) * Ts + (tt % Ts);
      });
      out.emplace(name, std::move(full));
    } else if (isPerSequence(name)) {
      const std::int64_t Ns = t.dim(0);
      shape[0] = batch;
      Tensor full(t.dtype(), shape);
      const std::size_t row = Ns > 0 ? t.nbytes() / std::size_t(Ns) : 0;
      copyRows(t, full, batch, row, [&](std::int64_t r) { return r % Ns; });
      out.emplace(name, std::move(full));
    } else {
      out.emplace(name, t);
    }
  }
  return out;
}

ScratchForward::ScratchForward(const Package& package, const ReferenceInputs& inputs, int device) {
  const Spec& spec = package.spec();
  for (const auto& kv : inputs) inputs_.emplace(kv.first, DeviceTensor::upload(kv.second, device));
  const Tensor& q = inputs.at("q");
  const Tensor& v = inputs.at("v");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), HV = v.dim(2), V = v.dim(3);
  auto cu = inputs.find("cu_seqlens");
  const std::int64_t N = cu == inputs.end() ? B : cu->second.dim(0) - 1;
  outputs_.emplace("o", DeviceTensor(q.dtype(), {B, T, HV, V}, device));
  if (spec.final_state) outputs_.emplace("final_state", DeviceTensor(ScalarType::F32, {N, HV, K, V}, device));
  if (hasPrecond(spec) && spec.final_precond_state) {
    outputs_.emplace("final_precond_state", DeviceTensor(ScalarType::F32, {N, H, K}, device));
  }
}

ForwardTensors ScratchForward::tensors() const {
  auto in = [&](const char* n) { return inputs_.count(n) ? inputs_.at(n).view() : TensorView(); };
  auto out = [&](const char* n) { return outputs_.count(n) ? outputs_.at(n).view() : TensorView(); };
  ForwardTensors t;
  t.q = in("q"); t.k = in("k"); t.v = in("v"); t.g = in("g"); t.beta = in("beta");
  t.precond_g = in("precond_g"); t.precond_beta = in("precond_beta"); t.precond_center = in("precond_center");
  t.initial_state = in("initial_state"); t.initial_precond_state = in("initial_precond_state");
  t.cu_seqlens = in("cu_seqlens");
  t.o = out("o"); t.final_state = out("final_state"); t.final_precond_state = out("final_precond_state");
  return t;
}

void ScratchForward::poisonOutputs() {
  for (auto& kv : outputs_) kv.second.poison();
}

TensorMap ScratchForward::downloadOutputs() const {
  TensorMap out;
  for (const auto& kv : outputs_) out.emplace(kv.first, kv.second.download());
  return out;
}

std::int64_t ScratchForward::nonFiniteOutputs(std::string* first_bad_output) const {
  std::int64_t bad = 0;
  for (const auto& kv : outputs_) {
    const Tensor t = kv.second.download();
    std::int64_t here = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.get(i))) ++here;
    if (here > 0 && bad == 0 && first_bad_output) *first_bad_output = kv.first;
    bad += here;
  }
  return bad;
}

double maxRelativeError(const TensorMap& got, const ReferenceOutputs& ref, std::string* worst) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double result = 0;
  for (const auto& kv : ref.toMap()) {
    auto it = got.find(kv.first);
    const Tensor& want = kv.second;
    if (it == got.end() || it->second.shape() != want.shape()) {
      if (worst) *worst = kv.first + (it == got.end() ? " (missing)" : " (shape " + it->second.shapeString() + ")");
      return nan;
    }
    const Tensor& have = it->second;
    double diff = 0, scale = 0;
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      const double g = have.get(i), r = want.get(i);
      if (!std::isfinite(g)) {
        if (worst) *worst = kv.first + " (non-finite at element " + std::to_string(i) + ")";
        return nan;
      }
      diff = std::max(diff, std::fabs(g - r));
      scale = std::max(scale, std::fabs(r));
    }
    const double err = scale > 0 ? diff / scale : diff;
    if (err >= result) {
      result = err;
      if (worst) *worst = kv.first;
    }
  }
  return result;
}

}  // namespace tune
}  // namespace dgps
