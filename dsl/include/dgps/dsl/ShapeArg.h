// The command-line spelling of a problem shape, shared by `dgps-spec inputs` and `dgps-tune` / `dgpsc tune`
// (runtime/include/dgps/runtime/tune/TuneCli.h forwards to these):
//   --shape B=8,T=4096,H=16,K=128,V=128      keys B, T, H, HV, K, V (case-sensitive), each at most once
//   --cu-seqlens 0,1500,3000                 packed sequence boundaries (varlen specs; then B = 1)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dgps/dsl/Reference.h"
#include "dgps/dsl/Spec.h"

namespace dgps {

/// The --shape value; 0 means "not given". Values are positive decimal integers up to 2^40.
struct ShapeArg {
  std::int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
};

/// Parses "B=8,T=4096,H=16,K=128,V=128". Throws DataError with one message naming the offending piece,
/// e.g. "--shape: 'T=4k': T must be a positive integer".
ShapeArg parseShapeOption(const std::string& text);

/// Completes a ShapeArg against a spec: B defaults to 1; T, K and V are required; H defaults to the spec's
/// fixed heads_qk (required when the spec leaves it open, and must equal it when fixed); HV defaults to
/// H * gva_ratio and must equal it when given. Throws DataError.
ReferenceProblem resolveShapeOption(const ShapeArg& arg, const Spec& spec);

/// Parses "0,1500,3000": at least two comma-separated non-negative decimal integers (the values' own
/// contract, cu[0] = 0, non-decreasing, cu[N] <= T, is checkProblemShape's). Throws DataError.
std::vector<std::int64_t> parseCuSeqlensArg(const std::string& text);

}  // namespace dgps
