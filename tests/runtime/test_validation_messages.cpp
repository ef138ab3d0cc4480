// The exact text of validation errors whose parts are chosen per call (decode layouts with and without the
// time dim, the decay meaning, the first tensor's name in a device mismatch). Validation builds these only on
// failure (runtime/lib/Validation.cpp keeps a passing call free of allocation), so each expected message is
// written out here in full from the format documented in Validation.h.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "RuntimeTestUtil.h"
#include "dgps/dsl/SpecParser.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace {

using test::fakePtr;

Spec specNamed(const std::string& name) {
  ParseResult r = parseSpecFile(std::string(DGPS_SOURCE_DIR) + "/specs/" + name + ".yaml");
  if (!r.ok()) throw std::runtime_error("specs/" + name + ".yaml does not parse");
  return *r.spec;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument) << e.what();
    return e.what();
  }
  return "(no error)";
}

// A valid decode call of B=3 sequences, H=2 key heads, the spec's first K and V.
DecodeTensors decodeCall(const Spec& spec, bool time_dim) {
  const std::int64_t B = 3, H = 2, HV = H * spec.gva_ratio, K = spec.key_dims.front(), V = spec.value_dims.front();
  auto tok = [&](std::vector<std::int64_t> rest) {
    std::vector<std::int64_t> s = {B};
    if (time_dim) s.push_back(1);
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  };
  DecodeTensors t;
  int i = 0;
  t.q = TensorView(fakePtr(i++), ScalarType::BF16, tok({H, K}));
  t.k = TensorView(fakePtr(i++), ScalarType::BF16, tok({H, K}));
  t.v = TensorView(fakePtr(i++), ScalarType::BF16, tok({HV, V}));
  t.o = TensorView(fakePtr(i++), ScalarType::BF16, tok({HV, V}));
  if (spec.decay.kind == DecayKind::Scalar) t.g = TensorView(fakePtr(i++), ScalarType::F32, tok({HV}));
  if (spec.decay.kind == DecayKind::Diagonal) t.g = TensorView(fakePtr(i++), ScalarType::F32, tok({HV, K}));
  if (spec.gain.kind == GainKind::Scalar) t.beta = TensorView(fakePtr(i++), ScalarType::F32, tok({HV}));
  if (specTakesPrecondGate(spec)) t.precond_g = TensorView(fakePtr(i++), ScalarType::F32, tok({H}));
  if (specTakesPrecondGain(spec)) t.precond_beta = TensorView(fakePtr(i++), ScalarType::F32, tok({H}));
  if (specTakesPrecondCenter(spec)) t.precond_center = TensorView(fakePtr(i++), ScalarType::F32, {H});
  t.state = TensorView(fakePtr(i++), ScalarType::F32, {B, HV, K, V});
  if (hasPrecond(spec)) t.precond_state = TensorView(fakePtr(i++), ScalarType::F32, {B, H, K});
  return t;
}

TEST(ValidationMessages, DecodeLayoutsFollowTheTimeDim) {
  const Spec kda = specNamed("kda");  // diagonal decay: g is [B,(1,)HV,K]
  const std::string K = std::to_string(kda.key_dims.front()), V = std::to_string(kda.value_dims.front());
  for (bool time_dim : {true, false}) {
    SCOPED_TRACE(time_dim ? "[B,1,...]" : "[B,...]");
    const std::string one = time_dim ? "1, " : "";
    const std::string l1 = time_dim ? "1," : "";
    DecodeTensors t = decodeCall(kda, time_dim);
    EXPECT_NO_THROW(validateDecode(kda, t));

    DecodeTensors bad = t;
    bad.g = TensorView();
    EXPECT_EQ(errorOf([&] { validateDecode(kda, bad); }),
              "decode: tensor 'g' is required (decay diagonal: one natural-log decay per key channel): expected shape "
              "[B," + l1 + "HV,K] = [3, " + one + "2, " + K + "], dtype f32; got none");

    bad = t;
    bad.beta.shape.back() = 5;
    EXPECT_EQ(errorOf([&] { validateDecode(kda, bad); }),
              "decode: tensor 'beta': expected shape [B," + l1 + "HV] = [3, " + one + "2] (gain scalar), got [3, " + one +
                  "5]");

    bad = t;
    bad.o.shape.back() = 7;
    EXPECT_EQ(errorOf([&] { validateDecode(kda, bad); }),
              "decode: tensor 'o': expected shape [B," + l1 + "HV,V] = [3, " + one + "2, " + V +
                  "] (output of the new token), got [3, " + one + "2, 7]");
  }
}

TEST(ValidationMessages, PreconditionerGatesAndScalarDecay) {
  const Spec pgdn = specNamed("pgdn");
  for (bool time_dim : {true, false}) {
    SCOPED_TRACE(time_dim ? "[B,1,...]" : "[B,...]");
    const std::string one = time_dim ? "1, " : "", l1 = time_dim ? "1," : "";
    DecodeTensors t = decodeCall(pgdn, time_dim);
    EXPECT_NO_THROW(validateDecode(pgdn, t));
    DecodeTensors bad = t;
    bad.precond_beta = TensorView();
    EXPECT_EQ(errorOf([&] { validateDecode(pgdn, bad); }),
              "decode: tensor 'precond_beta' is required (gain of the squash accumulator): expected shape [B," + l1 +
                  "H] = [3, " + one + "2], dtype f32; got none");
    bad = t;
    bad.g.shape.back() = 9;
    EXPECT_EQ(errorOf([&] { validateDecode(pgdn, bad); }),
              "decode: tensor 'g': expected shape [B," + l1 + "HV] = [3, " + one +
                  "2] (decay scalar: one natural-log decay per value head), got [3, " + one + "9]");
  }
}

TEST(ValidationMessages, NotTakenAndDeviceMismatchNameBothTensors) {
  const Spec gdn = specNamed("gdn");
  DecodeTensors t = decodeCall(gdn, true);
  DecodeTensors bad = t;
  bad.precond_state = TensorView(fakePtr(40), ScalarType::F32, {3, 2, 128});
  EXPECT_EQ(errorOf([&] { validateDecode(gdn, bad); }),
            "decode: tensor 'precond_state' is not taken by spec 'gdn' (precond is none), but a tensor of shape "
            "[3, 2, 128] was given; leave it empty");
  bad = t;
  bad.state.device = 1;
  EXPECT_EQ(errorOf([&] { validateDecode(gdn, bad); }),
            "decode: tensor 'state' is on device 1 but 'q' is on device 0; all tensors of one call must be on the "
            "same device");
}

}  // namespace
}  // namespace dgps
