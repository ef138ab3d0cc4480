// The warm-call memo's exactness (runtime/lib/CallMemo.h), on the CPU: a call whose views match the signature of
// a call that validated, and whose pointers pass the pointer rules, must validate too, to the same problem.
// Checked over seeded random mutations of valid forward and decode tensor sets of every shipped spec (shapes,
// dtypes, devices, strides, null and given pointers, misaligned and aliased pointers); each mutation that
// validation rejects must also miss the memo. Also the signature's field-by-field unit behaviour.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "CallMemo.h"
#include "RuntimeTestUtil.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace {

using detail::CallSignature;
using detail::ViewSignature;
using test::fakePtr;

std::vector<Spec> shippedSpecs() {
  std::vector<std::string> names;
  const std::string dir = std::string(DGPS_SOURCE_DIR) + "/specs";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".yaml") names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::vector<Spec> specs;
  for (const auto& n : names) {
    ParseResult r = parseSpecFile(dir + "/" + n);
    // solve.steps > 1 has no package and no kernels (the runtime refuses it at Package::open).
    if (r.ok() && householderSteps(*r.spec) <= 1) specs.push_back(*r.spec);
  }
  return specs;
}

TensorView* forwardField(ForwardTensors& t, const std::string& name) {
  static const std::map<std::string, TensorView ForwardTensors::*> fields = {
      {"q", &ForwardTensors::q}, {"k", &ForwardTensors::k}, {"v", &ForwardTensors::v}, {"g", &ForwardTensors::g},
      {"beta", &ForwardTensors::beta}, {"precond_g", &ForwardTensors::precond_g},
      {"precond_beta", &ForwardTensors::precond_beta}, {"precond_center", &ForwardTensors::precond_center},
      {"initial_state", &ForwardTensors::initial_state},
      {"initial_precond_state", &ForwardTensors::initial_precond_state}, {"cu_seqlens", &ForwardTensors::cu_seqlens},
      {"o", &ForwardTensors::o}, {"final_state", &ForwardTensors::final_state},
      {"final_precond_state", &ForwardTensors::final_precond_state}};
  return &(t.*(fields.at(name)));
}

// A valid forward set from the float64 reference's slot list (independent of the validator), plus a workspace.
ForwardTensors forwardSet(const Spec& spec, bool varlen) {
  ReferenceProblem s;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 2;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = spec.key_dims.front();
  s.value_dim = spec.value_dims.front();
  s.batch = varlen ? 1 : 2;
  s.seq_len = varlen ? 70 : 65;
  if (varlen) s.cu_seqlens = {0, 1, 65, 70};
  ForwardTensors t;
  int i = 0;
  const ScalarType act = toScalarType(spec.input_dtypes.front());
  for (const auto& slot : referenceInputSlots(spec, s)) {
    if (slot.name == "cu_seqlens" && !varlen) continue;
    const ScalarType dt = slot.type == SlotType::Activation ? act : slot.type == SlotType::Index ? ScalarType::I64
                                                                                                : ScalarType::F32;
    *forwardField(t, slot.name) = TensorView(fakePtr(i++), dt, slot.shape, 0);
  }
  for (const auto& slot : referenceOutputSlots(spec, s))
    *forwardField(t, slot.name) = TensorView(fakePtr(i++), slot.name == "o" ? act : ScalarType::F32, slot.shape, 0);
  t.workspace = TensorView(fakePtr(i++), ScalarType::I32, {1 << 18}, 0);
  return t;
}

DecodeTensors decodeSet(const Spec& spec, bool time_dim) {
  const std::int64_t B = 3, H = spec.heads_qk > 0 ? spec.heads_qk : 2, HV = H * spec.gva_ratio,
                     K = spec.key_dims.front(), V = spec.value_dims.front();
  auto tok = [&](std::vector<std::int64_t> rest) {
    std::vector<std::int64_t> s = {B};
    if (time_dim) s.push_back(1);
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  };
  DecodeTensors t;
  int i = 0;
  const ScalarType act = toScalarType(spec.input_dtypes.front()), f32 = ScalarType::F32;
  t.q = TensorView(fakePtr(i++), act, tok({H, K}));
  t.k = TensorView(fakePtr(i++), act, tok({H, K}));
  t.v = TensorView(fakePtr(i++), act, tok({HV, V}));
  t.o = TensorView(fakePtr(i++), act, tok({HV, V}));
  if (spec.decay.kind == DecayKind::Scalar) t.g = TensorView(fakePtr(i++), f32, tok({HV}));
  if (spec.decay.kind == DecayKind::Diagonal) t.g = TensorView(fakePtr(i++), f32, tok({HV, K}));
  if (spec.gain.kind == GainKind::Scalar) t.beta = TensorView(fakePtr(i++), f32, tok({HV}));
  if (specTakesPrecondGate(spec)) t.precond_g = TensorView(fakePtr(i++), f32, tok({H}));
  if (specTakesPrecondGain(spec)) t.precond_beta = TensorView(fakePtr(i++), f32, tok({H}));
  if (specTakesPrecondCenter(spec)) t.precond_center = TensorView(fakePtr(i++), f32, {H});
  t.state = TensorView(fakePtr(i++), f32, {B, HV, K, V});
  if (hasPrecond(spec)) t.precond_state = TensorView(fakePtr(i++), f32, {B, H, K});
  return t;
}

// One random change to one view: what validation reads of it (metadata or pointer).
void mutate(TensorView& v, const TensorView& other, std::mt19937& rng) {
  auto pick = [&](int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  static const ScalarType dtypes[] = {ScalarType::F32, ScalarType::BF16, ScalarType::F16, ScalarType::I64,
                                      ScalarType::F64, ScalarType::I32};
  switch (pick(10)) {
    case 0:  // one dim off by one, or zero
      if (!v.shape.empty()) {
        std::int64_t& d = v.shape[std::size_t(pick(int(v.shape.size())))];
        d = pick(3) == 0 ? 0 : d + (pick(2) ? 1 : -1);
      }
      break;
    case 1:  // a dim more or less
      if (!v.shape.empty() && pick(2)) v.shape.pop_back();
      else v.shape.push_back(1 + pick(2));
      break;
    case 2: v.dtype = dtypes[pick(6)]; break;
    case 3: v.device = pick(3); break;
    case 4: v.data = nullptr; break;  // with an empty shape: not given
    case 5: v = TensorView(); break;
    case 6:  // the pointer moved: by a multiple of 256 (still aligned) or by a smaller step (maybe not)
      if (v.data) v.data = static_cast<char*>(v.data) + (pick(2) ? 256 * (1 + pick(4)) : (1 << pick(8)));
      break;
    case 7: v.data = other.data; break;  // aliases another view
    case 8: {  // explicit strides: row-major (still contiguous) or transposed last two dims
      std::vector<std::int64_t> st(v.shape.size(), 1);
      for (std::size_t i = v.shape.size(); i-- > 1;) st[i - 1] = st[i] * v.shape[i];
      if (st.size() >= 2 && pick(2)) std::swap(st[st.size() - 1], st[st.size() - 2]);
      v.strides = st;
      break;
    }
    default:  // a view that was absent appears, with another's shape
      if (!v.given()) v = TensorView(fakePtr(40 + pick(8)), ScalarType::F32, other.shape, 0);
      break;
  }
}

bool sameProblem(const ForwardProblem& a, const ForwardProblem& b) {
  return a.batch == b.batch && a.seq_len == b.seq_len && a.num_seqs == b.num_seqs && a.heads_qk == b.heads_qk &&
         a.heads_v == b.heads_v && a.key_dim == b.key_dim && a.value_dim == b.value_dim &&
         a.input_dtype == b.input_dtype && a.varlen == b.varlen && a.has_initial_state == b.has_initial_state &&
         a.has_final_state == b.has_final_state && a.has_initial_precond_state == b.has_initial_precond_state &&
         a.has_final_precond_state == b.has_final_precond_state && a.device == b.device && a.scale == b.scale;
}
bool sameProblem(const DecodeProblem& a, const DecodeProblem& b) {
  return a.batch == b.batch && a.heads_qk == b.heads_qk && a.heads_v == b.heads_v && a.key_dim == b.key_dim &&
         a.value_dim == b.value_dim && a.input_dtype == b.input_dtype && a.time_dim == b.time_dim &&
         a.device == b.device && a.scale == b.scale;
}

// For `mutations` random mutants of the valid set `base`: memo hit (signature and pointer rules) implies that
// validation passes with the same problem. Returns {hits, rejected by validation} for the caller's sanity checks.
template <typename Tensors, typename Views, typename Validate, typename Rules>
std::pair<int, int> checkExactness(const Spec& spec, const Tensors& base, Views views, Validate validate, Rules rules,
                                   std::mt19937& rng, int mutations) {
  const auto problem = validate(spec, base);
  auto sig = std::make_unique<CallSignature<std::tuple_size<decltype(views(base))>::value>>();
  EXPECT_TRUE(sig->capture(views(base)));
  EXPECT_TRUE(sig->matches(views(base)) && rules(base)) << "the valid set itself must hit";
  int hits = 0, rejected = 0;
  for (int m = 0; m < mutations; ++m) {
    Tensors t = base;
    const auto vs = views(t);
    const int changes = 1 + int(rng() % 3);
    for (int c = 0; c < changes; ++c) {
      auto* v = const_cast<TensorView*>(vs[rng() % vs.size()]);
      mutate(*v, *vs[rng() % vs.size()], rng);
    }
    const bool hit = sig->matches(views(t)) && rules(t);
    bool ok = true;
    decltype(validate(spec, t)) got{};
    try {
      got = validate(spec, t);
    } catch (const RuntimeError& e) {
      ok = false;
      EXPECT_FALSE(hit) << spec.name << ": mutant " << m << " hits the memo but validation says: " << e.what();
    }
    rejected += ok ? 0 : 1;
    if (hit) {
      ++hits;
      EXPECT_TRUE(ok && sameProblem(got, problem)) << spec.name << ": mutant " << m << " hits with another problem";
    }
  }
  return {hits, rejected};
}

TEST(CallMemo, AHitAlwaysValidatesToTheSameProblemForward) {
  std::mt19937 rng(20261202);
  const auto specs = shippedSpecs();
  ASSERT_GE(specs.size(), 5u);
  int hits = 0, rejected = 0, checked = 0;
  for (const Spec& spec : specs) {
    if (!hasKernel(spec, KernelKind::ChunkForward)) continue;
    for (bool varlen : {false, true}) {
      if (varlen && !spec.varlen) continue;
      auto r = checkExactness(
          spec, forwardSet(spec, varlen), [](const ForwardTensors& t) { return detail::forwardViews(t); },
          [](const Spec& s, const ForwardTensors& t) { return validateForward(s, t); },
          [](const ForwardTensors& t) { return forwardPointerRulesHold(t); }, rng, 400);
      hits += r.first;
      rejected += r.second;
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
  // Both kinds occur, so the implication above was tested both ways (not vacuous).
  EXPECT_GT(hits, 50);
  EXPECT_GT(rejected, 1000);
}

TEST(CallMemo, AHitAlwaysValidatesToTheSameProblemDecode) {
  std::mt19937 rng(7);
  int hits = 0, rejected = 0;
  for (const Spec& spec : shippedSpecs()) {
    if (!hasKernel(spec, KernelKind::Decode)) continue;
    for (bool time_dim : {true, false}) {
      auto r = checkExactness(
          spec, decodeSet(spec, time_dim), [](const DecodeTensors& t) { return detail::decodeViews(t); },
          [](const Spec& s, const DecodeTensors& t) { return validateDecode(s, t); },
          [](const DecodeTensors& t) { return decodePointerRulesHold(t); }, rng, 400);
      hits += r.first;
      rejected += r.second;
    }
  }
  EXPECT_GT(hits, 50);
  EXPECT_GT(rejected, 1000);
}

TEST(CallMemo, SignatureComparesEveryFieldButThePointerValue) {
  const TensorView base(fakePtr(1), ScalarType::BF16, {2, 3, 4, 8}, 0);
  ViewSignature s;
  ASSERT_TRUE(s.capture(base));
  TensorView v = base;
  v.data = fakePtr(2);
  EXPECT_TRUE(s.matches(v)) << "another address, same metadata";
  v.strides = {96, 32, 8, 1};
  EXPECT_TRUE(s.matches(v)) << "explicit row-major strides are contiguous";
  v.strides = {96, 32, 1, 4};
  EXPECT_FALSE(s.matches(v)) << "strided";
  v = base;
  v.dtype = ScalarType::F16;
  EXPECT_FALSE(s.matches(v)) << "dtype";
  v = base;
  v.device = 1;
  EXPECT_FALSE(s.matches(v)) << "device";
  v = base;
  v.shape[2] = 5;
  EXPECT_FALSE(s.matches(v)) << "a dim";
  v = base;
  v.shape.push_back(1);
  EXPECT_FALSE(s.matches(v)) << "rank";
  v = base;
  v.data = nullptr;
  EXPECT_FALSE(s.matches(v)) << "null data";
  EXPECT_FALSE(s.matches(TensorView())) << "not given";
  ViewSignature absent;
  ASSERT_TRUE(absent.capture(TensorView()));
  EXPECT_TRUE(absent.matches(TensorView()));
  EXPECT_FALSE(absent.matches(base));
  ViewSignature deep;
  EXPECT_FALSE(deep.capture(TensorView(fakePtr(1), ScalarType::F32, {1, 1, 1, 1, 1, 1}, 0))) << "rank 6 is not stored";
}

TEST(CallMemo, PointerRulesAreValidationsAlignmentAndAliasing) {
  ParseResult r = parseSpecFile(std::string(DGPS_SOURCE_DIR) + "/specs/gdn.yaml");
  ASSERT_TRUE(r.ok());
  const Spec& gdn = *r.spec;
  const ForwardTensors base = forwardSet(gdn, true);
  ASSERT_NO_THROW(validateForward(gdn, base));
  EXPECT_TRUE(forwardPointerRulesHold(base));
  auto moved = [](void* p, int bytes) { return static_cast<void*>(static_cast<char*>(p) + bytes); };
  struct Case {
    const char* what;
    std::function<void(ForwardTensors&)> change;
    bool holds;
  };
  const Case cases[] = {
      {"q 16-aligned", [&](ForwardTensors& t) { t.q.data = moved(t.q.data, 16); }, true},
      {"q 8-aligned", [&](ForwardTensors& t) { t.q.data = moved(t.q.data, 8); }, false},
      {"final_state 4-aligned", [&](ForwardTensors& t) { t.final_state.data = moved(t.final_state.data, 4); }, false},
      {"cu_seqlens 8-aligned", [&](ForwardTensors& t) { t.cu_seqlens.data = moved(t.cu_seqlens.data, 8); }, true},
      {"cu_seqlens 4-aligned", [&](ForwardTensors& t) { t.cu_seqlens.data = moved(t.cu_seqlens.data, 4); }, false},
      {"workspace 128-aligned", [&](ForwardTensors& t) { t.workspace.data = moved(t.workspace.data, 128); }, false},
      {"o aliases v", [&](ForwardTensors& t) { t.o.data = t.v.data; }, false},
  };
  for (const Case& c : cases) {
    ForwardTensors t = base;
    c.change(t);
    EXPECT_EQ(forwardPointerRulesHold(t), c.holds) << c.what;
    bool valid = true;
    try {
      validateForward(gdn, t);
    } catch (const RuntimeError&) {
      valid = false;
    }
    EXPECT_EQ(valid, c.holds) << c.what << ": the rule and validation disagree";
  }
}

}  // namespace
}  // namespace dgps
