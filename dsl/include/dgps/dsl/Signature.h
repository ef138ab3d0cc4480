// The tensors a spec's kernels take, with FLA layouts (runtime/device/dgps/device/abi.h; docs/spec.md
// "Tensors"). One list per spec, so that GDN's per-head gate [B,T,HV] and KDA's per-channel gate
// [B,T,HV,K] are told apart before any launch.
#pragma once

#include <string>
#include <vector>

#include "dgps/dsl/Spec.h"

namespace dgps {

enum class TensorRole { Input, Output };

struct TensorSig {
  std::string name;                ///< the abi.h field name: "q", "g", "initial_precond_state", ...
  std::vector<std::string> shape;  ///< symbolic dims: B, T, H, HV, K, V, N, "N+1".
  std::string dtype;               ///< "input" (one of dtypes.inputs), "f32" or "i64".
  TensorRole role = TensorRole::Input;
  bool optional = false;           ///< the caller may pass null (initial states, cu_seqlens).
  std::string note;                ///< unit / contract, e.g. "natural log, <= 0".
};

/// The chunk_forward tensors of `s`, in abi.h ForwardArgs order.
std::vector<TensorSig> forwardSignature(const Spec& s);

/// "[B, T, HV, K]".
std::string shapeText(const TensorSig& t);

}  // namespace dgps
