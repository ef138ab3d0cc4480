// CPU check of the sequence-parallel state pass printed from tile IR (every package with a chunk forward has it;
// docs/architecture.md "Long sequences: the segmented state pass"; with several Householder steps per token the
// walks run over the T·n_h step rows and the corrected walk maps q and o, docs/math.md §3.7). The package's
// kernels.cu is compiled for the CPU emulator of tests/emu and launched with LaunchContract.h forwardGeometry /
// segmentGeometry. Per problem, on fresh seeded inputs and NaN-poisoned outputs and workspace:
//   1. the forward's roles before state_output (precond_summary and precond_scan where the spec has a
//      preconditioner, then chunk_local) write the workspace (its chunk regions; the segment regions after them
//      stay poisoned) and the final preconditioner state, which is compared with the float64 reference too;
//   2. the ordinary walk (state_output) writes o and the final state;
//   3. with ForwardArgs::segment_chunks = L, segment_summary, segment_fold and segment_state_output write a
//      second, poisoned o and final state from the same workspace;
//   4. both are compared with each other and with the float64 reference (dgps::runReference).
// Tolerances (relative L2 over the tensor): the segmented result is not bit-identical to the ordinary walk. Its
// state reaches each segment start through E + M·h in f32 instead of the walk itself, and E, M and the
// corrected walk each enter the tensor cores as bf16 (the state is rounded to bf16 per chunk product, as in
// the ordinary walk), so the two differ by bf16 rounding of different intermediates: a few 1e-3 relative.
// kTolPlain = 1e-2 bounds that (the GPU suite's bf16 forward tolerance); against the float64 reference both
// paths get the same kTolRef = 1e-2.
// Problems: T = 300 (a partial last chunk), L = 2 chunks per segment, B = 2 with and without an initial state,
// a packed batch of one long document among short ones (one of 1 token), and GVA (2 value heads per key head)
// where the spec's reference allows it; K = V = 32 with C = 32, BV = 32, 1 stage (mma.sync) and K = V = 64 with
// C = 64 or 32, BV = 64, 2 stages (the warpgroup-MMA path, emulated), bf16 inputs. The gates are scaled to decay
// slowly (log-decay × 0.02), so that a segment's transition product M stays far from zero and an error in it
// shows in o (a preconditioner's accumulator gate is slowed the same way: see checkOnce); one problem keeps the
// generator's faster gates. A preconditioned spec's segment walks rebuild the
// preconditioned write key (or, in the corrected walk, the query) from precond_scan's chunk-start states at the
// segment's absolute chunks (docs/math.md §8.3): a rebuild from the wrong chunk's state, or none, shows in o and the
// final state against both the ordinary walk and float64.
//
// The package's write key (DeviceFeatures.h FeatureSet::write_key: rebuilt by the walks or stored by chunk_local,
// docs/architecture.md "The write key: stored or rebuilt") is read off its kernels (EmuPackage.h packageWriteKey).
// With REBUILT_PACKAGE_DIR (the same spec compiled with --write-key=rebuilt; the package under test must store the
// key) both packages run on the same inputs and their o (ordinary and segmented) and final states must agree to
// kTolPlain: the forms differ only in bf16 rounding of P ⊙ k. The same holds for a query-side preconditioner's
// stored query (atq: write_key 1 stores P ⊙ q in pwq for the walks that write o).
//
//   dgps-tile-segment-emu-check PACKAGE_DIR WORK_DIR [REBUILT_PACKAGE_DIR]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dgps/device/abi.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"
#include "EmuCheck.h"
#include "EmuPackage.h"
#include "ManifestWorkspace.h"

namespace {

using dgps_emu::f32Of;

constexpr double kTolRef = 1e-2;    // bf16 inputs, operands and output vs float64 (the GPU suite's tolerance)
constexpr double kTolPlain = 1e-2;  // segmented vs ordinary walk: bf16 rounding of different intermediates
constexpr double kSlowGate = 0.02;  // log-decay scale: e^{0.02·g} ≈ 0.9975 per token

struct Config {
  int K, chunk, block_v, warps, stages;
  bool summaryPairs = false;  ///< DGPS_SUMMARY_PAIRS=1 (the summary's split state product where two share an SM)
};

/// Relative L2 distance of `got` from `ref` (infinite when `got` holds a non-finite value).
double relErr(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-tile-segment-emu-check: %s\n", msg.c_str());
  return 1;
}

void* build(const std::string& pkg, const std::string& so, const Config& c) {
  return dgps_emu::loadForEmu(pkg + "/kernels.cu", so, {c.K, c.K, false, c.chunk, c.block_v, c.warps, c.stages, c.summaryPairs});
}

bool launch(void* module, const std::string& sym, const dgps::launch::Geometry& geo, dgps::ForwardArgs& a) {
  return dgps_emu::launchRole(module, sym, geo, a);
}

struct Problem {
  const char* what;
  std::int64_t B, T, H;
  std::vector<std::int64_t> cu;
  bool initial, slowGates;
  int gva;  ///< value heads per key head
};

/// A package on the emulator: its module and the FeatureSet its kernels were printed with (the spec's, with the
/// write key the tile chunk roles took: EmuPackage.h packageWriteKey).
struct Loaded {
  void* module = nullptr;
  int writeKey = 0;
  std::string dir;  ///< the package directory (its manifest sizes the workspace)
};

/// What one package's forward wrote: the ordinary walk's and the segmented pass's o and final state, and the
/// final preconditioner state.
struct Outputs {
  std::vector<std::uint16_t> oPlain, oSeg;
  std::vector<float> sPlain, sSeg, pT;
  long long segmentSlots = 0;
};

/// Runs the package's roles on `in`: precond_summary / precond_scan / chunk_local, the ordinary walk
/// (state_output), then with ForwardArgs::segment_chunks = L the segmented pass, all on one NaN-poisoned
/// workspace (its segment regions stay poisoned until the segment kernels write them) and poisoned outputs.
bool runForward(const dgps::Spec& spec, const Loaded& pkg, const Config& cfg, const Problem& p, std::int64_t L,
                const dgps::ReferenceInputs& in, const dgps::ReferenceOutputs& ref, Outputs& out) {
  const std::int64_t HV = p.H * p.gva, K = cfg.K, V = K;
  const std::int64_t N = p.cu.empty() ? p.B : (std::int64_t)p.cu.size() - 1;
  auto floats = [&](const char* n) { return in.count(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  std::vector<float> g = floats("g"), beta = floats("beta"), s0 = floats("initial_state"), pg = floats("precond_g"),
                     pb = floats("precond_beta"), pc = floats("precond_center"), p0 = floats("initial_precond_state");
  out.pT.assign(ref.has_final_precond_state ? (size_t)ref.final_precond_state.numel() : 0, NAN);
  std::vector<std::int64_t> cuv = p.cu;
  const size_t nO = (size_t)(p.B * p.T * HV * V), nS = (size_t)(N * HV * K * V);
  out.oPlain.assign(nO, 0x7fc1);  // poison: NaN
  out.sPlain.assign(nS, NAN);
  out.sSeg.assign(nS, NAN);
  auto ptr = [](std::vector<float>& v) -> const float* { return v.empty() ? nullptr : v.data(); };

  dgps::launch::FeatureSet f = dgps::deviceFeatures(spec);
  f.write_key = pkg.writeKey;
  dgps::launch::ProblemShape ls;
  ls.B = p.B;
  ls.T = p.T * dgps::householderSteps(spec);  // the kernels' row axis: T·n_h steps (abi.h)
  ls.N = N;
  ls.H = p.H;
  ls.HV = HV;
  ls.K = K;
  ls.V = V;
  ls.varlen = p.cu.empty() ? 0 : 1;
  dgps::launch::TileConfig tc;
  tc.chunk = cfg.chunk;
  tc.block_v = cfg.block_v;
  tc.warps = cfg.warps;
  tc.stages = cfg.stages;
  out.segmentSlots = dgps::launch::segmentSlots(ls, tc.chunk, L);
  const dgps_emu::ManifestWorkspace W = dgps_emu::manifestWorkspace(pkg.dir, ls, tc, L);
  std::vector<unsigned char> ws(W.bytes + 256, 0xFF);  // NaN bytes in every f32 region

  dgps::ForwardArgs a{};
  a.q = in.at("q").data();
  a.k = in.at("k").data();
  a.v = in.at("v").data();
  a.g = ptr(g);
  a.beta = ptr(beta);
  a.initial_state = ptr(s0);
  a.precond_g = ptr(pg);
  a.precond_beta = ptr(pb);
  a.precond_center = ptr(pc);
  a.initial_precond_state = ptr(p0);
  a.final_precond_state = out.pT.empty() ? nullptr : out.pT.data();
  a.cu_seqlens = cuv.empty() ? nullptr : cuv.data();
  a.workspace = ws.data();
  a.batch = p.B;
  a.seq_len = p.T * dgps::householderSteps(spec);
  a.num_seqs = N;
  a.heads_qk = p.H;
  a.heads_v = HV;
  a.scale = (float)(spec.scale ? *spec.scale : 1.0 / std::sqrt((double)K));
  dgps::set_index_divisors(a, cfg.chunk);  // after the shape fields (abi.h)
  dgps_emu::setWorkspaceOffsets(a, W);  // the plan's region offsets, as the runtime passes them
  // full chunks load q and k by tensor copies (the partial last chunk by cp.async), as on an sm_90 GPU
  if (dgps_emu::encodeRowMaps(a, a.batch * p.T, p.H, K, cfg.chunk, dgps::householderSteps(spec), HV, V, cfg.block_v,
                              spec.decay.kind == dgps::DecayKind::Diagonal)) dgps_emu::encodeWorkspaceMaps(a, W, ls, cfg.chunk);
  a.o = out.oPlain.data();
  a.final_state = ref.has_final_state ? out.sPlain.data() : nullptr;

  const std::string prefix = "dgps_" + spec.name + "_fwd_";
  using dgps::launch::forwardGeometry;
  // the plain roles up to state_output (launch.forward_segmented starts with the same ones)
  int roles[dgps::launch::kMaxRoles];
  const int nr = dgps::launch::forwardRoles(f, roles);
  bool ok = true;
  for (int i = 0; i < nr && ok && roles[i] != dgps::launch::kStateOutput; ++i)
    ok = launch(pkg.module, prefix + dgps::launch::roleName(roles[i]), forwardGeometry(roles[i], f, ls, tc), a);
  out.oSeg = out.oPlain;  // what chunk_local wrote into o (it zeroes varlen rows past the last document) in both
  ok = ok && launch(pkg.module, prefix + "state_output", forwardGeometry(dgps::launch::kStateOutput, f, ls, tc), a);
  a.o = out.oSeg.data();
  a.final_state = ref.has_final_state ? out.sSeg.data() : nullptr;
  a.segment_chunks = L;
  for (int r = 0; r < dgps::launch::kSegmentRoles && ok; ++r)
    ok = launch(pkg.module, prefix + dgps::launch::segmentRoleName(r), dgps::launch::segmentGeometry(r, f, ls, tc, L),
                a);
  return ok;
}

std::vector<double> bf16s(const std::vector<std::uint16_t>& o) {
  std::vector<double> d(o.size());
  for (size_t i = 0; i < o.size(); ++i) d[i] = dgps::bf16BitsToDouble(o[i]);
  return d;
}

std::vector<double> doubles(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

/// One problem: the ordinary and the segmented state pass on one workspace, then o and the final state against
/// each other and float64; with `other` (the same spec compiled with the write key rebuilt) also both of its
/// passes on the same inputs against this package's.
bool checkOnce(const dgps::Spec& spec, const Loaded& pkg, const Loaded* other, const Config& cfg, const Problem& p,
               std::int64_t L, std::uint64_t seed) {
  dgps::ReferenceProblem s;
  s.batch = p.B;
  s.seq_len = p.T;
  s.heads_qk = p.H;
  s.heads_v = p.H * p.gva;
  s.key_dim = s.value_dim = cfg.K;
  s.cu_seqlens = p.cu;
  dgps::InputGenOptions opt;
  opt.initial_state = p.initial;
  opt.initial_precond_state = p.initial;
  dgps::ReferenceInputs in = dgps::generateInputs(spec, s, seed, dgps::ScalarType::BF16, opt);
  // Slow gates, the preconditioner's accumulator gate too: its state then grows over the whole sequence, so the
  // chunk-start states pst of different chunks differ by whole chunks of accumulation, and a segment walk that
  // rebuilds P from the wrong chunk's state is far off for every token of the chunk, not only its first few.
  for (const char* gate : {"g", "precond_g"})
    if (p.slowGates && in.count(gate))
      for (std::int64_t i = 0; i < in.at(gate).numel(); ++i) in.at(gate).set(i, kSlowGate * in.at(gate).get(i));
  const dgps::ReferenceOutputs ref = dgps::runReference(spec, in);
  Outputs mine, theirs;
  if (!runForward(spec, pkg, cfg, p, L, in, ref, mine)) return false;
  if (other && !runForward(spec, *other, cfg, p, L, in, ref, theirs)) return false;

  const std::vector<double> oP = bf16s(mine.oPlain), oS = bf16s(mine.oSeg), oR = ref.o.toDoubles();
  const double eoPlain = relErr(oS, oP), eoRef = relErr(oS, oR), eoPlainRef = relErr(oP, oR);
  double esPlain = 0, esRef = 0;
  if (ref.has_final_state) {
    esPlain = relErr(doubles(mine.sSeg), doubles(mine.sPlain));
    esRef = relErr(doubles(mine.sSeg), ref.final_state.toDoubles());
  }
  const double epRef =
      ref.has_final_precond_state ? relErr(doubles(mine.pT), ref.final_precond_state.toDoubles()) : 0.0;
  bool pass = eoPlain <= kTolPlain && esPlain <= kTolPlain && eoRef <= kTolRef && esRef <= kTolRef &&
              eoPlainRef <= kTolRef && epRef <= kTolRef;
  char precondErr[64] = "";
  if (ref.has_final_precond_state) std::snprintf(precondErr, sizeof precondErr, ", final precond state %.3g", epRef);
  // against the rebuilt write key: the two differ only in bf16 rounding of P ⊙ k (docs/math.md §4.2)
  char otherErr[160] = "";
  if (other) {
    const double ePlain = relErr(oP, bf16s(theirs.oPlain)), eSeg = relErr(oS, bf16s(theirs.oSeg));
    const double eState = ref.has_final_state ? relErr(doubles(mine.sSeg), doubles(theirs.sSeg)) : 0.0;
    pass = pass && ePlain <= kTolPlain && eSeg <= kTolPlain && eState <= kTolPlain;
    std::snprintf(otherErr, sizeof otherErr, "; vs rebuilt write key: o %.3g, segmented o %.3g, final state %.3g",
                  ePlain, eSeg, eState);
  }
  std::printf(
      "  %s write_key %d C=%d K=V=%d BV=%d%s L=%lld %s (B=%lld T=%lld H=%lld HV=%lld%s%s, %lld segment slots): segmented vs "
      "ordinary o %.3g, final state %.3g; vs float64 o %.3g (ordinary %.3g), final state %.3g%s%s  %s\n",
      spec.name.c_str(), pkg.writeKey, cfg.chunk, cfg.K, cfg.block_v, cfg.summaryPairs ? " (two summaries per SM)" : "",
      (long long)L, p.what, (long long)p.B, (long long)p.T,
      (long long)p.H, (long long)(p.H * p.gva), p.initial ? ", initial state" : "", p.slowGates ? ", slow gates" : "",
      mine.segmentSlots, eoPlain, esPlain, eoRef, eoPlainRef, esRef, precondErr, otherErr, pass ? "ok" : "FAIL");
  return pass;
}

}  // namespace

int run(int argc, char** argv) {
  if (argc != 3 && argc != 4)
    return fail("usage: dgps-tile-segment-emu-check PACKAGE_DIR WORK_DIR [REBUILT_PACKAGE_DIR]");
  const std::string pkg = argv[1], work = argv[2], rebuilt = argc == 4 ? argv[3] : "";
  std::ifstream cu(pkg + "/kernels.cu");
  if (!cu) {
    std::printf("SKIPPED: no package %s\n", pkg.c_str());
    return 77;
  }
  std::stringstream text;
  text << cu.rdbuf();
  dgps::ParseResult parsed = dgps::parseSpecFile(pkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + pkg + "/spec.yaml");
  dgps::Spec spec = *parsed.spec;
  if (text.str().find("dgps_" + spec.name + "_fwd_segment_summary(") == std::string::npos)
    return fail(pkg + "/kernels.cu has no segment kernels; recompile it with dgpsc compile");
  const int writeKey = dgps_emu::packageWriteKeyOf(pkg);
  int rebuiltKey = 0;
  if (!rebuilt.empty()) {
    // the comparison is the point: a package that rebuilds too would compare a form with itself
    if (!std::ifstream(rebuilt + "/manifest.yaml")) return fail("cannot read " + rebuilt + "/manifest.yaml");
    rebuiltKey = dgps_emu::packageWriteKeyOf(rebuilt);
    if (writeKey == 0 || rebuiltKey != 0)
      return fail("comparing write keys needs a package that stores it (" + pkg + ": write_key " +
                  std::to_string(writeKey) + ") and one that rebuilds it (" + rebuilt + ": write_key " +
                  std::to_string(rebuiltKey) + "); compile them with dgpsc --write-key=stored and --write-key=rebuilt");
  }
  // The kernels take any K, V the launch rules allow; dims the spec does not list are added to a copy of the
  // spec for the reference and the input generator (the spec's dims limit its packages' tuning, not the maths).
  for (int d : {32, 64, 128}) {
    if (!std::count(spec.key_dims.begin(), spec.key_dims.end(), d)) spec.key_dims.push_back(d);
    if (!std::count(spec.value_dims.begin(), spec.value_dims.end(), d)) spec.value_dims.push_back(d);
  }
  const std::int64_t H = spec.heads_qk > 0 ? spec.heads_qk : 2;
  // GVA: 2 value heads per key head (or the spec's ratio) when the reference accepts it.
  dgps::Spec gva = spec;
  gva.gva_ratio = spec.gva_ratio > 1 ? spec.gva_ratio : 2;
  bool gvaOk = true;
  try {
    dgps::ReferenceProblem probe;
    probe.batch = 1;
    probe.seq_len = 8;
    probe.heads_qk = 1;
    probe.heads_v = gva.gva_ratio;
    probe.key_dim = probe.value_dim = 32;
    (void)dgps::generateInputs(gva, probe, 1, dgps::ScalarType::BF16);
  } catch (const std::exception& e) {
    gvaOk = false;
    std::printf("  %s: no GVA problem (%s)\n", spec.name.c_str(), e.what());
  }
  const std::int64_t ratio = spec.gva_ratio > 0 ? spec.gva_ratio : 1;
  // a long document among short ones, one of them a single token; the buffer ends with rows of no document
  const std::vector<std::int64_t> packed = {0, 7, 8, 230, 251, 290};
  const Problem problems[] = {
      {"dense", 2, 300, H, {}, true, true, (int)ratio},
      {"dense", 2, 300, H, {}, false, true, (int)ratio},
      {"dense, generator gates", 1, 300, H, {}, true, false, (int)ratio},
      {"packed", 1, 300, H, packed, true, true, (int)ratio},
  };
  // the last: two summary CTAs per SM (DGPS_SUMMARY_PAIRS=1 at K = V = 128, C = 32, 256 threads, two stages: the
  // split state product, tile/state_rows_product.cuh kSplit); dense and packed problems only (the emulator's
  // slowest configuration)
  const Config configs[] = {{32, 32, 32, 4, 1}, {64, 64, 64, 4, 2}, {64, 32, 64, 4, 2}, {128, 32, 128, 4, 2, true}};
  dgps::launch::FeatureSet features = dgps::deviceFeatures(spec);
  features.write_key = writeKey;
  const bool pairs = dgps::launch::segmentSummaryCtasPerSm(true, dgps::launch::walkRebuildsKw(features, true), 128, 32,
                                                           2, false, 128) == 2;
  bool ok = true;
  std::uint64_t seed = 9300;
  for (const Config& c : configs) {
    if (c.summaryPairs && !pairs) {
      std::printf("  %s: its summary has a producer warpgroup, one CTA per SM at every configuration (no paired "
                  "form to check)\n", spec.name.c_str());
      continue;
    }
    const std::string tag = "_k" + std::to_string(c.K) + "_c" + std::to_string(c.chunk) + "_bv" +
                            std::to_string(c.block_v) + (c.summaryPairs ? "_pairs" : "") + "_w" + std::to_string(writeKey);
    const Loaded mod{build(pkg, work + "/" + spec.name + "_segment" + tag + ".so", c), writeKey, pkg};
    if (!mod.module) return fail("cannot build the emulated kernels of " + spec.name);
    Loaded other{nullptr, rebuiltKey, rebuilt};
    if (!rebuilt.empty()) {
      other.module = build(rebuilt, work + "/" + spec.name + "_segment" + tag + "_rebuilt.so", c);
      if (!other.module) return fail("cannot build the emulated kernels of " + rebuilt);
    }
    const Loaded* cmp = other.module ? &other : nullptr;
    for (const Problem& p : problems) {
      if (!p.cu.empty() && !spec.varlen) continue;
      if (c.summaryPairs && &p != &problems[0] && p.cu.empty()) continue;
      ok = checkOnce(spec, mod, cmp, c, p, 2, ++seed) && ok;
    }
    if (c.summaryPairs) continue;
    if (gvaOk)
      ok = checkOnce(gva, mod, cmp, c, {"GVA", 1, 300, 1, {}, true, true, (int)gva.gva_ratio}, 2, ++seed) && ok;
    // one segment per sequence (L past the sequence's chunks): the fold is one step from the initial state
    ok = checkOnce(spec, mod, cmp, c, problems[0], 64, ++seed) && ok;
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
