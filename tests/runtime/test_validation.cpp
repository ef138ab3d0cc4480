// Tensor validation before launch: every bad argument is one
// RuntimeError{InvalidArgument} naming the tensor, what was expected and what came. Views hold fake
// device pointers: validation must never touch memory.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "RuntimeTestUtil.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace {

using test::fakePtr;

Spec shippedSpec(const std::string& name) {
  ParseResult r = parseSpecFile(std::string(DGPS_SOURCE_DIR) + "/specs/" + name + ".yaml");
  if (!r.ok()) throw std::runtime_error("specs/" + name + ".yaml does not parse");
  return *r.spec;
}

std::vector<std::string> shippedSpecNames() {
  std::vector<std::string> names;
  DIR* d = opendir((std::string(DGPS_SOURCE_DIR) + "/specs").c_str());
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.substr(n.size() - 5) == ".yaml") names.push_back(n.substr(0, n.size() - 5));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

ScalarType slotDtype(SlotType t, ScalarType activation) {
  return t == SlotType::Activation ? activation : t == SlotType::Index ? ScalarType::I64 : ScalarType::F32;
}

TensorView* field(ForwardTensors& t, const std::string& name) {
  static const std::map<std::string, TensorView ForwardTensors::*> fields = {
      {"q", &ForwardTensors::q}, {"k", &ForwardTensors::k}, {"v", &ForwardTensors::v},
      {"g", &ForwardTensors::g}, {"beta", &ForwardTensors::beta}, {"precond_g", &ForwardTensors::precond_g},
      {"precond_beta", &ForwardTensors::precond_beta}, {"precond_center", &ForwardTensors::precond_center},
      {"initial_state", &ForwardTensors::initial_state},
      {"initial_precond_state", &ForwardTensors::initial_precond_state},
      {"cu_seqlens", &ForwardTensors::cu_seqlens}, {"o", &ForwardTensors::o},
      {"final_state", &ForwardTensors::final_state}, {"final_precond_state", &ForwardTensors::final_precond_state}};
  auto it = fields.find(name);
  if (it == fields.end()) throw std::runtime_error("no ForwardTensors field " + name);
  return &(t.*(it->second));
}

// The full tensor set the float64 reference takes for `spec` at `shape`, as device views: the runtime
// and the reference must agree on which tensors exist and their shapes.
ForwardTensors referenceTensors(const Spec& spec, const ReferenceProblem& shape, ScalarType act) {
  ForwardTensors t;
  int i = 0;
  for (const auto& s : referenceInputSlots(spec, shape)) {
    if (s.name == "cu_seqlens" && shape.cu_seqlens.empty()) continue;  // optional: only for packed batches
    *field(t, s.name) = TensorView(fakePtr(i++), slotDtype(s.type, act), s.shape, 0);
  }
  for (const auto& s : referenceOutputSlots(spec, shape)) {
    *field(t, s.name) = TensorView(fakePtr(i++), s.name == "o" ? act : ScalarType::F32, s.shape, 0);
  }
  return t;
}

ReferenceProblem shapeFor(const Spec& spec, bool varlen) {
  ReferenceProblem s;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 2;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = spec.key_dims.front();
  s.value_dim = spec.value_dims.front();
  if (varlen) {
    s.batch = 1;
    s.seq_len = 70;
    s.cu_seqlens = {0, 1, 65, 70};
  } else {
    s.batch = 2;
    s.seq_len = 65;
  }
  return s;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

#define EXPECT_HAS(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (msg)

TEST(Validation, AgreesWithTheReferenceOnEveryShippedSpec) {
  auto names = shippedSpecNames();
  ASSERT_GE(names.size(), 5u);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    Spec spec = shippedSpec(name);
    if (!hasKernel(spec, KernelKind::ChunkForward)) continue;
    for (bool varlen : {false, true}) {
      if (varlen && !spec.varlen) continue;
      ReferenceProblem shape = shapeFor(spec, varlen);
      ScalarType act = toScalarType(spec.input_dtypes.front());
      ForwardTensors t = referenceTensors(spec, shape, act);
      ForwardProblem p = validateForward(spec, t);
      EXPECT_EQ(p.batch, shape.batch);
      EXPECT_EQ(p.seq_len, shape.seq_len);
      EXPECT_EQ(p.row_steps, householderSteps(spec));  // k, v, beta rows per token
      EXPECT_EQ(p.rows(), shape.seq_len * householderSteps(spec));
      EXPECT_EQ(p.num_seqs, shape.numSeqs());
      EXPECT_EQ(p.heads_v, shape.heads_v);
      EXPECT_EQ(p.varlen, varlen);
      EXPECT_EQ(p.input_dtype, act);
      EXPECT_FLOAT_EQ(p.scale, spec.scale ? float(*spec.scale) : 1.0f / std::sqrt(float(shape.key_dim)));
      // Dropping any input: required ones are named in the error, optional ones are fine.
      for (const auto& s : referenceInputSlots(spec, shape)) {
        if (s.name == "q" || s.name == "v" || s.name == "cu_seqlens") continue;  // shape sources
        ForwardTensors u = t;
        *field(u, s.name) = TensorView();
        if (s.required) {
          std::string msg = errorOf([&] { validateForward(spec, u); });
          EXPECT_HAS(msg, "tensor '" + s.name + "' is required");
        } else {
          EXPECT_NO_THROW(validateForward(spec, u)) << s.name;
        }
      }
    }
  }
}

TEST(Validation, TensorsASpecDoesNotTakeAreRejected) {
  Spec la = shippedSpec("linear_attention");
  ReferenceProblem shape = shapeFor(la, false);
  ForwardTensors t = referenceTensors(la, shape, ScalarType::BF16);
  t.g = TensorView(fakePtr(50), ScalarType::F32, {2, 65, 2}, 0);
  std::string msg = errorOf([&] { validateForward(la, t); });
  EXPECT_HAS(msg, "forward: tensor 'g' is not taken by spec 'linear_attention' (decay is none)");
  EXPECT_HAS(msg, "leave it empty");
}

// KDA with a GDN-shaped gate and a bf16 initial state.
TEST(Validation, C14_KdaWithGdnShapedGateAndBf16State) {
  Spec kda = shippedSpec("kda");
  ReferenceProblem shape = shapeFor(kda, false);
  ForwardTensors t = referenceTensors(kda, shape, ScalarType::BF16);
  const auto B = shape.batch, T = shape.seq_len, HV = shape.heads_v, K = shape.key_dim;
  ForwardTensors bad = t;
  bad.g = TensorView(fakePtr(60), ScalarType::F32, {B, T, HV}, 0);
  std::string msg = errorOf([&] { validateForward(kda, bad); });
  EXPECT_HAS(msg, "tensor 'g': expected shape [B,T,HV,K] = " + shapeToString({B, T, HV, K}));
  EXPECT_HAS(msg, "got " + shapeToString({B, T, HV}));
  EXPECT_HAS(msg, "per key channel");

  bad = t;
  bad.initial_state.dtype = ScalarType::BF16;
  msg = errorOf([&] { validateForward(kda, bad); });
  EXPECT_HAS(msg, "tensor 'initial_state': expected dtype f32, got bf16");
}

// Several Householder steps per token (Gated DeltaProduct, n_h = 2): k, v and beta carry T·n_h rows, q, g and
// o carry T; one row count off names the tensor and the layout with its step count.
TEST(Validation, HouseholderStepsTakeStepRowsForKeysValuesAndGains) {
  Spec gdp = shippedSpec("gated_deltaproduct");
  ASSERT_EQ(householderSteps(gdp), 2);
  ReferenceProblem shape = shapeFor(gdp, false);
  ForwardTensors t = referenceTensors(gdp, shape, ScalarType::BF16);
  const auto B = shape.batch, T = shape.seq_len, H = shape.heads_qk, HV = shape.heads_v, K = shape.key_dim;
  ASSERT_EQ(t.k.shape, (std::vector<std::int64_t>{B, 2 * T, H, K}));
  ASSERT_EQ(t.q.shape, (std::vector<std::int64_t>{B, T, H, K}));
  EXPECT_EQ(validateForward(gdp, t).rows(), 2 * T);

  ForwardTensors bad = t;
  bad.k = TensorView(fakePtr(70), ScalarType::BF16, {B, T, H, K}, 0);  // one key row per token
  std::string msg = errorOf([&] { validateForward(gdp, bad); });
  EXPECT_HAS(msg, "tensor 'k': expected shape [B,T*2,H,K] = " + shapeToString({B, 2 * T, H, K}));
  EXPECT_HAS(msg, "Householder step");

  bad = t;
  bad.beta = TensorView(fakePtr(71), ScalarType::F32, {B, T, HV}, 0);
  msg = errorOf([&] { validateForward(gdp, bad); });
  EXPECT_HAS(msg, "tensor 'beta': expected shape [B,T*2,HV] = " + shapeToString({B, 2 * T, HV}));

  bad = t;
  bad.g = TensorView(fakePtr(72), ScalarType::F32, {B, 2 * T, HV}, 0);  // the gate is per token
  msg = errorOf([&] { validateForward(gdp, bad); });
  EXPECT_HAS(msg, "tensor 'g': expected shape [B,T,HV] = " + shapeToString({B, T, HV}));
}

// GVA ratios.
TEST(Validation, C20_GvaRatiosAndHeadCounts) {
  Spec gdn = shippedSpec("gdn");
  gdn.gva_ratio = 3;  // e.g. Qwen's H=16, HV=48
  ReferenceProblem shape;
  shape.batch = 1;
  shape.seq_len = 16;
  shape.heads_qk = 16;
  shape.heads_v = 48;
  shape.key_dim = 128;
  shape.value_dim = 128;
  ForwardTensors t = referenceTensors(gdn, shape, ScalarType::BF16);
  ForwardProblem p = validateForward(gdn, t);
  EXPECT_EQ(p.heads_v, 48);

  // (d) HV not a multiple of H.
  ForwardTensors bad = t;
  bad.q.shape[2] = bad.k.shape[2] = 4;
  bad.v.shape[2] = 10;
  std::string msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'v': HV = 10 value heads");
  EXPECT_HAS(msg, "not a positive multiple of H = 4");
  // (e) H = 0: no division by zero, a message.
  bad = t;
  bad.q.shape[2] = 0;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'q': H (dim 2 of q) must be >= 1, got 0");
  // A legal multiple that is not the compiled ratio.
  bad = t;
  bad.v.shape[2] = 32;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "HV / H = 32 / 16 = 2 but spec 'gdn' was compiled for gva_ratio 3");
}

TEST(Validation, DimsDtypesAndFixedHeads) {
  Spec pgdn = shippedSpec("pgdn");
  ReferenceProblem shape = shapeFor(pgdn, false);
  ForwardTensors t = referenceTensors(pgdn, shape, ScalarType::F16);
  EXPECT_NO_THROW(validateForward(pgdn, t));

  ForwardTensors bad = t;
  bad.q.shape[3] = bad.k.shape[3] = 96;
  std::string msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "K = 96 is not a key dim of spec 'pgdn' (supported: [64, 128])");

  bad = t;
  bad.v.shape[3] = bad.o.shape[3] = 512;  // V=512
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "V = 512 is not a value dim");

  bad = t;
  bad.q.dtype = ScalarType::F32;
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "tensor 'q': dtype f32 is not an input dtype of spec 'pgdn' (expected bf16 or f16)");

  bad = t;
  bad.k.dtype = ScalarType::BF16;  // q is f16
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "tensor 'k': expected dtype f16 (the dtype of q), got bf16");

  bad = t;
  bad.o.dtype = ScalarType::F32;
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "tensor 'o': expected dtype f16");

  bad = t;
  bad.beta.dtype = ScalarType::F64;
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "tensor 'beta': expected dtype f32, got f64");

  bad = t;
  bad.precond_center.shape = {shape.heads_v + 1};
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "tensor 'precond_center': expected shape [H] = [2]");

  Spec fixed = pgdn;
  fixed.heads_qk = 4;
  msg = errorOf([&] { validateForward(fixed, t); });
  EXPECT_HAS(msg, "H = 2 but spec 'pgdn' fixes heads_qk = 4");

  bad = t;
  bad.q.shape[1] = 0;
  msg = errorOf([&] { validateForward(pgdn, bad); });
  EXPECT_HAS(msg, "T (dim 1) must be >= 1, got 0");
}

TEST(Validation, MemoryPropertiesWithoutTouchingMemory) {
  Spec gdn = shippedSpec("gdn");
  ReferenceProblem shape = shapeFor(gdn, false);
  ForwardTensors t = referenceTensors(gdn, shape, ScalarType::BF16);

  ForwardTensors bad = t;
  bad.k.strides = {65 * 2 * 64, 64, 65 * 64, 1};  // [B,H,T,K] memory viewed as [B,T,H,K]
  std::string msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'k': must be contiguous");
  EXPECT_HAS(msg, "make a contiguous copy");

  bad = t;
  bad.k.strides = {65 * 2 * 64, 2 * 64, 64, 1};  // explicit row-major strides are fine
  EXPECT_NO_THROW(validateForward(gdn, bad));

  bad = t;
  bad.v.data = static_cast<char*>(bad.v.data) + 2;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'v': data pointer");
  EXPECT_HAS(msg, "is not 16-byte aligned");

  bad = t;
  bad.beta.data = nullptr;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'beta': data pointer is null");

  // Mixed devices are rejected; everything on device 1 is fine.
  bad = t;
  bad.k.device = 1;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'k' is on device 1 but 'q' is on device 0");
  ForwardTensors all1 = t;
  for (TensorView* v : {&all1.q, &all1.k, &all1.v, &all1.g, &all1.beta, &all1.o, &all1.final_state,
                        &all1.initial_state}) {
    v->device = 1;
  }
  EXPECT_EQ(validateForward(gdn, all1).device, 1);

  bad = t;
  bad.workspace = TensorView(static_cast<char*>(fakePtr(90)) + 16, ScalarType::I32, {1024}, 0);
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'workspace': data pointer");
  EXPECT_HAS(msg, "is not 256-byte aligned");
  bad.workspace.data = fakePtr(90);
  EXPECT_NO_THROW(validateForward(gdn, bad));

  bad = t;
  bad.o.data = bad.q.data;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'o' aliases an input");
}

TEST(Validation, VarlenRules) {
  Spec gdn = shippedSpec("gdn");
  ReferenceProblem shape = shapeFor(gdn, true);
  ForwardTensors t = referenceTensors(gdn, shape, ScalarType::BF16);
  EXPECT_EQ(validateForward(gdn, t).num_seqs, 3);

  ForwardTensors bad = t;
  bad.cu_seqlens.dtype = ScalarType::I32;
  std::string msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'cu_seqlens': expected dtype i64, got i32");

  bad = t;
  for (TensorView* v : {&bad.q, &bad.k, &bad.v, &bad.g, &bad.beta, &bad.o}) v->shape[0] = 2;
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "B = 2 but cu_seqlens is given: packed sequences need B == 1");

  bad = t;
  bad.final_state.shape[0] = 1;  // N is 3 (cu_seqlens has 4 entries), not B
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'final_state': expected shape [N,HV,K,V] = [3, 2, 64, 64]");

  bad = t;
  bad.cu_seqlens.shape = {1};
  msg = errorOf([&] { validateForward(gdn, bad); });
  EXPECT_HAS(msg, "tensor 'cu_seqlens': expected shape [N+1] with N >= 1");

  Spec fixed = gdn;
  fixed.varlen = false;
  msg = errorOf([&] { validateForward(fixed, t); });
  EXPECT_HAS(msg, "tensor 'cu_seqlens' is not taken by spec 'gdn' (varlen is false)");
}

DecodeTensors decodeTensors(const Spec& spec, std::int64_t B, std::int64_t H, std::int64_t K, std::int64_t V,
                            bool time_dim) {
  const std::int64_t HV = H * spec.gva_ratio;
  auto tok = [&](std::vector<std::int64_t> rest) {
    std::vector<std::int64_t> s = {B};
    if (time_dim) s.push_back(1);
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  };
  // several Householder steps per token: k, v and beta carry the token's n_h rows, [B, n_h, ...]
  const std::int64_t S = householderSteps(spec);
  auto steps = [&](std::vector<std::int64_t> rest) {
    if (S == 1) return tok(rest);
    std::vector<std::int64_t> s = {B, S};
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  };
  DecodeTensors t;
  int i = 0;
  const ScalarType act = ScalarType::BF16;
  t.q = TensorView(fakePtr(i++), act, tok({H, K}));
  t.k = TensorView(fakePtr(i++), act, steps({H, K}));
  t.v = TensorView(fakePtr(i++), act, steps({HV, V}));
  t.o = TensorView(fakePtr(i++), act, tok({HV, V}));
  if (spec.decay.kind == DecayKind::Scalar) t.g = TensorView(fakePtr(i++), ScalarType::F32, tok({HV}));
  if (spec.decay.kind == DecayKind::Diagonal) t.g = TensorView(fakePtr(i++), ScalarType::F32, tok({HV, K}));
  if (spec.gain.kind == GainKind::Scalar) t.beta = TensorView(fakePtr(i++), ScalarType::F32, steps({HV}));
  if (specTakesPrecondGate(spec)) t.precond_g = TensorView(fakePtr(i++), ScalarType::F32, tok({H}));
  if (specTakesPrecondGain(spec)) t.precond_beta = TensorView(fakePtr(i++), ScalarType::F32, tok({H}));
  if (specTakesPrecondCenter(spec)) t.precond_center = TensorView(fakePtr(i++), ScalarType::F32, {H});
  t.state = TensorView(fakePtr(i++), ScalarType::F32, {B, HV, K, V});
  if (hasPrecond(spec)) t.precond_state = TensorView(fakePtr(i++), ScalarType::F32, {B, H, K});
  return t;
}

TEST(Validation, DecodeShapes) {
  for (const char* name : {"gdn", "kda", "pgdn", "osdn_apf"}) {
    SCOPED_TRACE(name);
    Spec spec = shippedSpec(name);
    const int K = spec.key_dims.front(), V = spec.value_dims.front();
    for (bool time_dim : {true, false}) {
      DecodeTensors t = decodeTensors(spec, 3, 2, K, V, time_dim);
      DecodeProblem p = validateDecode(spec, t);
      EXPECT_EQ(p.batch, 3);
      EXPECT_EQ(p.time_dim, time_dim);
      EXPECT_EQ(p.key_dim, K);
    }
    DecodeTensors t = decodeTensors(spec, 3, 2, K, V, true);
    DecodeTensors bad = t;
    bad.state.dtype = ScalarType::BF16;
    EXPECT_HAS(errorOf([&] { validateDecode(spec, bad); }), "decode: tensor 'state': expected dtype f32, got bf16");
    bad = t;
    bad.state = TensorView();
    EXPECT_HAS(errorOf([&] { validateDecode(spec, bad); }), "tensor 'state' is required");
    bad = t;
    bad.q.shape[1] = bad.k.shape[1] = 2;
    EXPECT_HAS(errorOf([&] { validateDecode(spec, bad); }), "decode takes one token");
    bad = t;
    bad.v = TensorView(bad.v.data, bad.v.dtype, {3, 2 * spec.gva_ratio, V});  // rank differs from q
    EXPECT_HAS(errorOf([&] { validateDecode(spec, bad); }), "same rank as q");
    if (hasPrecond(spec)) {
      bad = t;
      bad.precond_state = TensorView();
      EXPECT_HAS(errorOf([&] { validateDecode(spec, bad); }), "tensor 'precond_state' is required");
    }
  }
}

// Decode of several Householder steps per token (Gated DeltaProduct, n_h = 2): k, v and beta carry the token's two
// rows ([B,2,...], with q of either rank), q, g and o one; a per-token k or beta, or a v without the step axis,
// is one error naming the tensor and the layout with its step count.
TEST(Validation, DecodeOfHouseholderStepsTakesTheTokensStepRows) {
  Spec gdp = shippedSpec("gated_deltaproduct");
  ASSERT_EQ(householderSteps(gdp), 2);
  const std::int64_t B = 3, H = 2, HV = H * gdp.gva_ratio, K = gdp.key_dims.front(), V = gdp.value_dims.front();
  for (bool time_dim : {true, false}) {
    SCOPED_TRACE(time_dim ? "q [B,1,H,K]" : "q [B,H,K]");
    const DecodeTensors t = decodeTensors(gdp, B, H, K, V, time_dim);
    ASSERT_EQ(t.k.shape, (std::vector<std::int64_t>{B, 2, H, K}));
    const DecodeProblem p = validateDecode(gdp, t);
    EXPECT_EQ(p.heads_v, HV);
    EXPECT_EQ(p.value_dim, V);
    DecodeTensors bad = t;
    bad.k = TensorView(bad.k.data, bad.k.dtype, {B, 1, H, K});
    std::string msg = errorOf([&] { validateDecode(gdp, bad); });
    EXPECT_HAS(msg, "tensor 'k': expected shape [B,2,H,K] = " + shapeToString({B, 2, H, K}));
    EXPECT_HAS(msg, "Householder steps");
    bad = t;
    bad.beta = TensorView(bad.beta.data, bad.beta.dtype, {B, HV});
    EXPECT_HAS(errorOf([&] { validateDecode(gdp, bad); }),
               "tensor 'beta': expected shape [B,2,HV] = " + shapeToString({B, 2, HV}));
    bad = t;
    bad.v = TensorView(bad.v.data, bad.v.dtype, {B, HV, V});
    EXPECT_HAS(errorOf([&] { validateDecode(gdp, bad); }), "expected [B,2,HV,V] (one row per Householder step)");
    bad = t;
    bad.g = TensorView(bad.g.data, bad.g.dtype, {B, 2, HV});  // the decay is per token
    EXPECT_HAS(errorOf([&] { validateDecode(gdp, bad); }), "tensor 'g': expected shape");
  }
}

}  // namespace
}  // namespace dgps
