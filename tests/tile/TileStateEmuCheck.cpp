// CPU check of a package's forward state_output (both chunk roles printed from tile IR against
// runtime/device/dgps/tile, as every kernel of a package is). The package's kernels.cu is compiled for the CPU
// emulator of tests/emu and launched with the runtime's forward geometry (LaunchContract.h forwardGeometry). Per
// problem, on fresh seeded inputs and NaN-poisoned outputs and workspace:
//   1. the roles before state_output run once (chunk_local writes the workspace; with a preconditioner
//      precond_summary / precond_scan write the chunk-start states and the final preconditioner state, compared
//      with the float64 reference too);
//   2. state_output runs on that workspace into poisoned o and final state (with a preconditioner its producer
//      warpgroup rebuilds P⊙k or P⊙q, with two stages and with one);
//   3. o and the final state are compared with the float64 reference (dgps::runReference).
// Problems: T = 100 (a partial last chunk) with B = 2 and an initial state where the spec takes one; varlen
// cu = {0, 37, 100} and a padded buffer cu = {0, 37, 71} (rows past 71 must read back as zeros) when the
// spec allows it; H = 2 (or the spec's), and a GVA problem (2 value heads per key
// head) when the spec's reference allows it. K = V = 64 with C = 64, BV = 64, 2 stages (the warpgroup-MMA
// path on sm_90a, emulated), K = V = 64 with C = 32, BV = 64 and K = V = 128 with C = 32, BV = 128 (the same
// path over 32-row chunks, one and two warpgroups) and K = V = 32 with C = 32, BV = 32, 1 stage (mma.sync, two
// warps), bf16 inputs;
// fp16 inputs once (dense, K = V = 64, wide) where the spec takes them.
//
//   dgps-tile-state-emu-check PACKAGE_DIR WORK_DIR
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

using dgps_emu::LoadedPackage;
using dgps_emu::relErr;
using dgps_emu::f32Of;
using dgps_emu::featuresOf;

constexpr double kTolOut = 1e-2;    // bf16 inputs, operands and output (the GPU suite's forward tolerance)
constexpr double kTolState = 1e-2;  // f32 state built from bf16 tensor-core products

struct Config {
  int chunk, block_v, warps, stages;
  bool f16;  ///< fp16 inputs and output (re-encoded to bf16 for the tensor cores)
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-tile-state-emu-check: %s\n", msg.c_str());
  return 1;
}

/// The package compiled for one (K, configuration).
bool build(const std::string& tilePkg, const std::string& tag, int K, const Config& c, LoadedPackage& m) {
  const std::string tileSo = tag + "_tile_state_emu.so";
  const dgps_emu::KernelConfig kc{K, K, c.f16, c.chunk, c.block_v, c.warps, c.stages};
  if (!dgps_emu::compileForEmu(tilePkg + "/kernels.cu", tileSo, kc)) return false;
  m.tile = dgps_emu::openEmuModule(tileSo);
  m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
  m.dir = tilePkg;
  return m.tile != nullptr;
}

using dgps_emu::launchRole;

/// One forward problem: the two state_output kernels on one workspace, then o and the final state.
bool checkOnce(const dgps::Spec& spec, const LoadedPackage& m, const Config& cfg, int K, std::int64_t B, std::int64_t T,
               std::int64_t H, std::vector<std::int64_t> cu, std::uint64_t seed) {
  dgps::ReferenceProblem s;
  s.batch = B;
  s.seq_len = T;
  s.heads_qk = H;
  s.heads_v = H * spec.gva_ratio;
  s.key_dim = s.value_dim = K;
  s.cu_seqlens = cu;
  const dgps::ReferenceInputs in = dgps::generateInputs(spec, s, seed, cfg.f16 ? dgps::ScalarType::F16 : dgps::ScalarType::BF16);
  const dgps::ReferenceOutputs ref = dgps::runReference(spec, in);
  const std::int64_t HV = s.heads_v, V = K, N = s.numSeqs();

  auto has = [&](const char* n) { return in.count(n) != 0; };
  auto floats = [&](const char* n) { return has(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  std::vector<float> g = floats("g"), beta = floats("beta"), s0 = floats("initial_state"), pg = floats("precond_g"),
                     pb = floats("precond_beta"), pc = floats("precond_center"), p0 = floats("initial_precond_state");
  std::vector<std::int64_t> cuv = cu;
  const size_t nO = (size_t)(B * T * HV * V), nS = (size_t)(N * HV * K * V);
  std::vector<std::uint16_t> oTile(nO, cfg.f16 ? 0x7e01 : 0x7fc1);  // poison: NaN
  std::vector<float> sTile(nS, NAN);
  // the preconditioner's final state (written by precond_scan, before either state_output)
  std::vector<float> pT(ref.has_final_precond_state ? (size_t)ref.final_precond_state.numel() : 0, NAN);
  auto ptr = [](std::vector<float>& v) -> const float* { return v.empty() ? nullptr : v.data(); };

  const dgps::launch::FeatureSet f = featuresOf(spec, m);
  dgps::launch::ProblemShape ls;
  ls.B = B;
  ls.T = T * dgps::householderSteps(spec);  // the kernels' row axis: T·n_h steps (abi.h)
  ls.N = N;
  ls.H = H;
  ls.HV = HV;
  ls.K = K;
  ls.V = V;
  ls.varlen = cu.empty() ? 0 : 1;
  ls.f16 = cfg.f16 ? 1 : 0;
  dgps::launch::TileConfig tc;
  tc.chunk = cfg.chunk;
  tc.block_v = cfg.block_v;
  tc.warps = cfg.warps;
  tc.stages = cfg.stages;
  const dgps_emu::ManifestWorkspace W = dgps_emu::manifestWorkspace(m.dir, ls, tc);
  std::vector<unsigned char> ws(W.bytes + 256, 0xFF);

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
  a.final_precond_state = pT.empty() ? nullptr : pT.data();
  a.cu_seqlens = cuv.empty() ? nullptr : cuv.data();
  a.workspace = ws.data();
  a.batch = B;
  a.seq_len = T * dgps::householderSteps(spec);
  a.num_seqs = N;
  a.heads_qk = H;
  a.heads_v = HV;
  a.scale = (float)(spec.scale ? *spec.scale : 1.0 / std::sqrt((double)K));
  dgps::set_index_divisors(a, cfg.chunk);  // after the shape fields (abi.h)
  dgps_emu::setWorkspaceOffsets(a, W);  // the plan's region offsets, as the runtime passes them
  // full chunks load q and k by tensor copies (the partial last chunk by cp.async), as on an sm_90 GPU
  if (dgps_emu::encodeRowMaps(a, a.batch * T, H, K, cfg.chunk, dgps::householderSteps(spec), HV, V, cfg.block_v,
                              spec.decay.kind == dgps::DecayKind::Diagonal))
    dgps_emu::encodeWorkspaceMaps(a, W, ls, cfg.chunk);

  int roles[dgps::launch::kMaxRoles];
  const int nr = dgps::launch::forwardRoles(f, roles);
  const std::string prefix = "dgps_" + spec.name + "_fwd_";
  bool ok = true, seen = false;
  for (int i = 0; i < nr && ok; ++i) {
    const std::string role = dgps::launch::roleName(roles[i]);
    const dgps::launch::Geometry geo = dgps::launch::forwardGeometry(roles[i], f, ls, tc);
    if (role != "state_output") {
      a.o = oTile.data();
      a.final_state = sTile.data();
      ok = launchRole(m.tile, prefix + role, geo, a);
      continue;
    }
    seen = true;
    a.o = oTile.data();
    a.final_state = ref.has_final_state ? sTile.data() : nullptr;
    ok = launchRole(m.tile, prefix + role, geo, a);
  }
  if (!ok) return false;
  if (!seen) {
    std::fprintf(stderr, "%s has no state_output role\n", spec.name.c_str());
    return false;
  }
  // NaN poison left anywhere compares unequal to the reference
  std::vector<double> od(nO);
  for (size_t i = 0; i < nO; ++i) od[i] = cfg.f16 ? dgps::f16BitsToDouble(oTile[i]) : dgps::bf16BitsToDouble(oTile[i]);
  const double eo = relErr(od, ref.o);
  const double es =
      ref.has_final_state ? relErr(std::vector<double>(sTile.begin(), sTile.end()), ref.final_state) : 0.0;
  const double ep = ref.has_final_precond_state
                       ? relErr(std::vector<double>(pT.begin(), pT.end()), ref.final_precond_state)
                       : 0.0;
  const bool pass = eo <= kTolOut && es <= kTolState && ep <= kTolState;
  char precondErr[64] = "";
  if (ref.has_final_precond_state) std::snprintf(precondErr, sizeof precondErr, ", final precond state %.3g", ep);
  std::printf(
      "  %s %s C=%d BV=%d stages=%d K=V=%d B=%lld T=%lld N=%lld H=%lld HV=%lld%s%s: vs float64 rel err o %.3g, final state %.3g%s  %s\n",
      spec.name.c_str(), cfg.f16 ? "f16" : "bf16", cfg.chunk, cfg.block_v, cfg.stages, K, (long long)B, (long long)T, (long long)N, (long long)H,
      (long long)HV, cu.empty() ? "" : " varlen", s0.empty() ? "" : " initial state", eo, es,
      precondErr, pass ? "ok" : "FAIL");
  return pass;
}

}  // namespace

int run(int argc, char** argv) {
  if (argc != 3) return fail("usage: dgps-tile-state-emu-check PACKAGE_DIR WORK_DIR");
  const std::string tilePkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(tilePkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + tilePkg + "/spec.yaml");
  const dgps::Spec& spec = *parsed.spec;
  // A package without a state_output printed from tile IR has nothing to check: reported as skipped, never
  // passed.
  {
    std::ifstream cu(tilePkg + "/kernels.cu");
    std::stringstream text;
    text << cu.rdbuf();
    if (text.str().find("Generated from tile IR (" + spec.name + "_state_output") == std::string::npos) {
      std::printf(
          "SKIPPED: %s/kernels.cu has no state_output printed from tile IR (%s's state_output has no tile "
          "lowering)\n",
          tilePkg.c_str(), spec.name.c_str());
      return 77;
    }
  }
  // Head dims: K = V = 64 with the wide configuration and 32 with the narrow one. The kernels take any K, V
  // the launch rules allow; a dim the spec does not list is added to a copy of the spec for the reference
  // and the input generator (the spec's dims limit its packages' tuning, not the maths).
  auto withDim = [](dgps::Spec s, int d) {
    if (!std::count(s.key_dims.begin(), s.key_dims.end(), d)) s.key_dims.push_back(d);
    if (!std::count(s.value_dims.begin(), s.value_dims.end(), d)) s.value_dims.push_back(d);
    return s;
  };
  const std::int64_t H = spec.heads_qk > 0 ? spec.heads_qk : 2;
  // The GVA problem: 2 value heads per key head (or the spec's ratio), when the reference accepts it (it
  // refuses GVA for a hypergrad preconditioner).
  dgps::Spec gva = withDim(spec, 64);
  gva.gva_ratio = spec.gva_ratio > 1 ? spec.gva_ratio : 2;
  bool gvaOk = true;
  try {
    dgps::ReferenceProblem probe;
    probe.batch = 1;
    probe.seq_len = 8;
    probe.heads_qk = 1;
    probe.heads_v = gva.gva_ratio;
    probe.key_dim = probe.value_dim = 64;
    (void)dgps::generateInputs(gva, probe, 1, dgps::ScalarType::BF16);
  } catch (const std::exception& e) {
    gvaOk = false;
    std::printf("  %s: no GVA problem (%s)\n", spec.name.c_str(), e.what());
  }
  bool ok = true;
  const struct {
    int K;
    Config c;
  } runs[] = {{64, {64, 64, 4, 2, false}},  {32, {32, 32, 4, 1, false}},   {64, {64, 64, 4, 2, true}},
              {64, {32, 64, 4, 2, false}},  // warpgroup MMA over 32-row chunks (m64n32k16)
              {128, {32, 128, 4, 2, false}}};  // two warpgroups; the rank update's N = KP = 128
  const bool takesF16 =
      std::find(spec.input_dtypes.begin(), spec.input_dtypes.end(), dgps::DType::F16) != spec.input_dtypes.end();
  for (const auto& r : runs) {
    if (r.c.f16 && !takesF16) continue;
    const dgps::Spec sp = withDim(spec, r.K);
    const std::string tag = work + "/" + spec.name + "_k" + std::to_string(r.K) + "_c" + std::to_string(r.c.chunk) +
                            (r.c.f16 ? "_f16" : "");
    LoadedPackage m;
    if (!build(tilePkg, tag, r.K, r.c, m)) return fail("cannot build the emulated kernels of " + spec.name);
    ok = checkOnce(sp, m, r.c, r.K, 2, 100, H, {}, 7150 + r.K + (r.c.f16 ? 100 : 0)) && ok;
    if (r.c.f16) continue;  // fp16: the dense problem only
    if (spec.varlen) ok = checkOnce(sp, m, r.c, r.K, 1, 100, H, {0, 37, 100}, 7151 + r.K) && ok;
    // a token buffer longer than the packed sequences: o rows past cu_seqlens[N] must come back as zeros
    if (spec.varlen && r.K == 64) ok = checkOnce(sp, m, r.c, r.K, 1, 100, H, {0, 37, 71}, 7153 + r.K) && ok;
    if (gvaOk && r.K == 64) ok = checkOnce(gva, m, r.c, r.K, 1, 100, 1, {}, 7152 + r.K) && ok;
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
