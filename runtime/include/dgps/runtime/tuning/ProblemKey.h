// The tuning key: which problem a tuning record answers. It is the spec hash plus a *bucketed* shape,
// so that shapes which vary from call to call (exact T, total packed tokens, number of documents)
// land on a handful of keys instead of one key per call.
//
// Why buckets: FLA's causal_conv1d key contained cdiv(B*T, 1024); Megatron's varlen
// packing changed it every step, so every step re-tuned and throughput fell from ~6k to ~1.5k
// tokens/s/GPU. Our key therefore holds only what changes the best configuration: the head dims and
// head counts (they fix tile fit and shared-memory use), a coarse T bucket (short sequences favour
// small chunks and little pipelining, long ones the opposite), and the number of waves of
// (sequence, value-head) blocks the GPU runs (under-filled GPUs favour narrower value tiles that make
// more blocks). With 6 T buckets x 5 wave buckets a training loop with varying packing tunes at most
// 30 times per (spec, dims, dtype), then never again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dgps/device/launch_rules.h"

namespace dgps::tuning {

/// Upper bounds of the sequence-length buckets, tokens: <=64, <=256, <=1024, <=4096, <=16384, >16384.
/// Powers of four apart: fine enough that a bucket's best config holds across it, coarse enough that
/// packed batches of 30k-34k tokens (the example above) always share one bucket.
enum class TBucket : int { Le64 = 0, Le256, Le1024, Le4096, Le16384, Gt16384 };
constexpr int kTBucketCount = 6;

/// (sequences x value heads) / SM count, i.e. how many waves of one-block-per-(sequence, head) work
/// the GPU sees: <0.5, <1, <2, <4, >=4.
enum class WaveBucket : int { LtHalf = 0, Lt1, Lt2, Lt4, Ge4 };
constexpr int kWaveBucketCount = 5;

/// Element type of q, k, v (and o). The state is always fp32 (docs/math.md §7.5).
enum class InputDType { F32, F16, BF16 };

/// Which kernel family is tuned.
enum class KernelFamily { Forward, Decode };

/// One tuned call, before bucketing: the device's launch shape plus what it does not carry. The shape is
/// the one struct the kernels' launch rules read (launch_rules.h): q,k [B,T,H,K], v [B,T,HV,V] as in
/// docs/spec.md (Tensors); N is the number of sequences (B dense, len(cu_seqlens) - 1 varlen, B = 1) and
/// T is the tokens per sequence dense, or the total packed tokens cu_seqlens[N] varlen; T = 1 for decode.
/// `dtype` is authoritative for the key (launch::ProblemShape::f16 cannot say f32); tuneProblem() keeps
/// shape.f16 in step with it.
struct TuneProblem {
  launch::ProblemShape shape;
  InputDType dtype = InputDType::BF16;
  KernelFamily kind = KernelFamily::Forward;
};

/// A TuneProblem for `shape` with shape.f16 set from `dtype`.
TuneProblem tuneProblem(const launch::ProblemShape& shape, InputDType dtype, KernelFamily kind);

struct ProblemKey {
  std::string spec_hash;  ///< canonical-form hash of the spec (dsl), covers every axis and flag.
  int K = 0;
  int V = 0;
  int H = 0;
  int HV = 0;
  TBucket t_bucket = TBucket::Le64;
  WaveBucket waves = WaveBucket::LtHalf;
  InputDType dtype = InputDType::BF16;
  bool varlen = false;
  KernelFamily kind = KernelFamily::Forward;
  /// The numeric precision policy of the call, e.g. "ieee", "tf32x3" (docs/math.md §7.5). Precision is a
  /// correctness axis: it is chosen by the caller/spec and fixed in the key, never searched over, so
  /// a faster but less accurate mode can never win a tuning run it was not allowed into.
  std::string precision = "ieee";

  /// Stable one-line form, e.g. "3f2a..|K128|V128|H16|HV32|T<=4096|W<2|bf16|dense|forward|ieee".
  std::string str() const;
};

bool operator==(const ProblemKey& a, const ProblemKey& b);
inline bool operator!=(const ProblemKey& a, const ProblemKey& b) { return !(a == b); }
/// Equal in every field except the T bucket (the "nearest T bucket" fallback's notion of "same").
bool sameExceptT(const ProblemKey& a, const ProblemKey& b);

TBucket tBucketFor(std::int64_t tokens);
/// `sm_count` <= 0 is treated as 1 so a broken fingerprint cannot divide by zero.
WaveBucket waveBucketFor(std::int64_t sequences, int HV, int sm_count);

/// Bucket a concrete call. `spec_hash` and `precision` are passed through unchanged.
ProblemKey makeKey(const std::string& spec_hash, const TuneProblem& problem, int sm_count,
                   const std::string& precision = "ieee");

const char* toString(TBucket);      ///< "<=64" ... ">16384"
const char* toString(WaveBucket);   ///< "<0.5" ... ">=4"
const char* toString(InputDType);   ///< "f32", "f16", "bf16"
const char* toString(KernelFamily); ///< "forward", "decode"
std::optional<TBucket> parseTBucket(const std::string&);
std::optional<WaveBucket> parseWaveBucket(const std::string&);
std::optional<InputDType> parseInputDType(const std::string&);
std::optional<KernelFamily> parseKernelFamily(const std::string&);

}  // namespace dgps::tuning
