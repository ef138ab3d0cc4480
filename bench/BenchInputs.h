// Inputs of one timed problem: random values from the dsl's input generator (InputGen.h: realistic
// gates, N(0,1) activations — never zeros), uploaded to the GPU.
//
// Drawing 8 x 4096 x 16 x 128 normal values per tensor on one host core takes seconds, so the
// generator runs for a *tile* (one sequence of at most `tile_tokens` tokens for the forward, at most 32
// sequences for decode) and the tile is repeated along the leading token/batch dimension to fill the
// full tensor. The kernels' work does not depend on the values, and the repeated data is as random
// bit-for-bit as the tile; correctness is checked separately on fresh, unrepeated inputs
// (CorrectnessGuard.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dgps/dsl/Reference.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/TensorView.h"

namespace dgps {
namespace bench {

/// Host tensors by reference name, each with the full shape it stands for (a multiple of the tile).
struct HostInputs {
  TensorMap tiles;
  std::map<std::string, std::vector<std::int64_t>> full_shapes;
};

/// Forward inputs of `spec` at `full` without initial states (as FLA's anchors ran): q, k, v in bf16,
/// gates and gains in f32. `tile_tokens` <= 0 draws every token.
HostInputs forwardHostInputs(const Spec& spec, const ReferenceProblem& full, std::int64_t tile_tokens, std::uint64_t seed);

/// Decode inputs of `spec` for one token of `full.batch` sequences: q, k, v [B,1,H*,D], the token's
/// gates, "state" [B,HV,K,V] f32 and, with a preconditioner, "precond_state" [B,H,K] f32 (drawn like
/// initial states). `tile_batch` <= 0 draws every sequence.
HostInputs decodeHostInputs(const Spec& spec, const ReferenceProblem& full, std::int64_t tile_batch, std::uint64_t seed);

/// Device tensors by name.
class DeviceSet {
 public:
  void add(const std::string& name, DeviceTensor tensor);
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  DeviceTensor& at(const std::string& name);
  const DeviceTensor& at(const std::string& name) const;
  /// The tensor's view, or a default ("not given") view when absent.
  TensorView view(const std::string& name) const;

 private:
  std::map<std::string, DeviceTensor> tensors_;
};

/// Uploads every tile, repeated to its full shape. Throws RuntimeError / DataError.
DeviceSet uploadInputs(const HostInputs& host, int device);

/// Adds an uninitialised output tensor (poison it before use).
void addOutput(DeviceSet& set, const std::string& name, ScalarType dtype, std::vector<std::int64_t> shape, int device);

/// The forward call's views: q, k, v, g, beta, precond_g, precond_beta, precond_center, o, workspace.
ForwardTensors forwardTensors(const DeviceSet& set);
/// The decode call's views: q, k, v, gates, state, precond_state, o.
DecodeTensors decodeTensors(const DeviceSet& set);

/// Allocates the forward workspace `bytes` (a 1-D i64 tensor of at least that many bytes) as "workspace".
void addWorkspace(DeviceSet& set, std::size_t bytes, int device);

/// Number of elements of a downloaded float tensor (bf16/f16/f32/f64) that are NaN or infinite.
std::int64_t countNonFinite(const Tensor& t);

}  // namespace bench
}  // namespace dgps
