// The two floors of every timed problem (../.library/device/METHOD.md "two numbers first"):
//
// Bytes floor: each input read once and each output written once, at the ABI's dtypes. Forward: q, k, v
//   (bf16) + gates and gains (fp32: g [B,T,HV] or [B,T,HV,K], beta, precond_g, precond_beta,
//   precond_center) + o (bf16); no states, as FLA's anchors ran (docs/math.md §4.5 "ideal fully-fused
//   forward": 4K + 4V bytes per token-head plus the gates). Decode: the state [B,HV,K,V] fp32 read and
//   written, the preconditioner state [B,H,K] fp32 read and written, q, k, v, o (bf16) and the gates of
//   one token.
// FLOP count: forward uses the manifest's plan.flops_per_token_head x B*T*HV when the package gives it
//   and costed it at the shape's K and V (the compiler costs at the largest supported K and V); else
//   docs/math.md §4.4's matmul count per chunk-head divided by the chunk C:
//     delta rule:  6C²K + 4C²V + 6CKV + C³/2, plus 2C²K for a key-side preconditioner (ATK intra-chunk
//                  product) — i.e. GDN/DeltaNet/KDA 6C²K, PGDN/PDN/PKDA 8C²K;
//     linear rule: 2C²K + 2C²V + 4CKV (no KKT, no triangular solve, no W/U).
//   Decode counts the three matrix-vector products of one token, 2KV each (prediction Sᵀk, rank-1
//   write, read-out Sᵀq; two for the linear rule), per sequence and value head.
#pragma once

#include <string>

#include "Shapes.h"
#include "dgps/runtime/TileConfig.h"

namespace dgps {
namespace bench {

struct Floors {
  double bytes = 0;          ///< bytes that must cross device memory at least once.
  double flops = 0;          ///< floating-point operations (matmul-equivalent).
  std::string flops_source;  ///< "manifest plan" or "math.md 4.4 (C=64)" or "decode 3x2KV".
};

double forwardBytesFloor(const Spec& spec, const BenchShape& shape);
double decodeBytesFloor(const Spec& spec, const BenchShape& shape);

/// docs/math.md §4.4 FLOPs per token and value head for chunk length `chunk`.
double mathForwardFlopsPerTokenHead(const Spec& spec, std::int64_t K, std::int64_t V, int chunk);
/// FLOPs of one decode step per sequence and value head: 2KV per matrix-vector product, 2·n_h + 1 of them for the
/// delta rule with n_h Householder steps per token (Sᵀk and the update per step, the read-out), 2 otherwise.
double decodeFlopsPerHead(const Spec& spec, std::int64_t K, std::int64_t V);

/// Both floors for `package` at `shape` when run with `config` (its chunk only matters for the
/// math.md fallback).
Floors computeFloors(const Package& package, const BenchShape& shape, const TileConfig& config);

}  // namespace bench
}  // namespace dgps
