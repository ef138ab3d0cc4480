// Symbolic-shape checks shared by the chunk ops' verifiers (ChunkOps.cpp, ChunkGradOps.cpp).
#pragma once

#include <string>

#include "dgps/Dialect/Chunk/IR/Chunk.h"

namespace dgps::chunk::shape {

using Dims = llvm::SmallVector<Dim, 5>;
inline const Dims kBTHK{Dim::B, Dim::T, Dim::H, Dim::K};
inline const Dims kBTH{Dim::B, Dim::T, Dim::H};
inline const Dims kBTHV{Dim::B, Dim::T, Dim::HV};
inline const Dims kBTHVK{Dim::B, Dim::T, Dim::HV, Dim::K};
inline const Dims kBTHVV{Dim::B, Dim::T, Dim::HV, Dim::V};
inline const Dims kBTHVC{Dim::B, Dim::T, Dim::HV, Dim::C};
inline const Dims kBNTHK{Dim::B, Dim::NT, Dim::H, Dim::K};
inline const Dims kBNTH{Dim::B, Dim::NT, Dim::H};
inline const Dims kBNTHVKV{Dim::B, Dim::NT, Dim::HV, Dim::K, Dim::V};
inline const Dims kNHVKV{Dim::N, Dim::HV, Dim::K, Dim::V};
inline const Dims kNHK{Dim::N, Dim::H, Dim::K};
inline const Dims kHead{Dim::H};

inline std::string dimsString(llvm::ArrayRef<Dim> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + stringifyDim(dims[i]).str();
  return s + "]";
}

/// Checks that `v` (if present) has one of the allowed dim lists.
inline mlir::LogicalResult expect(mlir::Operation* op, mlir::Value v, llvm::StringRef what,
                                  std::initializer_list<Dims> allowed) {
  if (!v) return mlir::success();
  auto t = llvm::cast<ChunkTensorType>(v.getType());
  for (const Dims& d : allowed)
    if (t.getDims() == llvm::ArrayRef<Dim>(d)) return mlir::success();
  std::string options;
  for (const Dims& d : allowed) options += (options.empty() ? "" : " or ") + dimsString(d);
  return op->emitOpError() << what << " has dims " << dimsString(t.getDims()) << "; expected "
                           << options;
}

/// A gate G is per value head ([B,T,HV], scalar decay) or per channel ([B,T,HV,K], diagonal).
inline mlir::LogicalResult expectGate(mlir::Operation* op, mlir::Value g) {
  return expect(op, g, "gate", {kBTHV, kBTHVK});
}

}  // namespace dgps::chunk::shape

