// Entry points of the float64 chunk-IR interpreter (Executor.h); the interpreter itself is
// Interpreter.h (forward ops) and ExecutorBackward.cpp (adjoint ops).
#include "dgps/Executor/Executor.h"

#include "Interpreter.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace dgps::chunk;

namespace dgps {
using exec::ExecError;
using exec::Interpreter;

ExecutorResult executeChunkIR(ModuleOp module, const TensorMap& inputs, const ExecutorOptions& options) {
  ExecutorResult result;
  func::FuncOp forward;
  for (func::FuncOp fn : module.getOps<func::FuncOp>())
    if (fn->hasAttr(kChunkSizeAttr) && !fn->hasAttr(kBackwardOfAttr)) {
      if (forward) {
        result.error = "module has more than one forward function";
        return result;
      }
      forward = fn;
    }
  if (!forward) {
    result.error = "module has no forward function (func.func with chunk.chunk_size); lower it first";
    return result;
  }
  try {
    result.outputs = Interpreter(forward, inputs, options).run();
    result.ok = true;
  } catch (const ExecError& e) {
    result.error = e.what();
  } catch (const std::exception& e) {
    result.error = std::string("executor: ") + e.what();
  }
  return result;
}

namespace {

/// Runs one function of the module; fills result.error instead of throwing.
bool runFunction(func::FuncOp fn, const TensorMap& inputs, const ExecutorOptions& options, TensorMap& outputs,
                 std::string& error) {
  try {
    outputs = Interpreter(fn, inputs, options).run();
    return true;
  } catch (const ExecError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = std::string("executor: ") + e.what();
  }
  return false;
}

}  // namespace

ExecutorResult executeChunkBackward(ModuleOp module, const TensorMap& inputs, const TensorMap& cotangents,
                                    const ExecutorOptions& options) {
  ExecutorResult result;
  func::FuncOp backward;
  for (func::FuncOp fn : module.getOps<func::FuncOp>())
    if (fn->hasAttr(kBackwardOfAttr)) {
      if (backward) {
        result.error = "module has more than one backward function";
        return result;
      }
      backward = fn;
    }
  if (!backward) {
    result.error = "module has no backward function (func.func with chunk.backward_of); run --chunk-derive-backward";
    return result;
  }
  auto forwardName = backward->getAttrOfType<FlatSymbolRefAttr>(kBackwardOfAttr);
  auto forward = forwardName ? module.lookupSymbol<func::FuncOp>(forwardName.getValue()) : func::FuncOp();
  if (!forward) {
    result.error = "the backward function's chunk.backward_of names no function of the module";
    return result;
  }
  static const llvm::StringSet<> cotangentNames = {"do", "dfinal_state", "dfinal_precond_state"};
  for (const auto& [name, t] : cotangents)
    if (!cotangentNames.contains(name)) {
      result.error = "unknown cotangent '" + name + "'; expected do, dfinal_state or dfinal_precond_state";
      return result;
    }
  if (!cotangents.count("do")) {
    result.error = "missing cotangent 'do' (the cotangent of the output o)";
    return result;
  }

  // The forward, with the intermediates it saves for the backward ("saved.<name>" outputs).
  TensorMap forwardOutputs;
  if (!runFunction(forward, inputs, options, forwardOutputs, result.error)) return result;
  TensorMap all = inputs;
  for (const auto& [name, t] : cotangents) all[name] = t;
  for (const auto& [name, t] : forwardOutputs)
    if (llvm::StringRef(name).starts_with(kSavedPrefix)) all[name] = t;

  TensorMap gradients;
  if (!runFunction(backward, all, options, gradients, result.error)) return result;
  // One gradient per input that was given (an absent optional input has none).
  for (auto& [name, t] : gradients)
    if (inputs.count(name.substr(1))) result.outputs[name] = std::move(t);
  result.ok = true;
  return result;
}

}  // namespace dgps
