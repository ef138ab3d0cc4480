#include "CorrectnessGuard.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace dgps {
namespace bench {
namespace {

std::string shapeText(const ReferenceProblem& p, Kind kind) {
  std::ostringstream os;
  os << "B=" << p.batch;
  if (kind == Kind::Forward) os << " T=" << p.seq_len;
  os << " H=" << p.heads_qk << " HV=" << p.heads_v << " K=" << p.key_dim << " V=" << p.value_dim;
  return os.str();
}

// Compares one output; returns false (and explains in *why) when it is not within tolerance.
bool compareOutput(const std::string& name, const Tensor& got, const Tensor& want, double tolerance, double* worst,
                   std::string* why) {
  const std::int64_t bad = countNonFinite(got);
  if (bad > 0) {
    *worst = std::numeric_limits<double>::quiet_NaN();
    *why = name + ": " + std::to_string(bad) + " of " + std::to_string(got.numel()) +
           " elements are NaN/inf (poison left unwritten, or an overflow)";
    return false;
  }
  const double err = relativeError(got, want);
  if (std::isnan(err) || err > *worst) *worst = err;
  if (!(err <= tolerance)) {
    std::ostringstream os;
    os << name << ": ||out - ref|| / ||ref|| = " << err << " > tolerance " << tolerance;
    *why = os.str();
    return false;
  }
  return true;
}

}  // namespace

double relativeError(const Tensor& got, const Tensor& want) {
  if (got.numel() != want.numel()) {
    throw DataError("relativeError: " + got.shapeString() + " vs " + want.shapeString());
  }
  double diff = 0, ref = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.get(i), b = want.get(i);
    if (!std::isfinite(a)) return std::numeric_limits<double>::quiet_NaN();
    diff += (a - b) * (a - b);
    ref += b * b;
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

GuardReference makeGuardReference(const Package& package, Kind kind, std::uint64_t seed) {
  const Spec& spec = package.spec();
  GuardReference g;
  g.kind = kind;
  BenchShape s;
  s.kind = kind;
  s.heads_qk = spec.heads_qk != 0 ? spec.heads_qk : 4;
  if (kind == Kind::Forward) {
    s.batch = 2;
    s.seq_len = 300;
  } else {
    s.batch = 5;
    s.seq_len = 1;
  }
  g.shape = toProblemShape(spec, s);
  if (kind == Kind::Forward) {
    g.inputs = forwardHostInputs(spec, g.shape, 0, seed);
    g.outputs = runReference(spec, g.inputs.tiles);
  } else {
    g.inputs = decodeHostInputs(spec, g.shape, 0, seed);
    // One token from the given states, asking for the updated states back.
    Spec r = spec;
    r.initial_state = true;
    r.final_state = true;
    r.initial_precond_state = hasPrecond(spec);
    r.final_precond_state = hasPrecond(spec);
    ReferenceInputs in = g.inputs.tiles;
    in["initial_state"] = in.at("state");
    in.erase("state");
    if (in.count("precond_state")) {
      in["initial_precond_state"] = in.at("precond_state");
      in.erase("precond_state");
    }
    g.outputs = runReference(r, in);
  }
  return g;
}

GuardResult runGuard(Runtime& runtime, GpuSession& session, const Package& package, const TileConfig& config,
                     const GuardReference& ref, double tolerance) {
  const int device = session.info().device;
  DeviceSet set = uploadInputs(ref.inputs, device);
  const ReferenceProblem& p = ref.shape;
  LaunchOptions opts;
  opts.stream = session.stream();
  opts.config = config;
  GuardResult result;
  const std::string where = package.name() + " " + toString(ref.kind) + " (" + shapeText(p, ref.kind) + ", " +
                            toString(config) + ")";
  if (ref.kind == Kind::Forward) {
    addOutput(set, "o", ScalarType::BF16, {p.batch, p.seq_len, p.heads_v, p.value_dim}, device);
    const ForwardProblem fp = validateForward(package, forwardTensors(set));
    addWorkspace(set, runtime.forwardWorkspaceBytes(package, fp, config), device);
    set.at("o").poison();
    runtime.forward(package, forwardTensors(set), opts);
  } else {
    addOutput(set, "o", ScalarType::BF16, {p.batch, 1, p.heads_v, p.value_dim}, device);
    set.at("o").poison();
    runtime.decode(package, decodeTensors(set), opts);
  }
  session.synchronize("the correctness check of " + where);

  double worst = 0;
  std::string why;
  bool ok = compareOutput("o", set.at("o").download(), ref.outputs.o, tolerance, &worst, &why);
  if (ok && ref.kind == Kind::Decode) {
    ok = compareOutput("state", set.at("state").download(), ref.outputs.final_state, tolerance, &worst, &why);
    if (ok && set.has("precond_state")) {
      ok = compareOutput("precond_state", set.at("precond_state").download(), ref.outputs.final_precond_state,
                         tolerance, &worst, &why);
    }
  }
  result.ok = ok;
  result.rel_err = worst;
  std::ostringstream os;
  if (ok) {
    os << "checked against the float64 reference at " << where << ": max rel err " << worst;
  } else {
    os << "wrong result at " << where << " against the float64 reference: " << why;
  }
  result.message = os.str();
  return result;
}

}  // namespace bench
}  // namespace dgps
