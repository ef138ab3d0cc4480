// GPU tests of autotuning (issue 5), on generated/pgdn:
//   * a deliberately wrong candidate is rejected (WrongResult) and a faulting one (illegal address) is
//     survived (Fault): both are built from a test-only copy of the package whose kernels.cu gains a hook
//     active for exactly those tile configurations (the shipped package is untouched); the other
//     candidates are still screened and timed in this process afterwards, the winner is one of them, and
//     this process's CUDA context still computes correct results;
//   * tune-then-reuse: a second tunePackage reuses the record without any trial; a resolver in
//     `recorded` mode launches with it; a resolver in `tune` mode tunes once on first use and never again
//     for calls in the same key bucket, and its launches match the float64 reference;
//   * in-process screening (no helper) accepts every healthy candidate.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "GpuTestUtil.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Tune.h"

namespace dgps {
namespace {

using tuning::TrialStatus;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void copyPackageTo(const std::string& from, const std::string& to, const std::string& kernels_cu) {
  ASSERT_EQ(std::system(("mkdir -p '" + to + "'").c_str()), 0);
  for (const char* f : {"manifest.yaml", "spec.yaml"}) {
    std::ofstream(to + "/" + f, std::ios::binary) << readAll(from + "/" + f);
  }
  std::ofstream(to + "/kernels.cu", std::ios::binary) << kernels_cu;
}

std::string macroTest(const TileConfig& c) {
  return "DGPS_CHUNK == " + std::to_string(c.chunk) + " && DGPS_BLOCK_V == " + std::to_string(c.block_v) +
         " && DGPS_WARPS == " + std::to_string(c.warps) + " && DGPS_STAGES == " + std::to_string(c.stages);
}

// kernels.cu with a hook at the top of every forward kernel: `wrong` doubles the query scale (o comes
// out twice too large), `fault` writes through a null-page pointer (CUDA_ERROR_ILLEGAL_ADDRESS, which
// kills the context that runs it). Returns "" if the source has no forward kernel to hook.
std::string hookedSource(const std::string& source, const TileConfig& wrong, const TileConfig& fault) {
  // A kernel that takes its arguments in parameter space (DGPS_GRID_CONST, for tensor maps) gets a hooked local
  // copy without the maps: a copy's maps are not in parameter space, so its rows load by cp.async.
  const std::string sig = "(dgps::ForwardArgs a) {", constSig = "(DGPS_GRID_CONST dgps::ForwardArgs a) {";
  std::string out;
  std::size_t pos = 0, hooks = 0;
  for (;;) {
    const std::size_t at = source.find(sig, pos), atConst = source.find(constSig, pos);
    if (at == std::string::npos && atConst == std::string::npos) break;
    if (atConst < at) {
      out += source.substr(pos, atConst - pos) +
             "(DGPS_GRID_CONST dgps::ForwardArgs a_param) { dgps::ForwardArgs a = a_param; a.row_maps = 0; "
             "dgps_test_hook(a);";
      pos = atConst + constSig.size();
    } else {
      out += source.substr(pos, at - pos) + sig + " dgps_test_hook(a);";
      pos = at + sig.size();
    }
    ++hooks;
  }
  out += source.substr(pos);
  if (hooks == 0) return "";
  const std::string hook =
      "#if " + macroTest(wrong) + "\n#define DGPS_TEST_WRONG 1\n#endif\n"
      "#if " + macroTest(fault) + "\n#define DGPS_TEST_FAULT 1\n#endif\n"
      "__device__ __forceinline__ void dgps_test_hook(dgps::ForwardArgs& a) {\n"
      "#ifdef DGPS_TEST_WRONG\n  a.scale *= 2.0f;\n#endif\n"
      "#ifdef DGPS_TEST_FAULT\n  if (blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile int*>(16) = 1;\n#endif\n"
      "}\n";
  // After the includes: the hook needs dgps::ForwardArgs.
  // the tile library's include (every package is printed from the tile IR)
  const std::size_t inc = out.find("#include \"dgps/tile/tile.cuh\"");
  const std::size_t eol = inc == std::string::npos ? std::string::npos : out.find('\n', inc);
  if (eol == std::string::npos) return "";
  return out.substr(0, eol + 1) + hook + out.substr(eol + 1);
}

class TuneGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    DGPS_REQUIRE_GPU();
    dir_ = std::string(DGPS_SOURCE_DIR) + "/generated/pgdn";
    if (!std::ifstream(dir_ + "/manifest.yaml").good()) GTEST_SKIP() << "generated/pgdn is absent";
    pkg_ = std::make_unique<Package>(Package::open(dir_));
    tmp_ = gputest::tempDir();
    std::random_device rd;
    seed_ = (std::uint64_t(rd()) << 32) | rd();
  }

  tune::TuneJob job(std::int64_t B, std::int64_t T, std::int64_t H) const {
    tune::TuneJob j;
    j.shape.batch = B;
    j.shape.seq_len = T;
    j.shape.heads_qk = j.shape.heads_v = H;
    j.shape.key_dim = j.shape.value_dim = 128;
    j.dtype = ScalarType::BF16;
    j.db_path = tmp_ + "/tuning.jsonl";
    j.cache_dir = DGPS_GPU_CACHE_DIR;
    j.trial_helper = DGPS_TUNE_TRIAL_EXE;
    j.seed = seed_;
    j.tuner.warmup = 1;
    j.tuner.reps = 5;
    j.tuner.retime_rounds = 2;
    j.tuner.retime_reps = 3;
    return j;
  }

  // Forward on fresh inputs with `config` in this process, checked against the float64 reference.
  void expectCorrectForward(Runtime& rt, const Package& pkg, const std::optional<TileConfig>& config) {
    ReferenceProblem s;
    s.batch = 2;
    s.seq_len = 300;
    s.heads_qk = s.heads_v = 4;
    s.key_dim = s.value_dim = 128;
    const ReferenceInputs in = generateInputs(pkg.spec(), s, seed_ + 1, ScalarType::BF16);
    LaunchOptions lo;
    lo.config = config;
    const gputest::GpuOutputs got = gputest::gpuForward(rt, pkg, in, nullptr, &lo);
    const ReferenceOutputs ref = runReference(pkg.spec(), in);
    const gputest::ErrorStats e = gputest::compare(got.o, ref.o);
    EXPECT_TRUE(e.finite && e.rel <= 1.5e-2) << "o: " << e.str();
  }

  std::string dir_, tmp_;
  std::unique_ptr<Package> pkg_;
  std::uint64_t seed_ = 0;
};

const tuning::CandidateReport* row(const tuning::TuneResult& r, const TileConfig& c) {
  for (const auto& x : r.table)
    if (x.config == c) return &x;
  return nullptr;
}

TEST_F(TuneGpu, WrongCandidateIsRejectedAndFaultingOneIsSurvived) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  tune::TuneJob j = job(2, 1024, 4);
  const tuning::DeviceFingerprint fp = tune::deviceFingerprint(*pkg_, 0);
  const tuning::CandidateSet cands =
      tune::forwardCandidates(*pkg_, tune::tuningShape(j.shape, j.dtype), fp);
  if (cands.kept.size() < 3) GTEST_SKIP() << "needs 3 candidates, the manifest leaves " << cands.kept.size();
  // The simplest candidate is screened first: make it the faulting one, so every later candidate runs
  // after the fault, in the same tuner process.
  const TileConfig fault = cands.kept.front();
  const TileConfig wrong = cands.kept.back();
  const std::string src = hookedSource(pkg_->source(), wrong, fault);
  ASSERT_FALSE(src.empty()) << "generated/pgdn/kernels.cu has no forward kernel signature to hook";
  const std::string bad_dir = tmp_ + "/pgdn_hooked";
  copyPackageTo(dir_, bad_dir, src);
  const Package bad = Package::open(bad_dir);

  const tune::TuneOutcome out = tune::tunePackage(bad, j);
  const tuning::TuneResult& r = out.result;
  SCOPED_TRACE(tuning::formatTable(r));
  ASSERT_TRUE(r.status.ok) << r.status.message;
  ASSERT_TRUE(r.record);
  EXPECT_FALSE(r.reused);

  const tuning::CandidateReport* w = row(r, wrong);
  const tuning::CandidateReport* f = row(r, fault);
  ASSERT_TRUE(w && f);
  EXPECT_EQ(w->status, TrialStatus::WrongResult) << w->message;
  EXPECT_GT(w->max_rel_err, 0.1) << "o doubled must be far outside the tolerance";
  EXPECT_EQ(f->status, TrialStatus::Fault) << f->message;
  EXPECT_NE(f->message.find("CUDA_ERROR_"), std::string::npos) << f->message;  // ILLEGAL_ADDRESS, as a rule

  // Every other candidate was screened and timed after the fault, in this process.
  int timed = 0;
  for (const auto& x : r.table) {
    const TileConfig c = x.config;
    if (c == wrong || c == fault || x.status == TrialStatus::Pruned) continue;
    EXPECT_EQ(x.status, TrialStatus::Ok) << toString(c) << ": " << x.message;
    if (x.status == TrialStatus::Ok) {
      ++timed;
      EXPECT_GT(x.median_ms, 0);
      EXPECT_LE(x.p20_ms, x.median_ms);
      EXPECT_LE(x.median_ms, x.p80_ms);
      EXPECT_LE(x.max_rel_err, tune::defaultTolerance(ScalarType::BF16));
    }
  }
  EXPECT_GE(timed, 1);
  const TileConfig winner = r.record->config;
  EXPECT_NE(winner, wrong);
  EXPECT_NE(winner, fault);

  // The record is in the database, and this process's context is healthy.
  tuning::TuningDb db(j.db_path);
  ASSERT_TRUE(db.load().ok);
  auto rec = db.findExact(out.fingerprint, out.key);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->config, winner);
  {
    DeviceContextGuard guard(0);
    EXPECT_EQ(cudaDriver().cuCtxSynchronize(), CUDA_SUCCESS);
  }
  RuntimeOptions ro;
  ro.cache_dir = DGPS_GPU_CACHE_DIR;
  Runtime rt(ro);
  expectCorrectForward(rt, *pkg_, winner);
}

TEST_F(TuneGpu, TuneThenReuseWithoutRetuning) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const tune::TuneJob j = job(2, 2048, 4);
  const tune::TuneOutcome first = tune::tunePackage(*pkg_, j);
  SCOPED_TRACE(tuning::formatTable(first.result));
  ASSERT_TRUE(first.result.status.ok) << first.result.status.message;
  ASSERT_TRUE(first.result.record);
  EXPECT_FALSE(first.result.reused);
  EXPECT_EQ(first.fingerprint.codegen_version, tune::codegenIdentity(*pkg_));

  // Same job again: the record is reused, nothing is compiled or timed.
  int progress_events = 0;
  const tune::TuneOutcome second =
      tune::tunePackage(*pkg_, j, [&](const tuning::TuneProgress& p) { progress_events += p.phase != tuning::TunePhase::Done; });
  ASSERT_TRUE(second.result.status.ok);
  EXPECT_TRUE(second.result.reused);
  EXPECT_EQ(progress_events, 0);
  ASSERT_TRUE(second.result.record);
  EXPECT_EQ(second.result.record->config, first.result.record->config);
  const TileConfig winner = first.result.record->config;

  // A deployment in `recorded` mode launches with it (T varies inside the bucket).
  {
    tune::ResolverOptions o;
    o.mode = tune::TuneMode::Recorded;
    o.db_path = j.db_path;
    auto resolver = std::make_shared<tune::TuningResolver>(o);
    RuntimeOptions ro;
    ro.cache_dir = DGPS_GPU_CACHE_DIR;
    ro.forward_config = tune::forwardConfigResolver(resolver);
    Runtime rt(ro);
    ForwardProblem p;
    p.batch = p.num_seqs = 2;
    p.seq_len = 1500;
    p.heads_qk = p.heads_v = 4;
    p.key_dim = p.value_dim = 128;
    p.input_dtype = ScalarType::BF16;
    EXPECT_EQ(rt.resolveForwardConfig(*pkg_, p), winner);
    ASSERT_EQ(resolver->decisions().size(), 1u);
    EXPECT_EQ(resolver->decisions()[0].source, tune::ConfigSource::RecordExact) << resolver->decisions()[0].str();
  }
}

TEST_F(TuneGpu, InProcessScreeningOnHealthyCandidates) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  tune::TuneJob j = job(1, 700, 2);
  j.isolate = false;  // runOnce + validate in this process (dgps-tune --in-process)
  j.force = true;
  const tune::TuneOutcome out = tune::tunePackage(*pkg_, j);
  SCOPED_TRACE(tuning::formatTable(out.result));
  ASSERT_TRUE(out.result.status.ok) << out.result.status.message;
  for (const auto& x : out.result.table) {
    if (x.status == TrialStatus::Pruned) continue;
    EXPECT_EQ(x.status, TrialStatus::Ok) << x.message;
    EXPECT_LE(x.max_rel_err, tune::defaultTolerance(ScalarType::BF16));
  }
}

TEST_F(TuneGpu, TuneModeTunesOnceOnFirstUseAndLaunchesCorrectly) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  tune::ResolverOptions o;
  o.mode = tune::TuneMode::Tune;
  o.db_path = tmp_ + "/first_use.jsonl";
  o.job = job(1, 1, 1);  // template: isolation, helper, timing options
  o.job.cache_dir = DGPS_GPU_CACHE_DIR;
  auto resolver = std::make_shared<tune::TuningResolver>(o);
  RuntimeOptions ro;
  ro.cache_dir = DGPS_GPU_CACHE_DIR;
  ro.forward_config = tune::forwardConfigResolver(resolver);
  Runtime rt(ro);

  expectCorrectForward(rt, *pkg_, std::nullopt);  // B=2 T=300 H=4: tunes now
  EXPECT_EQ(resolver->tuningRuns(), 1);
  ASSERT_EQ(resolver->decisions().size(), 1u);
  EXPECT_EQ(resolver->decisions()[0].source, tune::ConfigSource::Tuned) << resolver->decisions()[0].str();
  expectCorrectForward(rt, *pkg_, std::nullopt);  // same key: no new tuning
  EXPECT_EQ(resolver->tuningRuns(), 1);
  EXPECT_EQ(resolver->decisions().size(), 1u);

  // A new resolver (a second run of the application) finds the record and does not tune.
  auto again = std::make_shared<tune::TuningResolver>(o);
  RuntimeOptions ro2 = ro;
  ro2.forward_config = tune::forwardConfigResolver(again);
  Runtime rt2(ro2);
  expectCorrectForward(rt2, *pkg_, std::nullopt);
  EXPECT_EQ(again->tuningRuns(), 0);
  ASSERT_EQ(again->decisions().size(), 1u);
  EXPECT_EQ(again->decisions()[0].source, tune::ConfigSource::RecordExact) << again->decisions()[0].str();
}

// A tuned segment length is applied (generated/gdn, which has the segmented state pass): the candidates of a
// long shape include segment lengths; a record for B = 1, T = 20000 whose configuration carries
// segment_chunks = 24 reaches the runtime through a `recorded` resolver, the forward then needs the segmented
// workspace (a caller workspace sized for the plain pass is refused, which shows the segmented kernels were
// chosen), and with enough workspace its o equals (to 1e-5) the forward forced to L = 24 by LaunchOptions,
// and the float64 reference.
TEST_F(TuneGpu, ATunedSegmentLengthFromTheDatabaseIsApplied) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  if (std::getenv("DGPS_SEGMENT_CHUNKS")) GTEST_SKIP() << "DGPS_SEGMENT_CHUNKS is set: it overrides a tuned length";
  const std::string gdnDir = std::string(DGPS_SOURCE_DIR) + "/generated/gdn";
  if (!std::ifstream(gdnDir + "/manifest.yaml").good()) GTEST_SKIP() << "generated/gdn is absent";
  const Package gdn = Package::open(gdnDir);
  ReferenceProblem s;
  s.batch = 1;
  s.seq_len = 20000;
  s.heads_qk = s.heads_v = 2;
  s.key_dim = s.value_dim = 128;
  const tuning::DeviceFingerprint fp = tune::deviceFingerprint(gdn, 0);
  const tuning::TuneProblem shape = tune::tuningShape(s, ScalarType::BF16);
  bool anyLength = false;
  for (const TileConfig& c : tune::forwardCandidates(gdn, shape, fp).kept) anyLength |= c.segment_chunks > 0;
  EXPECT_TRUE(anyLength) << "a long shape's candidates should include segment lengths";

  TileConfig tuned = gdn.manifest().default_config;
  tuned.segment_chunks = 24;  // < ⌈20000 / chunk⌉
  tuning::TuningRecord r;
  r.fingerprint = fp;
  r.key = tune::problemKey(gdn, shape, fp.sm_count);
  r.config = tuned;
  r.median_ms = 1.0;
  r.p20_ms = 0.9;
  r.p80_ms = 1.1;
  r.candidates_tried = 4;
  r.date = tuning::utcNow();
  r.host = "test";
  const std::string db = tmp_ + "/segment.jsonl";
  ASSERT_TRUE(tuning::TuningDb(db).append(r).ok);

  tune::ResolverOptions o;
  o.mode = tune::TuneMode::Recorded;
  o.db_path = db;
  auto resolver = std::make_shared<tune::TuningResolver>(o);
  RuntimeOptions ro;
  ro.cache_dir = DGPS_GPU_CACHE_DIR;
  ro.forward_config = tune::forwardConfigResolver(resolver);
  Runtime rt(ro);
  const ReferenceInputs in = generateInputs(gdn.spec(), s, seed_ + 7, ScalarType::BF16);
  const ForwardProblem p = [&] {
    ForwardProblem q;
    q.batch = q.num_seqs = 1;
    q.seq_len = s.seq_len;
    q.heads_qk = q.heads_v = 2;
    q.key_dim = q.value_dim = 128;
    q.input_dtype = ScalarType::BF16;
    return q;
  }();
  const TileConfig resolved = rt.resolveForwardConfig(gdn, p);
  ASSERT_EQ(resolved, tuned) << resolver->decisions().at(0).str();
  EXPECT_EQ(rt.segmentChunks(gdn, p, resolved, LaunchOptions()), 24);

  // too small a workspace for the segmented pass: refused, so the tuned L was taken
  LaunchOptions plain;
  plain.segment_chunks = 0;
  const std::size_t plainBytes = rt.forwardWorkspaceBytes(gdn, p, resolved, plain);
  ASSERT_GT(rt.forwardWorkspaceBytes(gdn, p, resolved), plainBytes);
  {
    DeviceTensor ws(ScalarType::I32, {std::int64_t(plainBytes / 4)}, 0);
    std::map<std::string, DeviceTensor> d;
    for (const auto& kv : in) d.emplace(kv.first, DeviceTensor::upload(kv.second, 0));
    DeviceTensor out(ScalarType::BF16, {1, s.seq_len, 2, 128}, 0);
    ForwardTensors t;
    t.q = d.at("q").view();
    t.k = d.at("k").view();
    t.v = d.at("v").view();
    t.g = d.at("g").view();
    t.beta = d.at("beta").view();
    if (d.count("initial_state")) t.initial_state = d.at("initial_state").view();
    DeviceTensor fs(ScalarType::F32, {1, 2, 128, 128}, 0);
    if (gdn.spec().final_state) t.final_state = fs.view();
    t.o = out.view();
    t.workspace = ws.view();
    try {
      rt.forward(gdn, t);
      ADD_FAILURE() << "a plain-sized workspace accepted: the tuned segment length was not applied";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("tensor 'workspace'"), std::string::npos) << e.what();
    }
  }
  const gputest::GpuOutputs got = gputest::gpuForward(rt, gdn, in, nullptr, nullptr, true);
  LaunchOptions forced;
  forced.segment_chunks = 24;
  forced.config = tuned;
  const gputest::GpuOutputs want = gputest::gpuForward(rt, gdn, in, nullptr, &forced);
  // the same kernels on the same inputs; the plain pass differs from them by ~1e-3 (bf16 state rounding)
  const gputest::ErrorStats same = gputest::compare(got.o, want.o);
  EXPECT_TRUE(same.finite && same.rel <= 1e-5) << "the tuned forward should be the L = 24 forward: " << same.str();
  const ReferenceOutputs ref = runReference(gdn.spec(), in);
  const gputest::ErrorStats e = gputest::compare(got.o, ref.o);
  EXPECT_TRUE(e.finite && e.rel <= 1.5e-2) << "o: " << e.str();
}

}  // namespace
}  // namespace dgps
