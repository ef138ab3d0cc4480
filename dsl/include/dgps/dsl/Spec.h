// The DGPS spec: one recurrent layer described along the Decay, Gain, Preconditioner and Solve axes
// of Preconditioned DeltaNet (Tumma, Loo, Rus, arXiv 2604.21100), plus OSDN's hypergradient
// preconditioner (arXiv 2605.13473). The maths each field selects is in docs/spec.md and
// docs/math.md; the YAML syntax is parsed by SpecParser.h.
//
// Every later stage (reference semantics, MLIR import, emitter, runtime) reads this struct; keep
// changes additive and document each field's unit and default here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dgps {

/// Decay axis: the transition D_t applied to the memory state before the read (docs/math.md §1).
enum class DecayKind {
  None,      ///< D_t = I.
  Scalar,    ///< D_t = exp(g_t) I, g [B,T,HV] in natural-log space (Mamba-2, GDN).
  Diagonal,  ///< D_t = Diag(exp(g_t)), g [B,T,HV,K] (KDA).
};

/// Gain axis: the scalar step size of the write.
enum class GainKind {
  None,    ///< gain 1 (linear attention).
  Scalar,  ///< beta [B,T,HV], one per value head and token.
};

/// Preconditioner axis.
enum class PrecondKind {
  None,
  Diagonal,  ///< a per-channel multiplier M_t in R^K per key head.
};

/// Where the diagonal preconditioner is applied (docs/math.md §3.4).
enum class PrecondSide {
  Key,    ///< ATK: write key k^w = M ⊙ k̂, read key k̂.
  Query,  ///< ATQ: o_t = S_t^T (M_t ⊙ q̂_t) scale; the write is unchanged.
};

/// The rule that produces the diagonal preconditioner.
enum class PrecondSource {
  EmaSqSquash,    ///< Preconditioned DeltaNet: decayed accumulator of k̂² through the symmetric fast squash (docs/math.md §3.3).
  HypergradOgd,   ///< OSDN: online gradient step on the hypergradient surrogate, optional APF retention (docs/math.md §5.2).
};

/// Solve axis: which step on the test-time regression objective is taken.
enum class SolveKind {
  Linear,  ///< Hebbian: S_t = D_t S_{t-1} + gain k v^T (linear-attention family).
  Delta,   ///< one gradient step on ½‖S^T k − v‖²: the (asymmetric) delta rule.
};

/// OSDN: whether the write at token t uses d_t (before this token's update) or d_{t+1}.
enum class WriteTiming { Pre, Post };

enum class DType { F32, F16, BF16 };

/// Kernels a package can contain.
enum class KernelKind {
  ChunkForward,  ///< chunked (WY/UT-transform) forward over whole sequences.
  Decode,        ///< single-token step of inference, updating states in place.
};

/// A 1-based position in the spec file, for diagnostics.
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
};

struct DecaySpec {
  DecayKind kind = DecayKind::None;
  SourceLoc loc;
};

struct GainSpec {
  GainKind kind = GainKind::None;
  /// Allowed open interval (lo, hi) of the gain values; hi may be +inf (Mamba-2's Δ).
  double lo = 0.0;
  double hi = 1.0;
  SourceLoc loc;
};

/// Parameters of the ema_sq_squash source (docs/math.md §3.3):
///   A_t = exp(g^a_t) A_{t-1} + beta^a_t k̂_t², r = ln(A+eps) − c_h, s = r/(1+|r|), M = x^{−s}.
struct SquashParams {
  double x = 1.5;            ///< squash range, M in (1/x, x).
  double eps = 1e-6;         ///< added to A inside the log.
  double center_init = -0.2; ///< c_h initial value; the per-head centre is the input `precond_center` [H].
  bool has_gate = true;      ///< the accumulator has its own log-decay input `precond_g` [B,T,H].
  bool has_gain = true;      ///< the accumulator has its own gain input `precond_beta` [B,T,H].
};

/// Parameters of the hypergrad_ogd source (docs/math.md §5.2):
///   d_{t+1} = r_t d_t + (eta beta_t / ‖k_t‖²)(1 − beta_t ⟨d_t, k_t²⟩) k_t².
struct HypergradParams {
  double eta = 1.0;               ///< OGD step size.
  bool has_retention = false;     ///< APF: retention r_t = exp(precond_g) from input `precond_g` [B,T,H].
  WriteTiming timing = WriteTiming::Pre;
  double init = 1.0;              ///< d_0 when no initial preconditioner state is given.
  std::optional<double> clamp_min;  ///< optional projection of d after each update.
  std::optional<double> clamp_max;
};

struct PrecondSpec {
  PrecondKind kind = PrecondKind::None;
  PrecondSide side = PrecondSide::Key;
  PrecondSource source = PrecondSource::EmaSqSquash;
  SquashParams squash;
  HypergradParams hypergrad;
  SourceLoc loc;
};

/// Most Householder steps per token a spec may ask for (solve.steps).
inline constexpr int kMaxHouseholderSteps = 4;
/// Most Householder steps per token the decode kernel takes: the decode CTA keeps each step's normalised key and
/// the query in its four shared [K] vectors (compiler/lib/Emit/TileEmitter.cpp kSmemVectors); dgpsc compile refuses
/// more with decode listed (DeviceFeatures.h kernelsRefusal).
inline constexpr int kMaxDecodeHouseholderSteps = 3;

struct SolveSpec {
  SolveKind kind = SolveKind::Delta;
  /// Householder steps per token n_h (Gated DeltaProduct, docs/math.md §3.7): the delta rule is applied
  /// n_h times per token, with keys, values and gains k, v, beta carrying T·n_h rows (token-major,
  /// row t·n_h + j is step j of token t), the decay applied once before the first step and the output
  /// read after the last. 1..kMaxHouseholderSteps; only with kind delta. 1 is the ordinary delta rule.
  int steps = 1;
  SourceLoc loc;
};

/// Tile parameters an autotuner may search; each list holds the allowed values. The defaults are what every shipped
/// spec lists: the runtime's default configuration takes chunk 32 and 128-column value tiles where they pay
/// (runtime/lib/DefaultConfig.cpp; chunk 32 measured up to 20% faster, docs/performance.md runs 27 and 28).
struct TuningSpace {
  std::vector<int> chunk = {32, 64};
  std::vector<int> block_v = {32, 64, 128};
  std::vector<int> warps = {4, 8};
  std::vector<int> stages = {1, 2};
};

struct Spec {
  std::string name;         ///< identifier, [a-z][a-z0-9_]*; used in kernel names.
  std::string description;  ///< free text, not part of the hash.
  SourceLoc loc;

  DecaySpec decay;
  GainSpec gain;
  PrecondSpec precond;
  SolveSpec solve;

  // Normalisation: q̂ = q·rsqrt(Σq² + eps), likewise k (FLA's in-kernel l2norm, docs/math.md §1).
  bool qk_l2norm = true;
  double l2norm_eps = 1e-6;
  std::optional<double> scale;  ///< query scale; nullopt means K^{-1/2}.

  // Heads and dims. HV must be a multiple of H (GVA); the ratio is fixed by the spec.
  int heads_qk = 0;     ///< H; 0 means "any" (given at run time).
  int gva_ratio = 1;    ///< HV / H.
  std::vector<int> key_dims = {128};    ///< supported K.
  std::vector<int> value_dims = {128};  ///< supported V.

  std::vector<DType> input_dtypes = {DType::BF16, DType::F16};
  DType state_dtype = DType::F32;

  // Optional inputs and outputs.
  bool initial_state = true;
  bool final_state = true;
  bool initial_precond_state = true;
  bool final_precond_state = true;
  bool varlen = true;

  std::vector<KernelKind> kernels = {KernelKind::ChunkForward, KernelKind::Decode};
  TuningSpace tuning;

  /// Accept gain/preconditioner combinations whose write eigenvalue can leave [-1, 1] (or whose
  /// OSDN d-scan can diverge) with a warning instead of an error: for ablations such as the paper's
  /// x=8 sweep (docs/math.md §7.2). Validation only; excluded from the spec hash (SpecParser.h).
  bool allow_unstable = false;
};

const char* toString(DecayKind);
const char* toString(GainKind);
const char* toString(PrecondKind);
const char* toString(PrecondSide);
const char* toString(PrecondSource);
const char* toString(SolveKind);
const char* toString(WriteTiming);
const char* toString(DType);
const char* toString(KernelKind);

/// True when the write key differs from the read key (ATK preconditioner): docs/math.md §4.1.
inline bool hasAsymmetricKeys(const Spec& s) {
  return s.precond.kind == PrecondKind::Diagonal && s.precond.side == PrecondSide::Key;
}

// Which optional parts of a Spec are in effect. Fields outside their part keep their defaults, are
// left out of the canonical form and the hash, and are rejected by the parser when written (a value
// for a disabled feature is a contradiction, not a no-op). The parser also sets
// initial/final_precond_state to false without a preconditioner, and varlen to false without a
// chunk_forward kernel.
inline bool hasPrecond(const Spec& s) { return s.precond.kind == PrecondKind::Diagonal; }
inline bool usesSquash(const Spec& s) {
  return hasPrecond(s) && s.precond.source == PrecondSource::EmaSqSquash;
}
inline bool usesHypergrad(const Spec& s) {
  return hasPrecond(s) && s.precond.source == PrecondSource::HypergradOgd;
}
inline bool hasGainInput(const Spec& s) { return s.gain.kind == GainKind::Scalar; }
/// n_h, the rows of k, v and beta per token (solve.steps; 1 for every single-step spec).
inline int householderSteps(const Spec& s) { return s.solve.steps; }
inline bool hasKernel(const Spec& s, KernelKind k) {
  for (KernelKind x : s.kernels)
    if (x == k) return true;
  return false;
}

}  // namespace dgps
