// dgps-run PACKAGE --inputs IN.safetensors --out OUT.safetensors [--decode] [--config chunk=64,...]
//
// The GPU counterpart of `dgps-spec reference`: reads the inputs (names and layouts of Reference.h:
// q, k, v, g, beta, precond_g, precond_beta, precond_center, initial_state, initial_precond_state,
// cu_seqlens), runs the package's chunked forward (or, with --decode, one decode step: q/k/v
// [B,1,H*,D], initial_state [B,HV,K,V] becomes the in-place state) on the GPU and writes o,
// final_state and final_precond_state (as the spec produces them) to OUT. Outputs are poisoned with NaN
// before the run. Dtypes are what the GPU takes: q/k/v in an input dtype of the package, the rest f32,
// cu_seqlens i64; nothing is converted silently.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "dgps/dsl/Safetensors.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"

namespace {

using dgps::DeviceTensor;
using dgps::ScalarType;
using dgps::Tensor;
using dgps::TensorView;

struct Options {
  std::string package, inputs, out, config, cache_dir;
  bool decode = false;
  bool check_cu_seqlens = false;
  int device = 0;
};

[[noreturn]] void fail(const std::string& m) { throw dgps::RuntimeError(dgps::RuntimeErrorCode::InvalidArgument, m); }

/// An output the run produces: name, dtype, shape, and (decode) the input tensor it starts from.
struct OutputSlot {
  std::string name;
  ScalarType dtype;
  std::vector<std::int64_t> shape;
  std::string seeded_from;  ///< decode states start as this input ("" = zeros / hypergrad init)
  double fill = 0;          ///< start value when not seeded (decode states only)
};

const Tensor* find(const dgps::TensorMap& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

// Output shapes follow from q and v; when those are malformed the list is short and validation names them.
std::vector<OutputSlot> outputSlots(const dgps::Spec& spec, const dgps::TensorMap& in, bool decode) {
  std::vector<OutputSlot> out;
  const Tensor* q = find(in, "q");
  const Tensor* v = find(in, "v");
  if (!q || !v) return out;
  if (!decode) {
    if (q->rank() != 4 || v->rank() != 4) return out;
    const std::int64_t B = q->dim(0), T = q->dim(1), H = q->dim(2), K = q->dim(3), HV = v->dim(2), V = v->dim(3);
    const Tensor* cu = find(in, "cu_seqlens");
    const std::int64_t N = cu && cu->rank() == 1 ? cu->dim(0) - 1 : B;
    out.push_back({"o", q->dtype(), {B, T, HV, V}, "", 0});
    if (spec.final_state) out.push_back({"final_state", ScalarType::F32, {N, HV, K, V}, "", 0});
    if (dgps::hasPrecond(spec) && spec.final_precond_state) {
      out.push_back({"final_precond_state", ScalarType::F32, {N, H, K}, "", 0});
    }
    return out;
  }
  // v is [B,1,HV,V] or [B,HV,V] like q, or [B,n_h,HV,V] with several Householder steps per token
  if ((q->rank() != 3 && q->rank() != 4) || (v->rank() != q->rank() && v->rank() != 4)) return out;
  const std::size_t off = q->rank() == 4 ? 1 : 0;
  const std::int64_t B = q->dim(0), H = q->dim(1 + off), K = q->dim(2 + off), HV = v->dim(v->rank() - 2),
                     V = v->dim(v->rank() - 1);
  // o is one token's, in q's rank
  out.push_back({"o", q->dtype(), off ? std::vector<std::int64_t>{B, 1, HV, V} : std::vector<std::int64_t>{B, HV, V},
                 "", 0});
  // The decode state is updated in place: it starts as initial_state (or zeros) and is reported as
  // final_state; likewise the preconditioner state.
  // A seeded state keeps the input's dtype and shape, so validation sees what will be launched.
  auto seeded = [&](const char* name, const char* input, std::vector<std::int64_t> shape, double fill) {
    const Tensor* t = find(in, input);
    out.push_back(t ? OutputSlot{name, t->dtype(), t->shape(), input, 0}
                    : OutputSlot{name, ScalarType::F32, std::move(shape), "", fill});
  };
  seeded("final_state", "initial_state", {B, HV, K, V}, 0.0);
  if (dgps::hasPrecond(spec)) {
    seeded("final_precond_state", "initial_precond_state", {B, H, K},
           dgps::usesHypergrad(spec) ? spec.precond.hypergrad.init : 0.0);
  }
  return out;
}

// Assembles the call's tensor set from a name -> view function (fake or real pointers).
template <typename ViewOf>
dgps::ForwardTensors forwardTensors(ViewOf view) {
  dgps::ForwardTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  t.initial_state = view("initial_state"); t.initial_precond_state = view("initial_precond_state");
  t.cu_seqlens = view("cu_seqlens");
  t.o = view("o"); t.final_state = view("final_state"); t.final_precond_state = view("final_precond_state");
  return t;
}

template <typename ViewOf>
dgps::DecodeTensors decodeTensors(ViewOf view) {
  dgps::DecodeTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  t.o = view("o"); t.state = view("final_state"); t.precond_state = view("final_precond_state");
  return t;
}

int run(const Options& o) {
  dgps::Package pkg = dgps::Package::open(o.package);
  const dgps::Spec& spec = pkg.spec();
  dgps::SafetensorsFile in = dgps::readSafetensors(o.inputs);
  const std::set<std::string> accepted = {"q", "k", "v", "g", "beta", "precond_g", "precond_beta", "precond_center",
                                          "initial_state", "initial_precond_state", "cu_seqlens"};
  for (const auto& kv : in.tensors) {
    if (!accepted.count(kv.first)) {
      fail(o.inputs + ": unknown tensor '" + kv.first +
           "' (accepted: q, k, v, g, beta, precond_g, precond_beta, precond_center, initial_state, "
           "initial_precond_state, cu_seqlens)");
    }
  }
  if (o.decode && find(in.tensors, "cu_seqlens")) fail(o.inputs + ": cu_seqlens is not an input of --decode");
  if (o.decode && !dgps::hasPrecond(spec) && find(in.tensors, "initial_precond_state")) {
    fail(o.inputs + ": initial_precond_state given but spec '" + spec.name + "' has no preconditioner");
  }
  const std::vector<OutputSlot> outs = outputSlots(spec, in.tensors, o.decode);
  dgps::LaunchOptions launch;
  if (!o.config.empty()) {
    launch.config = dgps::parseTileConfig(o.config, pkg.manifest().default_config);
    pkg.checkConfig(*launch.config);
  }
  launch.check_cu_seqlens = o.check_cu_seqlens;

  // 1. Validate shapes and dtypes on the host, with placeholder pointers: a bad file is reported even on
  //    a machine without a GPU, and nothing is uploaded for a call that cannot run.
  {
    std::map<std::string, TensorView> fake;
    std::uintptr_t next = 0x100000;
    auto add = [&](const std::string& name, ScalarType dt, const std::vector<std::int64_t>& shape) {
      fake[name] = TensorView(reinterpret_cast<void*>(next), dt, shape, o.device);
      next += 0x100000;
    };
    for (const auto& kv : in.tensors) add(kv.first, kv.second.dtype(), kv.second.shape());
    for (const auto& s : outs) add(s.name, s.dtype, s.shape);
    auto view = [&](const char* n) { return fake.count(n) ? fake.at(n) : TensorView(); };
    if (o.decode) dgps::validateDecode(pkg, decodeTensors(view));
    else dgps::validateForward(pkg, forwardTensors(view));
  }

  // 2. Upload, allocate (outputs poisoned with NaN, decode states seeded), run, download.
  std::map<std::string, DeviceTensor> dev;
  for (const auto& kv : in.tensors) {
    if (o.decode && (kv.first == "initial_state" || kv.first == "initial_precond_state")) continue;
    dev.emplace(kv.first, DeviceTensor::upload(kv.second, o.device));
  }
  for (const auto& s : outs) {
    if (!s.seeded_from.empty()) {
      dev.emplace(s.name, DeviceTensor::upload(in.tensors.at(s.seeded_from), o.device));
    } else if (o.decode && s.name != "o") {
      Tensor init(s.dtype, s.shape);
      for (std::int64_t i = 0; i < init.numel(); ++i) init.set(i, s.fill);
      dev.emplace(s.name, DeviceTensor::upload(init, o.device));
    } else {
      dev.emplace(s.name, DeviceTensor(s.dtype, s.shape, o.device));
      dev.at(s.name).poison();
    }
  }
  auto view = [&](const char* n) { return dev.count(n) ? dev.at(n).view() : TensorView(); };
  dgps::Runtime rt(dgps::RuntimeOptions{o.cache_dir, true, {}});
  auto t0 = std::chrono::steady_clock::now();
  if (o.decode) rt.decode(pkg, decodeTensors(view), launch);
  else rt.forward(pkg, forwardTensors(view), launch);
  {
    dgps::DeviceContextGuard guard(o.device);
    dgps::checkCuda(dgps::cudaDriver().cuCtxSynchronize(), "cuCtxSynchronize after the run");
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  dgps::SafetensorsFile out;
  out.metadata["package"] = pkg.name();
  out.metadata["spec_hash"] = pkg.manifest().spec_hash;
  out.metadata["mode"] = o.decode ? "decode" : "forward";
  for (const auto& s : outs) out.tensors.emplace(s.name, dev.at(s.name).download());
  dgps::writeSafetensors(o.out, out);
  std::cout << "dgps-run: " << pkg.name() << " " << (o.decode ? "decode" : "forward") << " on device " << o.device
            << " (" << dgps::deviceName(o.device) << "): " << out.tensors.size() << " output(s) written to " << o.out
            << " in " << ms << " ms including JIT\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Run a DGPS package on the GPU on inputs from a safetensors file"};
  app.add_option("package", o.package, "package folder (generated/<name>)")->required();
  app.add_option("--inputs", o.inputs, "input tensors (safetensors)")->required();
  app.add_option("--out", o.out, "output file (safetensors)")->required();
  app.add_flag("--decode", o.decode, "run one decode step instead of the chunked forward");
  app.add_option("--config", o.config, "tile configuration overrides, e.g. chunk=64,block_v=32,warps=4,stages=1");
  app.add_option("--device", o.device, "CUDA device ordinal");
  app.add_option("--cache-dir", o.cache_dir, "binary cache folder");
  app.add_flag("--check-cu-seqlens", o.check_cu_seqlens, "validate cu_seqlens values on the host before launching");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "dgps-run: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "dgps-run: internal error\n";
    return 1;
  }
}
