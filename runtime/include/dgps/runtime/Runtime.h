// The DGPS runtime: opens a generated package, JIT-compiles it with NVRTC for the GPU that owns the
// caller's tensors (CUBIN cache on disk, module cache per device context), validates every tensor and
// launches the chunked forward or the decode step on the caller's stream.
//
//   dgps::Package pkg = dgps::Package::open("generated/pgdn");
//   dgps::Runtime rt;                         // cache in $DGPS_CACHE_DIR or ~/.cache/dgps
//   dgps::ForwardTensors t;                   // device views, FLA layouts (TensorView.h)
//   t.q = {q_ptr, dgps::ScalarType::BF16, {B, T, H, K}, /*device=*/0};  ...
//   dgps::LaunchOptions opts; opts.stream = my_stream;
//   rt.forward(pkg, t, opts);                 // returns after enqueueing; nothing is synchronised
//
// Guarantees: nothing is launched unless every tensor passed validation (Validation.h); launches go to
// `LaunchOptions::stream` (the caller's stream, never an implicit one) in the primary
// context of the tensors' device, whatever device is current; the calling thread's current
// context is restored. Thread-safe: one Runtime may be shared by threads and streams.
//
// Cost of a call: the first call for a (Package instance, device, K, V, input dtype, tile configuration)
// builds the NVRTC request, hashes it into the binary-cache key, compiles or reads the binary and loads it;
// the runtime records the result (runtime/lib/VariantTable.h), so later calls with the same key do only
// validation, pointer checks, launch geometry, a lookup under a reader lock, argument packing and the
// launches; a call shaped like one of the calling thread's last few (same tensor metadata and options) skips
// validation, geometry and the lookup too (runtime/lib/CallMemo.h; every check that reads pointer values or
// asks the driver still runs). Concurrent first calls of one key compile once (the others wait); other keys
// proceed. Keep the Package object and reuse it: each Package::open is a new instance (a re-opened folder may
// have changed) and is resolved afresh. dgps-bench-host measures the host time per call (docs/performance.md).
// Errors: RuntimeError (Error.h) with one message; InvalidArgument means nothing was launched.
//
// Supported GPUs: compute capability 9.0 only (Hopper: H100, H200; the kernels are compiled for sm_90a
// and use its wgmma/TMA-era features and register budget). Other GPUs are refused when a package is first
// loaded on them (forward, decode, prepare) with RuntimeError{UnsupportedDevice}: "DGPS kernels need
// compute capability 9.0 (Hopper: H100, H200); this GPU is <name>, compute capability X.Y". NVRTC compiles
// for sm_80 spill registers and sm_89/sm_100/sm_120 compiles fail, so nothing is attempted there.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/TensorView.h"
#include "dgps/runtime/TileConfig.h"
#include "dgps/runtime/Validation.h"

namespace dgps {

/// Picks a tile configuration for a forward call when LaunchOptions::config is empty (the tuning
/// database plugs in here). Returning nullopt falls back to the manifest's default_config.
using ForwardConfigResolver =
    std::function<std::optional<TileConfig>(const Package&, const ForwardProblem&, int device)>;

struct RuntimeOptions {
  std::string cache_dir;  ///< binary cache folder; "" = BinaryCache::defaultDirectory().
  /// Before a launch, ask the driver which device each pointer lives on (cuPointerGetAttribute) and
  /// reject a pointer that is not device memory of the declared device. Cheap; turn off only for
  /// pointers the driver cannot attribute (e.g. some IPC imports).
  bool check_pointers = true;
  ForwardConfigResolver forward_config;
};

struct LaunchOptions {
  /// CUstream to launch on; nullptr is the legacy default stream (only if that is what you use).
  void* stream = nullptr;
  /// Tile configuration; empty = RuntimeOptions::forward_config, then the manifest's default_config.
  std::optional<TileConfig> config;
  /// Copies cu_seqlens to the host (synchronising `stream`) and checks cu[0] == 0, non-decreasing,
  /// cu[N] <= T before launching. Off by default: it costs a device read and breaks graph capture.
  bool check_cu_seqlens = false;
  /// The sequence-parallel state pass (docs/architecture.md, "Long sequences: the segmented state pass"):
  /// L chunks per segment (>= 1: forced; the package must have launch.forward_segmented), 0 = the plain
  /// sequential state pass. Empty = the environment variable DGPS_SEGMENT_CHUNKS (same meaning, read once
  /// when the Runtime is made; a package without segmented kernels then runs the plain path), else the
  /// configuration's segment_chunks (TileConfig, e.g. a tuned record's), else the rule of Runtime::segmentChunks.
  std::optional<std::int64_t> segment_chunks;
};

/// One kernel of a loaded variant, with the driver's and ptxas' view of its resources.
struct KernelInfo {
  std::string role;    ///< "chunk_local", ..., or "decode".
  std::string symbol;
  int registers = -1;           ///< CU_FUNC_ATTRIBUTE_NUM_REGS
  int local_bytes = -1;         ///< CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES (0 required; docs/math.md §7.5)
  int static_shared_bytes = -1; ///< CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  int max_threads = -1;         ///< CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
};

/// What a prepared (compiled and loaded) variant is.
struct VariantInfo {
  std::string cache_key;
  JitTarget target;
  bool from_cache = false;  ///< the image came from the disk cache
  std::vector<KernelResourceUsage> ptxas;  ///< per kernel, from the compile log (empty for PTX)
  std::vector<KernelInfo> kernels;
};

/// The compute capability the kernels are written for (sm_90a).
inline constexpr ComputeCapability kSupportedComputeCapability{9, 0};

/// "" when a GPU of capability `cc` can run DGPS kernels, else the message naming `device_name` and its
/// capability (see "Supported GPUs" above). Pure: the decision, testable without a GPU.
std::string unsupportedDeviceMessage(ComputeCapability cc, const std::string& device_name);

/// Throws RuntimeError{UnsupportedDevice} with unsupportedDeviceMessage when `device` is not supported
/// (and RuntimeError{NoDriver/NoDevice} when it cannot be queried).
void requireSupportedDevice(int device);

/// Whether variants compile with two segment-summary CTAs per SM where they fit (runtime/device launch_rules.h
/// segmentSummaryCtasPerSm): the environment variable DGPS_SUMMARY_PAIRS, read once; unset, empty or "1" on, "0"
/// off. On by default: timed beside the single form at B = 1, T = 32768 it takes 11-13% less time for gdn, deltanet
/// and gdn_gva (2 key / 8 value heads), about 2% less for pgdn and pdn, and is nowhere slower (docs/performance.md
/// run 26); "0" keeps one summary CTA per SM.
/// Throws RuntimeError{InvalidArgument} naming the value when it is anything else. Set it through this variable,
/// not as -DDGPS_SUMMARY_PAIRS=1 in DGPS_NVRTC_OPTIONS: that pairs the kernels without the runtime's segment-length
/// rule counting it.
bool summaryPairsEnabled();
/// summaryPairsEnabled's reading of one value (null = unset).
bool parseSummaryPairs(const char* value);

/// The macros a package variant is compiled with: DGPS_K, DGPS_V, DGPS_INPUT_BF16 or DGPS_INPUT_F16,
/// DGPS_CHUNK, DGPS_BLOCK_V, DGPS_WARPS, DGPS_STAGES, and DGPS_SUMMARY_PAIRS=1 when summaryPairsEnabled().
std::vector<std::string> variantDefines(std::int64_t key_dim, std::int64_t value_dim, ScalarType input_dtype,
                                        const TileConfig& config);

/// The NVRTC request for one variant of a package (no GPU needed: dgps-jit-check uses it).
JitRequest variantRequest(const Package& package, std::int64_t key_dim, std::int64_t value_dim,
                          ScalarType input_dtype, const TileConfig& config, const JitTarget& target);

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Chunked forward over whole sequences (docs/math.md §2-§3; kernels in the manifest's forward roles).
  /// Validates, resolves the tile configuration, compiles/loads on first use, launches every role in
  /// order on options.stream. Throws RuntimeError.
  /// Varlen (cu_seqlens given): the token buffer may be longer than the packed sequences, cu[N] <= T.
  /// Rows t >= cu[N] of `o` belong to no sequence and are written as zeros (by chunk_local, which reads
  /// cu[N] on the device, so this needs no host synchronisation); q, k, v and the gates of those rows are
  /// never read. cu[N] > T, a decreasing cu or cu[0] != 0 is undefined unless check_cu_seqlens is set.
  void forward(const Package& package, const ForwardTensors& tensors, const LaunchOptions& options = {});

  /// Context parallelism (docs/context_parallel.md): the affine summary of sequence `sequence` of a forward
  /// call's batch, X_end = M X_start + E over that sequence's tokens (docs/math.md §8), computed on the GPU by
  /// the package's segmented kernels (for a preconditioned package precond_summary and precond_scan first, then
  /// chunk_local, then segment_summary with the whole sequence as one segment: L = ⌈T/chunk⌉ + 1 chunks, so
  /// every sequence n is segment slot n) and copied into the caller's buffers on options.stream:
  ///   trans  M [HV, K, K] f32 device, row-major: the product of the sequence's K×K transitions (later tokens
  ///          on the left; per value head)
  ///   ext    E [HV, K, V] f32 device: the sequence's end state from a zero start
  /// These are the memory state's M and E of a cp::SummaryLayout slot (transOffset(0), extOffset(0)).
  /// `tensors` is a forward call (the same validation; dense or varlen); its initial_state, final_state and
  /// final_precond_state are ignored (the summary does not depend on a memory start state) and o is not written
  /// except rows past cu[N], which are zeroed as in forward. For a preconditioned package the write keys depend on
  /// the preconditioner state, so tensors.initial_precond_state [N, H, K] (when not given: zero for ema_sq_squash, the spec's init for
  /// hypergrad_ogd, as in forward) is each sequence's
  /// preconditioner start: the folded one of the preconditioner round for a continued fragment. The workspace
  /// (ForwardTensors::workspace, or the runtime's) must hold forwardSummaryWorkspaceBytes. Throws
  /// RuntimeError{InvalidArgument} (nothing launched) when contextParallelSupport refuses the package
  /// (ContextParallelSupport.h: no segment kernels, several Householder steps per token, a clamped hypergrad_ogd
  /// preconditioner), `sequence` is outside
  /// [0, N), options.segment_chunks is set (the summary chooses L), or trans / ext is not a contiguous f32 tensor
  /// of that shape on the tensors' device; otherwise as forward.
  void forwardSummary(const Package& package, const ForwardTensors& tensors, std::int64_t sequence,
                      const TensorView& trans, const TensorView& ext, const LaunchOptions& options = {});
  /// Scratch bytes forwardSummary needs for `problem` and `config`.
  std::size_t forwardSummaryWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                           const TileConfig& config) const;

  /// Context parallelism, the preconditioner round (docs/math.md §8.4): the affine summary of the preconditioner
  /// state over sequence `sequence`. The ema_sq_squash accumulator, per key head h and channel i
  ///   A_end[h, i] = Γ[h, i] · A_start[h, i] + Σ[h, i]      (docs/math.md §5.1)
  ///   gamma  Γ [H, K] f32 device: the product of the accumulator gates over the sequence's chunks, Π_c γ_c
  ///          (exp of the sum of precond_g over its tokens; 1 without the gate), the same in every channel of a head
  ///   sigma  Σ [H, K] f32 device: the sequence's end accumulator from A = 0
  /// — the diagonal M and the E of the preconditioner's cp::SummaryLayout entry (FoldShape{N, H, K, 1, diagonal}).
  /// Computed by the forward's own precond_summary (per chunk γ_c, σ_c) and two precond_scan passes over them: Σ
  /// from a zero start, and Γ from a start of ones with the chunks' σ_c zeroed (A ← γ_c A), so Γ is the product
  /// the scan itself applies, not a difference of two runs.
  /// An unclamped hypergrad_ogd d (ContextParallelSupport::precond_full_map) has a K×K map per key head instead:
  ///   d_end[h] = M[h] d_start[h] + e[h]                     (docs/math.md §5.2, §8.4)
  ///   gamma  M [H, K, K] f32 device, row-major (d_end[i] = Σ_j M[i][j] d_start[j] + e[i])
  ///   sigma  e [H, K] f32 device: the sequence's end d from d = 0 (not the spec's init)
  /// computed by precond_summary, precond_scan from d = 0 (e), then with every chunk's affine part a zeroed in the
  /// hgvec buffer K precond_scan passes from the unit vectors (column i of M from e_i): K + 1 scans, 2K + 5 driver
  /// calls (docs/context_parallel.md says what bounds them). Enqueued on options.stream; no host synchronisation.
  /// `tensors` as for forwardSummary (its states are ignored; o is not written). The workspace must hold
  /// forwardPrecondSummaryWorkspaceBytes. Throws RuntimeError{InvalidArgument} (nothing launched) when the package
  /// has no preconditioner state or contextParallelSupport refuses it, `sequence` is outside [0, N), or gamma /
  /// sigma is not a contiguous f32 tensor of those shapes on the tensors' device; otherwise as forward.
  void forwardPrecondSummary(const Package& package, const ForwardTensors& tensors, std::int64_t sequence,
                             const TensorView& gamma, const TensorView& sigma, const LaunchOptions& options = {});
  /// Scratch bytes forwardPrecondSummary needs for `problem` and `config`: the plain forward's workspace plus
  /// three f32 scan buffers of N·H·K + K floats each.
  std::size_t forwardPrecondSummaryWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                                  const TileConfig& config) const;

  /// One decode step: reads and updates state (and precond_state) in place, writes o.
  void decode(const Package& package, const DecodeTensors& tensors, const LaunchOptions& options = {});

  /// Scratch bytes forward needs for `problem` and `config` with default LaunchOptions (pass at least this much
  /// as ForwardTensors::workspace to avoid internal allocation, e.g. under CUDA graph capture). It includes the
  /// segment regions when forward would take the segmented state pass (segmentChunks).
  std::size_t forwardWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                    const TileConfig& config) const;
  /// The same for the state-pass choice forward makes with `options` (segmentChunks): a segmented forward also
  /// holds the per-segment summaries and start states (launch.forward_segmented.buffers).
  std::size_t forwardWorkspaceBytes(const Package& package, const ForwardProblem& problem, const TileConfig& config,
                                    const LaunchOptions& options) const;

  /// Chunks per segment of the state pass forward runs (0: the plain sequential pass). options.segment_chunks,
  /// else DGPS_SEGMENT_CHUNKS, else config.segment_chunks when it is >= 0 (a tuned length, e.g. from the tuning
  /// database: 0 or L, and 0 when L >= ⌈T/chunk⌉), else the rule: a package with launch.forward_segmented, whose plain state pass
  /// runs N·HV·⌈V/BV⌉ CTAs on a device of S multiprocessors, splits each sequence of NT = ⌈T/chunk⌉ chunks
  /// (T: the packed tokens with varlen, an upper bound of the longest document) into segments of
  /// L = dgps::segment::chooseSegmentChunks chunks (dsl/SegmentScan.h: a cost model of the walks' whole waves
  /// on S multiprocessors — E and M summaries over N·HV·(⌈V/BV⌉+⌈K/BV⌉) CTAs, the corrected walk over
  /// N·HV·⌈V/BV⌉, one fold step per segment — against the plain walk; only NT >= kMinSegmentedChunks;
  /// at least 16 chunks each); L >= NT (nothing to split) or no device answer gives 0. Throws RuntimeError{InvalidArgument} for a forced L >= 1 on a package without segmented
  /// kernels, a negative L, or a DGPS_SEGMENT_CHUNKS that is not a non-negative integer.
  std::int64_t segmentChunks(const Package& package, const ForwardProblem& problem, const TileConfig& config,
                             const LaunchOptions& options) const;

  /// The configuration forward would use for `problem` when none is given: the forward_config resolver's, else
  /// the shape-aware default (DefaultConfig.h forwardDefaultConfig: the manifest's, with block_v halved for calls
  /// too small to fill the GPU unless the segmented state pass splits them). The default follows a state pass
  /// forced by DGPS_SEGMENT_CHUNKS, and with `options` also one forced by options.segment_chunks.
  TileConfig resolveForwardConfig(const Package& package, const ForwardProblem& problem) const;
  TileConfig resolveForwardConfig(const Package& package, const ForwardProblem& problem,
                                  const LaunchOptions& options) const;

  /// Compiles (or fetches from the caches) and loads one variant on `device`; returns its resources.
  VariantInfo prepare(const Package& package, std::int64_t key_dim, std::int64_t value_dim, ScalarType input_dtype,
                      const TileConfig& config, int device);

  const JitCompiler& compiler() const;

 private:
  struct Impl;
  struct SummaryTarget;  // forwardSummary's request (Runtime.cpp)
  /// forward, or with `summary` the summary-only launch of forwardSummary.
  void launchForward(const Package& package, const ForwardTensors& tensors, const LaunchOptions& options,
                     const SummaryTarget* summary);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgps
