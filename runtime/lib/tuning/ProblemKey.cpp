#include "dgps/runtime/tuning/ProblemKey.h"

#include <array>
#include <tuple>

namespace dgps::tuning {
namespace {

constexpr std::array<const char*, kTBucketCount> kTNames = {"<=64",   "<=256",   "<=1024",
                                                            "<=4096", "<=16384", ">16384"};
constexpr std::array<std::int64_t, kTBucketCount - 1> kTUpper = {64, 256, 1024, 4096, 16384};
constexpr std::array<const char*, kWaveBucketCount> kWaveNames = {"<0.5", "<1", "<2", "<4", ">=4"};

template <typename E, std::size_t N>
std::optional<E> parseByName(const std::array<const char*, N>& names, const std::string& s) {
  for (std::size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

auto tieAll(const ProblemKey& k) {
  return std::tie(k.spec_hash, k.K, k.V, k.H, k.HV, k.waves, k.dtype, k.varlen, k.kind,
                  k.precision);
}

}  // namespace

TBucket tBucketFor(std::int64_t tokens) {
  for (std::size_t i = 0; i < kTUpper.size(); ++i)
    if (tokens <= kTUpper[i]) return static_cast<TBucket>(i);
  return TBucket::Gt16384;
}

WaveBucket waveBucketFor(std::int64_t sequences, int HV, int sm_count) {
  // Compare blocks against multiples of the SM count in integers: blocks < f * sms with f in
  // {0.5, 1, 2, 4} becomes 2*blocks < 2f * sms, so no rounding decides a boundary.
  const std::int64_t sms = sm_count > 0 ? sm_count : 1;
  const std::int64_t blocks2 = 2 * (sequences > 0 ? sequences : 0) * (HV > 0 ? HV : 0);
  if (blocks2 < 1 * sms) return WaveBucket::LtHalf;
  if (blocks2 < 2 * sms) return WaveBucket::Lt1;
  if (blocks2 < 4 * sms) return WaveBucket::Lt2;
  if (blocks2 < 8 * sms) return WaveBucket::Lt4;
  return WaveBucket::Ge4;
}

TuneProblem tuneProblem(const launch::ProblemShape& shape, InputDType dtype, KernelFamily kind) {
  TuneProblem p;
  p.shape = shape;
  p.shape.f16 = dtype == InputDType::F16 ? 1 : 0;
  p.dtype = dtype;
  p.kind = kind;
  return p;
}

ProblemKey makeKey(const std::string& spec_hash, const TuneProblem& problem, int sm_count,
                   const std::string& precision) {
  const launch::ProblemShape& s = problem.shape;
  ProblemKey key;
  key.spec_hash = spec_hash;
  key.K = int(s.K);
  key.V = int(s.V);
  key.H = int(s.H);
  key.HV = int(s.HV);
  key.t_bucket = tBucketFor(s.T);
  key.waves = waveBucketFor(s.N, int(s.HV), sm_count);
  key.dtype = problem.dtype;
  key.varlen = s.varlen != 0;
  key.kind = problem.kind;
  key.precision = precision;
  return key;
}

bool operator==(const ProblemKey& a, const ProblemKey& b) {
  return a.t_bucket == b.t_bucket && tieAll(a) == tieAll(b);
}

bool sameExceptT(const ProblemKey& a, const ProblemKey& b) { return tieAll(a) == tieAll(b); }

std::string ProblemKey::str() const {
  return spec_hash + "|K" + std::to_string(K) + "|V" + std::to_string(V) + "|H" +
         std::to_string(H) + "|HV" + std::to_string(HV) + "|T" + toString(t_bucket) + "|W" +
         toString(waves) + "|" + toString(dtype) + "|" + (varlen ? "varlen" : "dense") + "|" +
         toString(kind) + "|" + precision;
}

const char* toString(TBucket b) { return kTNames[static_cast<int>(b)]; }
const char* toString(WaveBucket b) { return kWaveNames[static_cast<int>(b)]; }

const char* toString(InputDType d) {
  switch (d) {
    case InputDType::F32: return "f32";
    case InputDType::F16: return "f16";
    case InputDType::BF16: return "bf16";
  }
  return "?";
}

const char* toString(KernelFamily k) {
  return k == KernelFamily::Forward ? "forward" : "decode";
}

std::optional<TBucket> parseTBucket(const std::string& s) { return parseByName<TBucket>(kTNames, s); }
std::optional<WaveBucket> parseWaveBucket(const std::string& s) {
  return parseByName<WaveBucket>(kWaveNames, s);
}

std::optional<InputDType> parseInputDType(const std::string& s) {
  if (s == "f32") return InputDType::F32;
  if (s == "f16") return InputDType::F16;
  if (s == "bf16") return InputDType::BF16;
  return std::nullopt;
}

std::optional<KernelFamily> parseKernelFamily(const std::string& s) {
  if (s == "forward") return KernelFamily::Forward;
  if (s == "decode") return KernelFamily::Decode;
  return std::nullopt;
}

}  // namespace dgps::tuning
