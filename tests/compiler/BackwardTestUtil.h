// Helpers of the backward tests: the derived backward module of a spec (flat, or fused and partitioned
// like dgpsc plan --backward builds it), random cotangents shaped like the forward's outputs, and the
// loss L = Σ do·o + Σ dfinal_state·final_state + Σ dfinal_precond_state·final_precond_state whose
// gradient the backward computes.
#pragma once

#include <string>
#include <vector>

#include "CompilerTestUtil.h"
#include "dgps/Executor/Executor.h"
#include "dgps/dsl/InputGen.h"

namespace dgps::test {

/// The shipped spec with varlen on (the chunk IR does not depend on it).
inline Spec varlenSpec(Spec s) {
  s.varlen = true;
  return s;
}

/// The same spec with small head dims allowed, for generating inputs only: the chunk IR does not depend
/// on the dims, but a spec must keep them in the validator's range, so the IR is built from varlenSpec.
inline Spec smallDimsSpec(Spec s) {
  s = varlenSpec(std::move(s));
  s.key_dims = {4, 8, 12};
  s.value_dims = {4, 8, 12};
  return s;
}

/// imported → canonicalize → lower → canonicalize → derive-backward [→ fuse → parallel-precond-scan → partition →
/// partition-backward].
inline mlir::OwningOpRef<mlir::ModuleOp> backwardModule(Context& c, const Spec& spec, bool partitioned,
                                                        std::vector<std::string> keep = {}) {
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  std::vector<std::unique_ptr<mlir::Pass>> passes;
  passes.push_back(mlir::createCanonicalizerPass());
  passes.push_back(createLowerToChunk());
  passes.push_back(mlir::createCanonicalizerPass());
  passes.push_back(createDeriveBackward(DeriveBackwardOptions{std::move(keep)}));
  if (partitioned) {
    passes.push_back(createFusePreconditioner());
    passes.push_back(createParallelPrecondScan());  // as dgpsc: the forward's plan does not depend on --backward
    passes.push_back(createPartitionKernels());
    passes.push_back(createPartitionBackward());
  }
  for (auto& p : passes) {
    std::string name = p->getArgument().str();
    if (mlir::failed(runPass(*c.ctx, *m, std::move(p)))) {
      ADD_FAILURE() << spec.name << ": pass " << name << " failed";
      return {};
    }
  }
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name;
  return m;
}

/// N(0, 1) cotangents for every output the forward stores (o, final_state, final_precond_state).
inline TensorMap randomCotangents(const TensorMap& forwardOutputs, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  TensorMap cot;
  for (const char* name : {"o", "final_state", "final_precond_state"}) {
    auto it = forwardOutputs.find(name);
    if (it == forwardOutputs.end()) continue;
    std::vector<double> x(static_cast<size_t>(it->second.numel()));
    for (double& v : x) v = n01(rng);
    cot["d" + std::string(name)] = Tensor::fromDoubles(ScalarType::F64, it->second.shape(), x);
  }
  return cot;
}

/// L(inputs) = Σ_outputs ⟨cotangent, output⟩, by the executor's float64 forward; `magnitude` (if given)
/// receives Σ |cotangent · output|, the scale of L's rounding error.
inline double loss(mlir::ModuleOp m, const TensorMap& inputs, const TensorMap& cot, double* magnitude = nullptr) {
  ExecutorResult r = executeChunkIR(m, inputs);
  if (!r.ok) {
    ADD_FAILURE() << r.error;
    return NAN;
  }
  double s = 0, mag = 0;
  for (const auto& [name, dy] : cot) {
    std::vector<double> y = r.outputs.at(name.substr(1)).toDoubles(), d = dy.toDoubles();
    for (size_t i = 0; i < y.size(); ++i) {
      s += y[i] * d[i];
      mag += std::fabs(y[i] * d[i]);
    }
  }
  if (magnitude) *magnitude = mag;
  return s;
}

/// The shipped specs whose backward --chunk-derive-backward derives: every valid one (the hypergrad_ogd
/// preconditioner of OSDN included) but those with several Householder steps per token, whose step ops
/// (chunk.spread_steps / gather_steps) have no adjoint yet (the pass refuses them, tests/lit/dgpsc).
inline std::vector<std::string> derivedSpecPaths() {
  std::vector<std::string> paths;
  for (const std::string& p : shippedSpecPaths()) {
    ParseResult r = parseSpecFile(p);
    if (r.ok() && householderSteps(*r.spec) == 1) paths.push_back(p);
  }
  return paths;
}

/// Whether an input gets a gradient (every floating-point input; cu_seqlens has none).
inline bool differentiable(const std::string& name) { return name != "cu_seqlens"; }

}  // namespace dgps::test
