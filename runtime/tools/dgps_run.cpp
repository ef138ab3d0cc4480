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
using dgps::TensorView;

struct Options {
  std::string package, inputs, out, config, cache_dir;
  bool decode = false;
  bool check_cu_seqlens = false;
  int device = 0;
};

[[noreturn]] void fail(const std::string& m) { throw dgps::RuntimeError(dgps::RuntimeErrorCode::InvalidArgument, m); }

int run(const Options& o) {
  dgps::Package pkg = dgps::Package::open(o.package);
  dgps::SafetensorsFile in = dgps::readSafetensors(o.inputs);
  const std::set<std::string> accepted = {"q", "k", "v", "g", "beta", "precond_g", "precond_beta", "precond_center",
                                          "initial_state", "initial_precond_state", "cu_seqlens"};
  std::map<std::string, DeviceTensor> dev;
  for (const auto& kv : in.tensors) {
    if (!accepted.count(kv.first)) {
      fail(o.inputs + ": unknown tensor '" + kv.first +
           "' (accepted: q, k, v, g, beta, precond_g, precond_beta, precond_center, initial_state, "
           "initial_precond_state, cu_seqlens)");
    }
    dev.emplace(kv.first, DeviceTensor::upload(kv.second, o.device));
  }
  auto view = [&](const char* name) { return dev.count(name) ? dev.at(name).view() : TensorView(); };
  auto host = [&](const char* name) -> const dgps::Tensor* {
    auto it = in.tensors.find(name);
    return it == in.tensors.end() ? nullptr : &it->second;
  };
  const dgps::Spec& spec = pkg.spec();
  const dgps::Tensor* q = host("q");
  const dgps::Tensor* v = host("v");
  std::map<std::string, DeviceTensor> outputs;
  dgps::LaunchOptions launch;
  if (!o.config.empty()) launch.config = dgps::parseTileConfig(o.config, pkg.manifest().default_config);
  dgps::Runtime rt(dgps::RuntimeOptions{o.cache_dir, true, {}});
  auto t0 = std::chrono::steady_clock::now();

  if (!o.decode) {
    dgps::ForwardTensors t;
    t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
    t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
    t.initial_state = view("initial_state"); t.initial_precond_state = view("initial_precond_state");
    t.cu_seqlens = view("cu_seqlens");
    // Allocate outputs only when q and v have the ranks the shapes derive from; otherwise validation
    // below names the malformed input.
    if (q && v && q->rank() == 4 && v->rank() == 4) {
      const std::int64_t B = q->dim(0), T = q->dim(1), H = q->dim(2), K = q->dim(3), HV = v->dim(2), V = v->dim(3);
      const dgps::Tensor* cu = host("cu_seqlens");
      const std::int64_t N = cu && cu->rank() == 1 ? cu->dim(0) - 1 : B;
      outputs.emplace("o", DeviceTensor(q->dtype(), {B, T, HV, V}, o.device));
      if (spec.final_state) outputs.emplace("final_state", DeviceTensor(ScalarType::F32, {N, HV, K, V}, o.device));
      if (dgps::hasPrecond(spec) && spec.final_precond_state) {
        outputs.emplace("final_precond_state", DeviceTensor(ScalarType::F32, {N, H, K}, o.device));
      }
      t.o = outputs.at("o").view();
      if (outputs.count("final_state")) t.final_state = outputs.at("final_state").view();
      if (outputs.count("final_precond_state")) t.final_precond_state = outputs.at("final_precond_state").view();
    }
    dgps::validateForward(pkg, t);
    for (auto& kv : outputs) kv.second.poison();
    launch.check_cu_seqlens = o.check_cu_seqlens;
    rt.forward(pkg, t, launch);
  } else {
    dgps::DecodeTensors t;
    t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
    t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
    if (host("cu_seqlens")) fail(o.inputs + ": cu_seqlens is not an input of --decode (one token per batch row)");
    if (q && v && (q->rank() == 4 || q->rank() == 3) && v->rank() == q->rank()) {
      const std::size_t off = q->rank() == 4 ? 1 : 0;
      const std::int64_t B = q->dim(0), H = q->dim(1 + off), K = q->dim(2 + off), HV = v->dim(1 + off),
                         V = v->dim(2 + off);
      std::vector<std::int64_t> oshape = v->shape();
      outputs.emplace("o", DeviceTensor(q->dtype(), oshape, o.device));
      // The state is updated in place: start from initial_state (or zeros) and report it as final_state.
      if (dev.count("initial_state")) {
        outputs.emplace("final_state", std::move(dev.at("initial_state")));
        dev.erase("initial_state");
      } else {
        outputs.emplace("final_state", DeviceTensor(ScalarType::F32, {B, HV, K, V}, o.device));
        outputs.at("final_state").zero();
      }
      if (dgps::hasPrecond(spec)) {
        if (dev.count("initial_precond_state")) {
          outputs.emplace("final_precond_state", std::move(dev.at("initial_precond_state")));
          dev.erase("initial_precond_state");
        } else if (dgps::usesHypergrad(spec)) {
          fail(o.inputs + ": --decode with hypergrad_ogd needs initial_precond_state [B,H,K] (d has no zero start)");
        } else {
          outputs.emplace("final_precond_state", DeviceTensor(ScalarType::F32, {B, H, K}, o.device));
          outputs.at("final_precond_state").zero();
        }
      } else if (dev.count("initial_precond_state")) {
        fail(o.inputs + ": initial_precond_state given but spec '" + spec.name + "' has no preconditioner");
      }
      t.o = outputs.at("o").view();
      t.state = outputs.at("final_state").view();
      if (outputs.count("final_precond_state")) t.precond_state = outputs.at("final_precond_state").view();
    }
    dgps::validateDecode(pkg, t);
    outputs.at("o").poison();
    rt.decode(pkg, t, launch);
  }
  {
    dgps::DeviceContextGuard guard(o.device);
    dgps::checkCuda(dgps::cudaDriver().cuCtxSynchronize(), "cuCtxSynchronize after the run");
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  dgps::SafetensorsFile out;
  out.metadata["package"] = pkg.name();
  out.metadata["spec_hash"] = pkg.manifest().spec_hash;
  out.metadata["mode"] = o.decode ? "decode" : "forward";
  for (auto& kv : outputs) out.tensors.emplace(kv.first, kv.second.download());
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
  }
}
