// Standalone harness of the DGPS device kernels (runtime/device/dgps/device): correctness against an
// independent float64 reference for every test configuration, then timings on the GPU.
//
//   harness --backend gpu|emu --dir <variants dir> [--filter S] [--no-timing] [--emu-small]
//
// Kernel variants (variants.txt) are built by run.sh: CUBINs (NVRTC, sm_90a) for the GPU, shared objects for
// the CPU emulator. Every check draws fresh random inputs, poisons outputs and the workspace with NaN, runs
// the roles in launch_rules.h order and compares ‖out − ref‖/‖ref‖; a non-finite value always fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <atomic>
#include <vector>

#include "backend.h"
#include "dgps/device/abi.h"
#include "dgps/device/launch_rules.h"
#include "reference.h"

namespace gk {
namespace {

const Feat kConfigs[] = {
#define DGPS_CONFIG(n, ...) {#n, __VA_ARGS__},
#include "configs/configs.inc"
#undef DGPS_CONFIG
};

const Feat* find_config(const std::string& n) {
  for (const Feat& f : kConfigs)
    if (n == f.name) return &f;
  return nullptr;
}

struct Variant {
  std::string cfg;
  int K = 128, V = 128;
  bool f16 = false;
  int C = 64, BV = 64, W = 4, S = 2;
  std::string tag;  // extra build flavour (variants.txt 9th column), e.g. "nowg" = -DDGPS_NO_WGMMA
  std::string key() const {
    char b[160];
    std::snprintf(b, sizeof b, "%s_k%d_v%d_%s_c%d_bv%d_w%d_s%d", cfg.c_str(), K, V, f16 ? "f16" : "bf16", C, BV, W, S);
    return tag.empty() ? std::string(b) : std::string(b) + "_" + tag;
  }
};

// ---- numerics helpers ----
uint16_t to_bf16(double x) {
  float f = (float)x;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_f16(double x) {
  // round to nearest even via float -> half using the bit layout (values here are moderate)
  float f = (float)x;
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  float a = std::fabs(f);
  if (a >= 65520.f) return sign | 0x7c00;
  if (a < std::ldexp(1.f, -25)) return sign;
  int e;
  std::frexp(a, &e);
  int ex = e - 1 + 15;
  if (ex <= 0) return sign | (uint16_t)std::nearbyint(a * std::ldexp(1.f, 24));
  float q = std::nearbyint((a * std::ldexp(1.f, -(e - 1)) - 1.f) * 1024.f);
  if (q >= 1024.f) {
    q = 0.f;
    ++ex;
  }
  if (ex >= 31) return sign | 0x7c00;
  return sign | (uint16_t)(ex << 10) | (uint16_t)q;
}
double from_f16(uint16_t h) {
  const uint32_t s = (h >> 15) & 1u, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  double v;
  if (e == 0) v = std::ldexp((double)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp((double)(m | 0x400u), (int)e - 25);
  return s ? -v : v;
}

struct Err {
  double rel = 0, maxrel = 0;
  bool finite = true;
};
Err compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Err e;
  double num = 0, den = 0, mx = 0, mref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) e.finite = false;
    const double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    mx = std::max(mx, std::fabs(d));
    mref = std::max(mref, std::fabs(ref[i]));
  }
  e.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  e.maxrel = mref > 0 ? mx / mref : mx;
  if (!e.finite) e.rel = e.maxrel = INFINITY;
  return e;
}

// ---- random inputs ----
struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(rng); }
  double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); }
  static double logsigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
};

struct GateMode {
  double scale = 1.0;      // g = logsigmoid(N(0,1)) * scale
  double mask_p = 0.0;     // probability of a masked gate (g = -1000)
};

/// Fills a Problem with random inputs for `f` (activations rounded to the kernel dtype).
Problem make_problem(const Feat& f, int64_t B, int64_t T, int64_t H, int64_t HV, int K, int V, const std::vector<int64_t>& cu,
                     bool s0, bool p0, bool f16, GateMode gm, uint64_t seed) {
  Gen r(seed);
  Problem p;
  p.B = B;
  p.T = T;
  p.H = H;
  p.HV = HV;
  p.K = K;
  p.V = V;
  p.cu = cu;
  p.scale = 1.0 / std::sqrt((double)K);
  auto act = [&](double x) { return f16 ? from_f16(to_f16(x)) : from_bf16(to_bf16(x)); };
  const int64_t rows = B * T;
  p.q.resize((size_t)(rows * H * K));
  p.k.resize(p.q.size());
  p.v.resize((size_t)(rows * HV * V));
  for (auto& x : p.q) x = act(r.normal());
  for (auto& x : p.k) x = act(r.normal());
  for (auto& x : p.v) x = act(r.normal());
  auto gate = [&]() {
    if (gm.mask_p > 0 && r.uniform(0, 1) < gm.mask_p) return -1000.0;
    return (double)(float)(Gen::logsigmoid(r.normal()) * gm.scale);
  };
  if (f.decay == 1) {
    p.g.resize((size_t)(rows * HV));
    for (auto& x : p.g) x = gate();
  } else if (f.decay == 2) {
    p.g.resize((size_t)(rows * HV * K));
    for (auto& x : p.g) x = gate();
  }
  if (f.gain) {
    p.beta.resize((size_t)(rows * HV));
    for (auto& x : p.beta) x = (double)(float)Gen::sigmoid(r.normal());
  }
  if (f.precond == 1) {
    p.pg.resize((size_t)(rows * H));
    p.pb.resize((size_t)(rows * H));
    for (auto& x : p.pg) x = (double)(float)Gen::logsigmoid(r.normal() + 2.5);
    for (auto& x : p.pb) x = (double)(float)Gen::sigmoid(r.normal());
    p.pc.resize((size_t)H);
    for (auto& x : p.pc) x = (double)(float)(-0.2 + 0.1 * r.normal());
  }
  const int64_t N = p.N();
  if (s0) {
    p.has_s0 = true;
    p.s0.resize((size_t)(N * HV * K * V));
    for (auto& x : p.s0) x = (double)(float)(0.5 * r.normal());
  }
  if (p0 && f.precond == 1) {
    p.has_p0 = true;
    p.p0.resize((size_t)(N * H * K));
    for (auto& x : p.p0) x = (double)(float)(f.source == 0 ? r.uniform(0.0, 2.0) : r.uniform(0.5, 1.5));
  }
  return p;
}

// ---- device buffers ----
struct DevBuf {
  Backend* be = nullptr;
  uint64_t p = 0;
  size_t n = 0;
  DevBuf() = default;
  DevBuf(Backend* b, size_t bytes) : be(b), p(b->alloc(bytes)), n(bytes) {}
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : be(o.be), p(o.p), n(o.n) { o.p = 0; }
  ~DevBuf() {
    if (be && p) be->free(p);
  }
};

std::vector<uint16_t> encode_act(const std::vector<double>& x, bool f16) {
  std::vector<uint16_t> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = f16 ? to_f16(x[i]) : to_bf16(x[i]);
  return r;
}
std::vector<float> to_f32(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

struct Loaded {
  int module = -1;
  std::string prefix;  // dgps_<cfg>
};

class Harness {
 public:
  Harness(Backend& be, std::string dir, std::string ext) : be_(be), dir_(std::move(dir)), ext_(std::move(ext)) {}

  bool get(const Variant& v, Loaded& out, std::string& why) {
    auto it = loaded_.find(v.key());
    if (it != loaded_.end()) {
      out = it->second;
      return out.module >= 0;
    }
    Loaded l;
    l.prefix = "dgps_" + v.cfg;
    l.module = be_.load(dir_ + "/" + v.key() + ext_);
    loaded_[v.key()] = l;
    out = l;
    if (l.module < 0) why = "variant " + v.key() + " not loadable: " + be_.error();
    return l.module >= 0;
  }

  struct FwdResult {
    bool ran = false;
    std::string why;
    std::vector<double> o, sT, pT;
  };

  /// Runs the forward roles on problem p. Outputs decoded to double.
  FwdResult forward(const Variant& v, const Feat& f, const Problem& p, bool want_final, int reps = 0,
                    std::vector<float>* role_ms = nullptr, float* total_ms = nullptr) {
    FwdResult r;
    Loaded L;
    if (!get(v, L, r.why)) return r;
    dgps::launch::FeatureSet fs;
    fs.decay = f.decay;
    fs.gain = f.gain ? 1 : 0;
    fs.precond = f.precond;
    fs.side = f.side;
    fs.source = f.source;
    fs.solve = f.solve;
    dgps::launch::ProblemShape sh;
    sh.B = p.B;
    sh.T = p.T;
    sh.N = p.N();
    sh.H = p.H;
    sh.HV = p.HV;
    sh.K = p.K;
    sh.V = p.V;
    sh.varlen = p.cu.empty() ? 0 : 1;
    sh.f16 = v.f16 ? 1 : 0;
    dgps::launch::TileConfig tc;
    tc.chunk = v.C;
    tc.block_v = v.BV;
    tc.warps = v.W;
    tc.stages = v.S;
    const size_t rows = (size_t)(p.B * p.T);
    DevBuf q(&be_, p.q.size() * 2), k(&be_, p.k.size() * 2), vv(&be_, p.v.size() * 2), o(&be_, rows * p.HV * p.V * 2);
    be_.upload(q.p, encode_act(p.q, v.f16).data(), q.n);
    be_.upload(k.p, encode_act(p.k, v.f16).data(), k.n);
    be_.upload(vv.p, encode_act(p.v, v.f16).data(), vv.n);
    be_.fill(o.p, 0xFF, o.n);
    auto upf = [&](const std::vector<double>& x) {
      DevBuf b(&be_, x.size() * 4);
      if (!x.empty()) be_.upload(b.p, to_f32(x).data(), b.n);
      return b;
    };
    DevBuf g = upf(p.g), beta = upf(p.beta), pg = upf(p.pg), pb = upf(p.pb), pc = upf(p.pc), s0 = upf(p.s0), p0 = upf(p.p0);
    DevBuf cu(&be_, p.cu.size() * 8 + 8);
    if (!p.cu.empty()) be_.upload(cu.p, p.cu.data(), p.cu.size() * 8);
    const int64_t N = p.N();
    DevBuf sT(&be_, (size_t)(N * p.HV * p.K * p.V * 4)), pT(&be_, (size_t)(N * p.H * p.K * 4));
    be_.fill(sT.p, 0xFF, sT.n);
    be_.fill(pT.p, 0xFF, pT.n);
    const unsigned long long wsb = dgps::launch::workspaceBytes(fs, sh, tc);
    DevBuf ws(&be_, (size_t)wsb + 256);
    be_.fill(ws.p, 0xFF, ws.n);

    dgps::ForwardArgs a{};
    auto ptr = [](const DevBuf& b, bool use) -> const void* { return use ? reinterpret_cast<const void*>(b.p) : nullptr; };
    a.q = ptr(q, true);
    a.k = ptr(k, true);
    a.v = ptr(vv, true);
    a.g = static_cast<const float*>(ptr(g, !p.g.empty()));
    a.beta = static_cast<const float*>(ptr(beta, !p.beta.empty()));
    a.precond_g = static_cast<const float*>(ptr(pg, !p.pg.empty()));
    a.precond_beta = static_cast<const float*>(ptr(pb, !p.pb.empty()));
    a.precond_center = static_cast<const float*>(ptr(pc, !p.pc.empty()));
    a.initial_state = static_cast<const float*>(ptr(s0, p.has_s0));
    a.initial_precond_state = static_cast<const float*>(ptr(p0, p.has_p0));
    a.cu_seqlens = static_cast<const int64_t*>(ptr(cu, !p.cu.empty()));
    a.o = reinterpret_cast<void*>(o.p);
    a.final_state = want_final ? reinterpret_cast<float*>(sT.p) : nullptr;
    a.final_precond_state = (want_final && f.precond == 1) ? reinterpret_cast<float*>(pT.p) : nullptr;
    a.workspace = reinterpret_cast<void*>(ws.p);
    a.batch = p.B;
    a.seq_len = p.T;
    a.num_seqs = N;
    a.heads_qk = p.H;
    a.heads_v = p.HV;
    a.scale = (float)p.scale;

    int roles[dgps::launch::kMaxRoles];
    const int nr = dgps::launch::forwardRoles(fs, roles);
    std::vector<void*> fns((size_t)nr);
    std::vector<LaunchDims> dims((size_t)nr);
    for (int i = 0; i < nr; ++i) {
      const std::string nm = L.prefix + "_fwd_" + dgps::launch::roleName(roles[i]);
      fns[(size_t)i] = be_.function(L.module, nm);
      if (!fns[(size_t)i]) {
        r.why = "missing kernel " + nm;
        return r;
      }
      const dgps::launch::Geometry geo = dgps::launch::forwardGeometry(roles[i], fs, sh, tc);
      dims[(size_t)i].grid = geo.grid.x;
      dims[(size_t)i].block = geo.block.x;
      dims[(size_t)i].smem = (size_t)geo.smem_bytes;
    }
    auto run_once = [&](bool timed) -> bool {
      for (int i = 0; i < nr; ++i) {
        if (timed) be_.record(i);
        if (!be_.launch(fns[(size_t)i], dims[(size_t)i], &a, sizeof(a), false)) return false;
      }
      if (timed) be_.record(nr);
      return true;
    };
    if (!run_once(false) || !be_.sync()) {
      r.why = "launch failed: " + be_.error();
      return r;
    }
    // outputs of the first run (poisoned buffers)
    std::vector<uint16_t> oh(rows * p.HV * p.V);
    be_.download(oh.data(), o.p, o.n);
    r.o.resize(oh.size());
    for (size_t i = 0; i < oh.size(); ++i) r.o[i] = v.f16 ? from_f16(oh[i]) : from_bf16(oh[i]);
    if (want_final) {
      std::vector<float> s((size_t)(N * p.HV * p.K * p.V)), pp((size_t)(N * p.H * p.K));
      be_.download(s.data(), sT.p, sT.n);
      be_.download(pp.data(), pT.p, pT.n);
      r.sT.assign(s.begin(), s.end());
      r.pT.assign(pp.begin(), pp.end());
    }
    if (reps > 0) {
      std::vector<std::vector<float>> per((size_t)nr);
      std::vector<float> tot;
      for (int it = 0; it < 3; ++it) run_once(false);
      for (int it = 0; it < reps; ++it) {
        run_once(true);
        be_.sync();
        for (int i = 0; i < nr; ++i) per[(size_t)i].push_back(be_.elapsed(i, i + 1));
        tot.push_back(be_.elapsed(0, nr));
      }
      auto med = [](std::vector<float> x) {
        std::sort(x.begin(), x.end());
        return x[x.size() / 2];
      };
      if (role_ms) {
        role_ms->clear();
        for (auto& x : per) role_ms->push_back(med(x));
      }
      if (total_ms) *total_ms = med(tot);
    }
    r.ran = true;
    return r;
  }

  struct DecResult {
    bool ran = false;
    std::string why;
    std::vector<double> o, s, ps;
  };
  /// One decode step: q/k/v etc. from p (T = 1, N = B); state from p.s0 / p.p0 (updated in place).
  DecResult decode(const Variant& v, const Feat& f, const Problem& p, int reps = 0, float* ms = nullptr) {
    DecResult r;
    Loaded L;
    if (!get(v, L, r.why)) return r;
    dgps::launch::FeatureSet fs;
    fs.decay = f.decay;
    fs.gain = f.gain ? 1 : 0;
    fs.precond = f.precond;
    fs.side = f.side;
    fs.source = f.source;
    fs.solve = f.solve;
    dgps::launch::ProblemShape sh;
    sh.B = p.B;
    sh.T = 1;
    sh.N = p.B;
    sh.H = p.H;
    sh.HV = p.HV;
    sh.K = p.K;
    sh.V = p.V;
    dgps::launch::TileConfig tc;
    tc.block_v = v.BV;
    DevBuf q(&be_, p.q.size() * 2), k(&be_, p.k.size() * 2), vv(&be_, p.v.size() * 2), o(&be_, (size_t)(p.B * p.HV * p.V * 2));
    be_.upload(q.p, encode_act(p.q, v.f16).data(), q.n);
    be_.upload(k.p, encode_act(p.k, v.f16).data(), k.n);
    be_.upload(vv.p, encode_act(p.v, v.f16).data(), vv.n);
    be_.fill(o.p, 0xFF, o.n);
    auto upf = [&](const std::vector<double>& x) {
      DevBuf b(&be_, x.size() * 4);
      if (!x.empty()) be_.upload(b.p, to_f32(x).data(), b.n);
      return b;
    };
    DevBuf g = upf(p.g), beta = upf(p.beta), pg = upf(p.pg), pb = upf(p.pb), pc = upf(p.pc), st = upf(p.s0), ps = upf(p.p0);
    dgps::DecodeArgs a{};
    a.q = reinterpret_cast<const void*>(q.p);
    a.k = reinterpret_cast<const void*>(k.p);
    a.v = reinterpret_cast<const void*>(vv.p);
    a.g = p.g.empty() ? nullptr : reinterpret_cast<const float*>(g.p);
    a.beta = p.beta.empty() ? nullptr : reinterpret_cast<const float*>(beta.p);
    a.precond_g = p.pg.empty() ? nullptr : reinterpret_cast<const float*>(pg.p);
    a.precond_beta = p.pb.empty() ? nullptr : reinterpret_cast<const float*>(pb.p);
    a.precond_center = p.pc.empty() ? nullptr : reinterpret_cast<const float*>(pc.p);
    a.state = reinterpret_cast<float*>(st.p);
    a.precond_state = f.precond == 1 ? reinterpret_cast<float*>(ps.p) : nullptr;
    a.o = reinterpret_cast<void*>(o.p);
    a.batch = p.B;
    a.heads_qk = p.H;
    a.heads_v = p.HV;
    a.scale = (float)p.scale;
    void* fn = be_.function(L.module, L.prefix + "_decode");
    if (!fn) {
      r.why = "missing decode kernel";
      return r;
    }
    const dgps::launch::Geometry geo = dgps::launch::decodeGeometry(fs, sh, tc);
    LaunchDims d;
    d.grid = geo.grid.x;
    d.block = geo.block.x;
    d.smem = (size_t)geo.smem_bytes;
    if (!be_.launch(fn, d, &a, sizeof(a), true) || !be_.sync()) {
      r.why = "decode launch failed: " + be_.error();
      return r;
    }
    std::vector<uint16_t> oh((size_t)(p.B * p.HV * p.V));
    be_.download(oh.data(), o.p, o.n);
    r.o.resize(oh.size());
    for (size_t i = 0; i < oh.size(); ++i) r.o[i] = v.f16 ? from_f16(oh[i]) : from_bf16(oh[i]);
    std::vector<float> s(p.s0.size()), pp(p.p0.size());
    be_.download(s.data(), st.p, st.n);
    if (!pp.empty()) be_.download(pp.data(), ps.p, ps.n);
    r.s.assign(s.begin(), s.end());
    r.ps.assign(pp.begin(), pp.end());
    if (reps > 0 && ms) {
      std::vector<float> t;
      for (int it = 0; it < 3; ++it) be_.launch(fn, d, &a, sizeof(a), true);
      for (int it = 0; it < reps; ++it) {
        be_.record(0);
        be_.launch(fn, d, &a, sizeof(a), true);
        be_.record(1);
        t.push_back(be_.elapsed(0, 1));
      }
      std::sort(t.begin(), t.end());
      *ms = t[t.size() / 2];
    }
    r.ran = true;
    return r;
  }

 private:
  Backend& be_;
  std::string dir_, ext_;
  std::map<std::string, Loaded> loaded_;
};

// ---- test cases ----
struct Case {
  std::string tag;
  Variant v;
  int64_t B = 1, T = 64, H = 2, HV = 2;
  std::vector<int64_t> lens;  // varlen when non-empty (B = 1)
  int64_t pad = 0;            // varlen: token rows after the last sequence (o must be 0 there)
  bool s0 = true, p0 = true;
  GateMode gm;
};

Variant var(const std::string& cfg, int K = 128, int V = 128, bool f16 = false, int C = 64, int BV = 64, int W = 4, int S = 2,
            const std::string& tag = "") {
  Variant v;
  v.tag = tag;
  v.cfg = cfg;
  v.K = K;
  v.V = V;
  v.f16 = f16;
  v.C = C;
  v.BV = BV;
  v.W = W;
  v.S = S;
  return v;
}

std::vector<Case> forward_cases(bool small) {
  std::vector<Case> cs;
  auto add = [&](const std::string& tag, Variant v, int64_t B, int64_t T, int64_t H, int64_t HV, bool s0 = true,
                 bool p0 = true, std::vector<int64_t> lens = {}, GateMode gm = GateMode()) {
    Case c;
    c.tag = tag;
    c.v = v;
    c.B = B;
    c.T = T;
    c.H = H;
    c.HV = HV;
    c.s0 = s0;
    c.p0 = p0;
    c.lens = lens;
    c.gm = gm;
    cs.push_back(c);
  };
  const int64_t TL = small ? 200 : 1000;
  const char* all[] = {"gdn", "deltanet", "kda", "pgdn", "pkda", "osdn", "la", "mamba2", "atq"};
  for (const char* c : all) {
    for (int64_t T : {(int64_t)1, (int64_t)63, (int64_t)64, (int64_t)65, TL}) add("T", var(c), 2, T, 2, 2);
    add("gva2", var(c), 1, 130, 2, 4);
    add("no-init", var(c), 2, 100, 1, 1, false, false);
    add("varlen", var(c), 1, 0, 2, 2, true, true, {1, 63, 64, 65, 7, 130});
  }
  add("osdn_post", var("osdn_post", 64, 64, false, 32), 2, 150, 2, 2);
  add("osdn_post-varlen", var("osdn_post", 64, 64, false, 32), 1, 0, 2, 2, true, true, {1, 40, 33, 90});
  for (const char* c : {"gdn", "pgdn", "kda"}) add("K64", var(c, 64, 64), 2, 150, 2, 4);
  for (const char* c : {"gdn", "pgdn", "pkda"}) add("K120", var(c, 120, 120), 2, 150, 2, 2);
  add("K120-varlen", var("gdn", 120, 120), 1, 0, 1, 2, true, true, {1, 77, 64});
  // A token buffer longer than its sequences: rows past cu[N] (in several chunk slots) are written as zeros by
  // chunk_local; a NaN left there fails the check (outputs are poisoned).
  for (const char* c : {"gdn", "kda", "pgdn", "osdn"}) {
    add("varlen-padded", var(c), 1, 0, 2, 2, true, true, {70, 65});
    cs.back().pad = 200;
  }
  add("varlen-padded-C16", var("gdn", 128, 128, false, 16, 64, 4, 1), 1, 0, 2, 2, true, true, {33, 20});
  cs.back().pad = 37;
  for (const char* c : {"gdn", "pgdn"}) add("f16", var(c, 128, 128, true), 2, 130, 2, 2);
  add("C32", var("gdn", 128, 128, false, 32), 2, 150, 2, 2);
  add("C16", var("gdn", 128, 128, false, 16, 64, 4, 1), 2, 150, 2, 2);
  add("C32", var("kda", 128, 128, false, 32), 2, 150, 2, 2);
  add("BV128", var("gdn", 128, 128, false, 64, 128, 4, 2), 2, 150, 2, 2);
  add("BV128-s1-w8", var("gdn", 128, 128, false, 64, 128, 8, 1), 2, 150, 2, 2);
  add("BV32", var("gdn", 128, 128, false, 64, 32, 4, 2), 2, 150, 2, 2);
  add("W2", var("gdn", 128, 128, false, 64, 64, 2, 2), 2, 150, 2, 2);
  add("mma.sync", var("gdn", 128, 128, false, 64, 128, 4, 2, "nowg"), 2, 150, 2, 2);
  add("BV128", var("pgdn", 128, 128, false, 64, 128, 4, 2), 2, 150, 2, 2);
  add("BV128-w8", var("kda", 128, 128, false, 64, 128, 8, 2), 2, 150, 2, 2);
  add("BV128-w8", var("pkda", 128, 128, false, 64, 128, 8, 1), 2, 150, 2, 2);
  add("S1", var("gdn", 128, 128, false, 64, 64, 4, 1), 2, 150, 2, 2);
  add("S1", var("pgdn", 128, 128, false, 64, 64, 4, 1), 1, 150, 2, 4);
  // steep / masked gates (docs/math.md §7.5, §4.3, §7.2)
  GateMode steep;
  steep.scale = 100.0;  // logsigmoid(U)/0.01
  GateMode masked;
  masked.mask_p = 0.7;
  add("steep-gates", var("gdn", 64, 64), 2, 75, 4, 4, true, true, {}, steep);
  add("masked-gates", var("gdn"), 1, 150, 2, 2, true, true, {}, masked);
  add("steep-gates", var("kda"), 1, 129, 2, 2, true, true, {}, steep);
  add("masked-gates", var("pkda"), 2, 150, 2, 2, true, true, {}, masked);
  GateMode mid;
  mid.scale = 12.0;  // ~ -6..-20 nats per token: diagonal blocks beyond the factorised range (docs/math.md §4.3)
  add("unbounded-gates", var("kda"), 1, 129, 2, 2, true, true, {}, mid);
  return cs;
}

bool config_filter(const std::string& f, const std::string& s) { return f.empty() || s.find(f) != std::string::npos; }

/// Runs fn(i) for i < n on all host cores (float64 references dominate the harness's wall time).
template <class F>
void parallel_for(size_t n, F fn) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::vector<std::thread> th;
  for (unsigned w = 0; w < std::min<size_t>(hw, n); ++w)
    th.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
    });
  for (auto& x : th) x.join();
}

struct Tally {
  int pass = 0, fail = 0;
};

void run_forward_checks(Harness& hx, bool small, const std::string& filter, Tally& t, uint64_t& seed) {
  struct Job {
    Case c;
    std::string label;
    const Feat* f = nullptr;
    uint64_t seed = 0;
    Problem p;
    RefOut ref;
  };
  std::vector<Job> jobs;
  for (const Case& c : forward_cases(small)) {
    Job j;
    j.c = c;
    j.label = c.v.key() + " " + c.tag + " B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " H" +
              std::to_string(c.H) + "/" + std::to_string(c.HV);
    if (!config_filter(filter, j.label)) continue;
    j.f = find_config(c.v.cfg);
    j.seed = ++seed;
    jobs.push_back(std::move(j));
  }
  parallel_for(jobs.size(), [&](size_t i) {
    Job& j = jobs[i];
    std::vector<int64_t> cu;
    int64_t T = j.c.T;
    if (!j.c.lens.empty()) {
      cu.push_back(0);
      for (int64_t l : j.c.lens) cu.push_back(cu.back() + l);
      T = cu.back() + j.c.pad;
    }
    j.p = make_problem(*j.f, j.c.B, T, j.c.H, j.c.HV, j.c.v.K, j.c.v.V, cu, j.c.s0, j.c.p0, j.c.v.f16, j.c.gm, j.seed);
    j.ref = reference(*j.f, j.p);
  });
  for (Job& j : jobs) {
    const Feat* f = j.f;
    Harness::FwdResult r = hx.forward(j.c.v, *f, j.p, true);
    if (!r.ran) {
      std::printf("FAIL %-60s : %s\n", j.label.c_str(), r.why.c_str());
      ++t.fail;
      continue;
    }
    const Err eo = compare(r.o, j.ref.o), es = compare(r.sT, j.ref.sT);
    Err ep;
    if (f->precond == 1) ep = compare(r.pT, j.ref.pT);
    const double tol = 1.5e-2;
    const bool ok = eo.rel <= tol && es.rel <= tol && ep.rel <= 1e-3 && eo.finite && es.finite && ep.finite;
    std::printf("%s %-60s o %.2e (max %.2e)  S %.2e  P %.2e\n", ok ? "ok  " : "FAIL", j.label.c_str(), eo.rel,
                eo.maxrel, es.rel, ep.rel);
    ++(ok ? t.pass : t.fail);
    j.p = Problem();
    j.ref = RefOut();
  }
}

void run_decode_checks(Harness& hx, const std::string& filter, Tally& t, uint64_t& seed) {
  struct D {
    Variant v;
    int64_t B, H, HV;
  };
  std::vector<D> ds;
  for (const char* c : {"gdn", "deltanet", "kda", "pgdn", "pkda", "osdn", "la", "mamba2", "atq"}) ds.push_back({var(c), 7, 2, 2});
  ds.push_back({var("gdn"), 3, 2, 4});
  ds.push_back({var("pgdn"), 3, 2, 4});
  ds.push_back({var("gdn", 120, 120), 3, 2, 2});
  ds.push_back({var("pkda", 120, 120), 3, 2, 2});
  ds.push_back({var("gdn", 128, 128, true), 3, 2, 2});
  ds.push_back({var("osdn_post", 64, 64, false, 32), 3, 2, 2});
  for (const D& d : ds) {
    const std::string label = "decode " + d.v.key() + " B" + std::to_string(d.B) + " H" + std::to_string(d.H) + "/" +
                              std::to_string(d.HV);
    if (!config_filter(filter, label)) continue;
    const Feat* f = find_config(d.v.cfg);
    const Problem p = make_problem(*f, d.B, 1, d.H, d.HV, d.v.K, d.v.V, {}, true, true, d.v.f16, GateMode(), ++seed);
    Problem pp = p;
    if (f->precond == 1 && !pp.has_p0) pp.has_p0 = true;
    const RefOut ref = reference(*f, pp);
    Harness::DecResult r = hx.decode(d.v, *f, pp);
    if (!r.ran) {
      std::printf("FAIL %-60s : %s\n", label.c_str(), r.why.c_str());
      ++t.fail;
      continue;
    }
    const Err eo = compare(r.o, ref.o), es = compare(r.s, ref.sT);
    Err ep;
    if (f->precond == 1) ep = compare(r.ps, ref.pT);
    const bool ok = eo.rel <= 1e-2 && es.rel <= 1e-4 && ep.rel <= 1e-4;
    std::printf("%s %-60s o %.2e  S %.2e  P %.2e\n", ok ? "ok  " : "FAIL", label.c_str(), eo.rel, es.rel, ep.rel);
    ++(ok ? t.pass : t.fail);
  }
}

/// Prefill (chunked, T−1 tokens) then one decode step equals the chunked forward over T tokens (docs/math.md §4.2).
void run_handoff_checks(Harness& hx, const std::string& filter, Tally& t, uint64_t& seed) {
  for (const char* c : {"gdn", "pgdn", "kda", "osdn"}) {
    for (int64_t T : {(int64_t)65, (int64_t)128}) {
      const Variant v = var(c);
      const std::string label = "handoff " + v.key() + " T" + std::to_string(T);
      if (!config_filter(filter, label)) continue;
      const Feat* f = find_config(c);
      const int64_t B = 2, H = 2, HV = 2, K = 128, V = 128;
      const Problem full = make_problem(*f, B, T, H, HV, K, V, {}, true, true, false, GateMode(), ++seed);
      const RefOut ref = reference(*f, full);
      // prefix problem: first T-1 tokens
      Problem pre = full;
      pre.T = T - 1;
      auto cut = [&](const std::vector<double>& x, int64_t per_row) {
        std::vector<double> y;
        for (int64_t b = 0; b < B; ++b)
          y.insert(y.end(), x.begin() + b * T * per_row, x.begin() + (b * T + T - 1) * per_row);
        return y;
      };
      auto last = [&](const std::vector<double>& x, int64_t per_row) {
        std::vector<double> y;
        for (int64_t b = 0; b < B; ++b)
          y.insert(y.end(), x.begin() + (b * T + T - 1) * per_row, x.begin() + (b * T + T) * per_row);
        return y;
      };
      pre.q = cut(full.q, H * K);
      pre.k = cut(full.k, H * K);
      pre.v = cut(full.v, HV * V);
      const int64_t gper = f->decay == 2 ? HV * K : HV;
      if (!full.g.empty()) pre.g = cut(full.g, gper);
      if (!full.beta.empty()) pre.beta = cut(full.beta, HV);
      if (!full.pg.empty()) pre.pg = cut(full.pg, H);
      if (!full.pb.empty()) pre.pb = cut(full.pb, H);
      Harness::FwdResult r1 = hx.forward(v, *f, pre, true);
      if (!r1.ran) {
        std::printf("FAIL %-60s : %s\n", label.c_str(), r1.why.c_str());
        ++t.fail;
        continue;
      }
      Problem step = full;
      step.T = 1;
      step.q = last(full.q, H * K);
      step.k = last(full.k, H * K);
      step.v = last(full.v, HV * V);
      if (!full.g.empty()) step.g = last(full.g, gper);
      if (!full.beta.empty()) step.beta = last(full.beta, HV);
      if (!full.pg.empty()) step.pg = last(full.pg, H);
      if (!full.pb.empty()) step.pb = last(full.pb, H);
      step.s0 = r1.sT;
      step.has_s0 = true;
      if (f->precond == 1) {
        step.p0 = r1.pT;
        step.has_p0 = true;
      }
      Harness::DecResult r2 = hx.decode(v, *f, step);
      if (!r2.ran) {
        std::printf("FAIL %-60s : %s\n", label.c_str(), r2.why.c_str());
        ++t.fail;
        continue;
      }
      const Err eo = compare(r2.o, last(ref.o, HV * V)), es = compare(r2.s, ref.sT);
      const bool ok = eo.rel <= 1.5e-2 && es.rel <= 1.5e-2;
      std::printf("%s %-60s o %.2e  S %.2e\n", ok ? "ok  " : "FAIL", label.c_str(), eo.rel, es.rel);
      ++(ok ? t.pass : t.fail);
    }
  }
}

// ---- timing ----
struct TimeRow {
  std::string what;
  float ms = 0;
  double gbs = 0;
  double fla_ms = 0;
  std::string note;
};

void run_timing(Harness& hx, const std::string& filter, std::vector<TimeRow>& rows, Tally& t, uint64_t& seed) {
  const int64_t B = 8, T = 4096, H = 16;
  struct Cfg {
    const char* name;
    double fla;
    std::vector<Variant> vs;
  };
  std::vector<Cfg> cfgs = {
      {"gdn", 0.839, {var("gdn"), var("gdn", 128, 128, false, 64, 64, 4, 1), var("gdn", 128, 128, false, 64, 128, 4, 2),
                      var("gdn", 128, 128, false, 64, 128, 8, 1), var("gdn", 128, 128, false, 64, 128, 4, 2, "nowg")}},
      {"pgdn", 1.622, {var("pgdn"), var("pgdn", 128, 128, false, 64, 64, 4, 1), var("pgdn", 128, 128, false, 64, 128, 4, 2)}},
      {"deltanet", 1.000, {var("deltanet"), var("deltanet", 128, 128, false, 64, 64, 4, 1), var("deltanet", 128, 128, false, 64, 128, 4, 2)}},
      {"kda", 1.788, {var("kda"), var("kda", 128, 128, false, 64, 128, 8, 2)}},
      {"pkda", 2.658, {var("pkda"), var("pkda", 128, 128, false, 64, 128, 8, 1)}},
      {"osdn", 0.0, {var("osdn"), var("osdn", 128, 128, false, 64, 128, 4, 2)}},
  };
  const double bytes = 4.0 * B * T * H * 128 * 2;
  std::vector<Cfg> sel;
  for (const Cfg& c : cfgs)
    if (config_filter(filter, std::string("time ") + c.name)) sel.push_back(c);
  std::vector<Problem> probs(sel.size());
  std::vector<RefOut> refs(sel.size());
  std::vector<uint64_t> seeds(sel.size());
  for (auto& x : seeds) x = ++seed;
  parallel_for(sel.size(), [&](size_t i) {
    const Feat* f = find_config(sel[i].name);
    probs[i] = make_problem(*f, B, T, H, H, 128, 128, {}, false, false, false, GateMode(), seeds[i]);
    // spot check of sequence 0 against the float64 reference (T = 4096: long-sequence precision)
    Problem p0 = probs[i];
    p0.B = 1;
    p0.q.resize((size_t)(T * H * 128));
    p0.k.resize(p0.q.size());
    p0.v.resize((size_t)(T * H * 128));
    if (!p0.g.empty()) p0.g.resize(p0.g.size() / B);
    if (!p0.beta.empty()) p0.beta.resize(p0.beta.size() / B);
    if (!p0.pg.empty()) p0.pg.resize(p0.pg.size() / B);
    if (!p0.pb.empty()) p0.pb.resize(p0.pb.size() / B);
    refs[i] = reference(*f, p0);
  });
  for (size_t ci = 0; ci < sel.size(); ++ci) {
    const Cfg& c = sel[ci];
    const Feat* f = find_config(c.name);
    const Problem& p = probs[ci];
    const RefOut& ref = refs[ci];
    float best = 1e30f;
    std::string bestv;
    std::vector<float> best_roles;
    for (const Variant& v : c.vs) {
      std::vector<float> roles;
      float tot = 0;
      Harness::FwdResult r = hx.forward(v, *f, p, false, 20, &roles, &tot);
      if (!r.ran) {
        std::printf("FAIL time %-40s : %s\n", v.key().c_str(), r.why.c_str());
        ++t.fail;
        continue;
      }
      std::vector<double> o0(r.o.begin(), r.o.begin() + (long)(T * H * 128));
      const Err e = compare(o0, ref.o);
      const bool ok = e.rel <= 1.5e-2 && e.finite;
      std::string rs;
      for (float x : roles) rs += " " + std::to_string(x).substr(0, 6);
      std::printf("%s time %-44s %.3f ms (roles:%s)  seq0 o err %.2e\n", ok ? "ok  " : "FAIL", v.key().c_str(), tot,
                  rs.c_str(), e.rel);
      ++(ok ? t.pass : t.fail);
      if (tot < best) {
        best = tot;
        bestv = v.key();
        best_roles = roles;
      }
    }
    TimeRow row;
    row.what = std::string("fwd ") + c.name;
    row.ms = best;
    row.gbs = bytes / (best * 1e-3) / 1e9;
    row.fla_ms = c.fla;
    row.note = bestv;
    rows.push_back(row);
  }
  // decode
  for (const char* nm : {"gdn", "pgdn"}) {
    if (!config_filter(filter, std::string("time decode ") + nm)) continue;
    const Feat* f = find_config(nm);
    const int64_t DB = 256, DH = 16;
    Problem p = make_problem(*f, DB, 1, DH, DH, 128, 128, {}, true, true, false, GateMode(), ++seed);
    float ms = 0;
    Harness::DecResult r = hx.decode(var(nm), *f, p, 50, &ms);
    if (!r.ran) {
      std::printf("FAIL time decode %s: %s\n", nm, r.why.c_str());
      ++t.fail;
      continue;
    }
    TimeRow row;
    row.what = std::string("decode ") + nm + " B256";
    row.ms = ms;
    row.gbs = 2.0 * DB * DH * 128 * 128 * 4 / (ms * 1e-3) / 1e9;
    row.fla_ms = std::string(nm) == "gdn" ? 0.191 : 0.0;
    row.note = "state read+write";
    rows.push_back(row);
  }
}

}  // namespace
}  // namespace gk

int main(int argc, char** argv) {
  using namespace gk;
  std::string backend = "gpu", dir = "build-gk/cubin", filter;
  bool timing = true, small = false, checks = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--backend") backend = next();
    else if (a == "--dir") dir = next();
    else if (a == "--filter") filter = next();
    else if (a == "--no-timing") timing = false;
    else if (a == "--only-timing") checks = false;
    else if (a == "--emu-small") small = true;
    else {
      std::fprintf(stderr, "usage: %s [--backend gpu|emu] [--dir D] [--filter S] [--no-timing] [--only-timing] [--emu-small]\n",
                   argv[0]);
      return 2;
    }
  }
  std::unique_ptr<Backend> be = backend == "emu" ? make_emu_backend() : make_gpu_backend();
  if (!be->ok()) {
    std::fprintf(stderr, "harness: backend %s unavailable: %s\n", backend.c_str(), be->error().c_str());
    return 3;
  }
  std::printf("DGPS kernel harness, backend %s (%s)\n", be->name().c_str(), be->device().c_str());
  Harness hx(*be, dir, backend == "emu" ? ".so" : ".cubin");
  Tally t;
  uint64_t seed = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  std::printf("seed base %llu\n", (unsigned long long)seed);
  if (checks) {
    run_forward_checks(hx, small || backend == "emu", filter, t, seed);
    run_decode_checks(hx, filter, t, seed);
    run_handoff_checks(hx, filter, t, seed);
  }
  std::vector<TimeRow> rows;
  if (timing && backend == "gpu") run_timing(hx, filter, rows, t, seed);
  std::printf("\nchecks: %d passed, %d failed\n", t.pass, t.fail);
  if (!rows.empty()) {
    std::printf("\n%-22s %10s %10s %10s %8s  %s\n", "kernel (B8 T4096 H16)", "ms", "GB/s", "FLA ms", "xFLA", "best variant");
    for (const TimeRow& r : rows)
      std::printf("%-22s %10.4f %10.1f %10.3f %8.2f  %s\n", r.what.c_str(), r.ms, r.gbs, r.fla_ms,
                  r.fla_ms > 0 ? r.fla_ms / r.ms : 0.0, r.note.c_str());
  }
  return t.fail == 0 ? 0 : 1;
}
