// A generated package: the folder `dgpsc compile` writes (generated/<name>/):
//   manifest.yaml  what the package holds and how to launch it (format below), validated strictly by
//                  parseManifest;
//   spec.yaml      the canonical spec, parsed with dgps::parseSpecFile (dsl/SpecParser.h);
//   kernels.cu     the CUDA source NVRTC compiles (the manifest's `source`).
// Package::open reads the manifest and the kernel source only: everything the runtime needs to validate
// tensors and launch is in the manifest. spec.yaml is read, parsed and cross-checked on the first call of
// Package::spec(), which tools that run the float64 reference or generate inputs use.
//
// manifest.yaml (dgps_package: 2):
//   dgps_package: 2                  format version (only 2 is understood; 1 is refused with "regenerate")
//   codegen_version: 1               emitter version (>= 1)
//   name: pgdn                       [a-z][a-z0-9_]*; equals the spec's name
//   spec_hash: "0123456789abcdef"    16 lowercase hex digits: the dsl's hash of the canonical spec
//   source: kernels.cu               file names inside the package folder
//   spec: spec.yaml
//   features: {decay: none|scalar|diagonal, gain: none|scalar, precond: none|diagonal,
//              precond_side: key|query, precond_source: ema_sq_squash|hypergrad_ogd, solve: linear|delta,
//              steps: 2..4 (optional, default 1: Householder steps per token, the spec's solve.steps)}
//   dims: {key: [..], value: [..]}   supported K and V (each 1..256)
//   dtypes: {inputs: [bf16, f16], state: f32}
//   io: {initial_state, final_state, initial_precond_state, final_precond_state, varlen: bool}
//   layer: {heads_qk: 0, gva_ratio: 1, scale: auto|<number>, precond_inputs: {gate, gain, center: bool}}
//                                    heads_qk 0 = any; the preconditioner inputs the layer takes
//                                    (precond_g, precond_beta, precond_center)
//   launch:                          the compiler's plan, as integer formulas (LaunchFormula.h)
//     let: [{name: KP, value: "align_up(K, 16)"}, ...]    names defined in order, each over the symbols
//                                                       and earlier lets (at most kMaxFormulaLets)
//     forward: [{role, symbol, grid: [x, y, z], block: [x, y, z], smem}, ...]   kernels launched in order
//                                                       (at most kMaxForwardKernels); smem is the
//                                                       dynamic shared memory in bytes
//     workspace: {align: 256, buffers: [{name, bytes}, ...]}   one device buffer, each part starting at
//                                                       a multiple of `align` (forward only)
//     forward_segmented: {kernels: [...], buffers: [...]}  optional: the forward with the sequence-parallel
//                                                       state pass (docs/architecture.md, "Long sequences"),
//                                                       kernels as in `forward`, launched in order instead of
//                                                       it; its formulas may read L (chunks per segment,
//                                                       >= 1); its buffers follow workspace.buffers
//     decode: {symbol, grid, block, smem}               the single-token decode kernel
//   tunables: {chunk: [..], block_v: [..], warps: [..], stages: [..]}
//   default_config: {chunk, block_v, warps, stages}   each a member of its tunables list
//   plan: {bytes_per_token_head: <num>, flops_per_token_head: <num>}
// `launch.forward` or `launch.decode` may be absent when the spec does not list that kernel; the roles are
// data: the runtime launches whatever the manifest lists. Every error names the file, the line:column,
// the key, what was expected and what came.
//
// Strictness (the files are compiler output, and may come from anywhere): each file is read with a size
// limit (dgps::readRegularFile: manifest and spec 4 MiB, kernels.cu 16 MiB; FIFOs and devices refused);
// manifest.yaml and spec.yaml are one YAML document without tags, anchors or aliases; names are checked
// by hand with length limits (identifiers at most 256 characters); formulas are bounded in length, depth
// and stack and checked for overflow when evaluated (LaunchFormula.h); spec.yaml must be exactly
// canonicalYaml(spec) as dgpsc writes it (so `heads.qk: 0` for `any`, `!!str 1e-6` or a comment is
// refused, naming the first differing line); kernels.cu may include only the embedded device library
// (checkSourceIncludes, Jit.h). Passing a spec file instead of a folder says so.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dgps/dsl/Spec.h"
#include "dgps/runtime/LaunchFormula.h"
#include "dgps/runtime/TileConfig.h"

namespace dgps {

struct PackageFeatures {
  DecayKind decay = DecayKind::None;
  GainKind gain = GainKind::None;
  PrecondKind precond = PrecondKind::None;
  PrecondSide precond_side = PrecondSide::Key;
  PrecondSource precond_source = PrecondSource::EmaSqSquash;
  SolveKind solve = SolveKind::Delta;
  int steps = 1;  ///< Householder steps per token (spec solve.steps): k, v and beta carry steps rows per token
  /// Where the walks take a key-side preconditioner's write key: DeviceFeatures.h FeatureSet::write_key (0 rebuilt,
  /// the manifest's default; 1 "stored": chunk_local stores it, every walk loads it; 2 "segments": the segment
  /// walks load it). The manifest's launch formulas already include it; tools that evaluate the launch
  /// contract (dsl LaunchContract.h) directly need it.
  int write_key = 0;
};

struct PackageIo {
  bool initial_state = false;
  bool final_state = false;
  bool initial_precond_state = false;
  bool final_precond_state = false;
  bool varlen = false;
};

/// The most forward kernels and workspace buffers one manifest may list (the warm path keeps them in
/// fixed arrays).
constexpr std::size_t kMaxForwardKernels = 8;
constexpr std::size_t kMaxWorkspaceBuffers = 16;  // = device/abi.h kMaxWorkspaceRegions (Runtime.cpp asserts it)

/// One kernel of the manifest's `launch` section: grid, block and dynamic shared memory as formulas.
struct KernelLaunchRule {
  std::string role;    ///< "chunk_local", "decode", ... (names only; the runtime does not interpret them)
  std::string symbol;  ///< the __global__ function in kernels.cu
  Formula grid[3];
  Formula block[3];
  Formula smem;        ///< dynamic shared memory, bytes
};

struct WorkspaceBufferRule {
  std::string name;
  Formula bytes;
};

/// The `launch` section, compiled (LaunchFormula.h). Evaluate with the runtime's launch plan.
struct LaunchRules {
  std::vector<std::string> let_names;
  std::vector<Formula> lets;               ///< lets[i] fills environment slot kFormulaSymbols + i
  std::vector<KernelLaunchRule> forward;   ///< in launch order
  std::int64_t workspace_align = 256;
  std::vector<WorkspaceBufferRule> workspace;
  /// launch.forward_segmented: the forward with the sequence-parallel state pass (empty when absent).
  std::vector<KernelLaunchRule> forward_segmented;      ///< in launch order
  std::vector<WorkspaceBufferRule> workspace_segmented;  ///< after `workspace`'s buffers, same alignment
  bool has_decode = false;
  KernelLaunchRule decode;
};

/// The manifest's `layer:` line: what tensor validation needs beyond features, dims, dtypes and io.
struct PackageLayer {
  int heads_qk = 0;              ///< H, or 0 for any
  int gva_ratio = 1;             ///< HV / H
  std::optional<double> scale;   ///< query scale; nullopt: K^{-1/2}
  bool precond_gate = false;     ///< takes precond_g
  bool precond_gain = false;     ///< takes precond_beta
  bool precond_center = false;   ///< takes precond_center
};

struct Manifest {
  int dgps_package = 2;
  int codegen_version = 1;
  std::string name;
  std::string spec_hash;
  std::string source;
  std::string spec;
  PackageFeatures features;
  std::vector<int> key_dims;
  std::vector<int> value_dims;
  std::vector<DType> input_dtypes;
  DType state_dtype = DType::F32;
  PackageIo io;
  PackageLayer layer;
  bool has_forward = false;
  std::vector<std::string> forward_roles;    ///< launch.forward[i].role
  std::vector<std::string> forward_symbols;  ///< launch.forward[i].symbol
  bool has_decode = false;
  std::string decode_symbol;                 ///< launch.decode.symbol
  LaunchRules launch;
  TuningSpace tunables;
  TileConfig default_config;
  double bytes_per_token_head = 0;
  double flops_per_token_head = 0;
};

/// Parses and validates manifest text; `file` names it in errors. Throws RuntimeError{Package}.
Manifest parseManifest(const std::string& text, const std::string& file);
/// Reads `path` and parses it. Throws RuntimeError{Package} (also for an unreadable file).
Manifest readManifest(const std::string& path);

/// An opened package: manifest and kernel source; the spec on demand.
class Package {
 public:
  /// Opens the package folder: reads and validates manifest.yaml and kernels.cu (every manifest symbol
  /// must occur in it). Does not read spec.yaml. Throws RuntimeError{Package} naming the file and the
  /// problem: missing files, a corrupt manifest, a symbol missing from the source.
  static Package open(const std::string& directory);

  const std::string& directory() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  /// The layer as the manifest describes it (built at open, no parsing): name, kinds, dims, dtypes, io,
  /// kernels, heads, gva_ratio, scale and the preconditioner inputs it takes; every other field (the
  /// reference's constants such as eps) at its default. What tensor validation reads.
  const Spec& layer() const { return layer_; }
  /// The package's full spec: on the first call (from any copy; thread-safe) spec.yaml is read, parsed,
  /// checked to be canonical and to hash to the manifest's spec_hash, and cross-checked against the
  /// manifest (name, features, dims, dtypes, io, layer, kernels, tunables). Throws RuntimeError{Package}
  /// naming the file, line and problem; a failed call is retried on the next. For tools that run the
  /// float64 reference or generate inputs; the runtime's forward and decode never call it.
  const Spec& spec() const;
  const std::string& source() const { return source_; }
  std::string sourcePath() const { return dir_ + "/" + manifest_.source; }
  const std::string& name() const { return manifest_.name; }
  /// A number unique in this process to one Package::open (never 0 for an opened package). Copies share
  /// it (a Package is immutable, so equal ids mean equal content); opening the same folder again gives a
  /// new id. The runtime keys its resolved-variant table on it (runtime/lib/VariantTable.h).
  std::uint64_t instanceId() const { return instance_id_; }

  /// Checks `config` against the manifest's tunables; throws RuntimeError{InvalidArgument} naming
  /// the field, its value and the allowed list. segment_chunks >= 1 needs launch.forward_segmented.
  void checkConfig(const TileConfig& config) const;

 private:
  struct LazySpec {
    std::once_flag once;
    Spec spec;
  };
  std::string dir_;
  Manifest manifest_;
  Spec layer_;
  std::shared_ptr<LazySpec> spec_ = std::make_shared<LazySpec>();
  std::string source_;
  std::uint64_t instance_id_ = 0;
};

}  // namespace dgps
