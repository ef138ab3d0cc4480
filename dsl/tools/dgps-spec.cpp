// dgps-spec: the MLIR-free command line of the spec language and the float64 reference.
//   dgps-spec check SPEC                       validate; print class, hash, tensors, canonical form
//   dgps-spec reference SPEC --inputs F --out G run the float64 reference on safetensors inputs
//   dgps-spec demo SPEC                        reference on generated inputs, print a summary
//   dgps-spec inputs SPEC --shape B=..,T=..,H=..,K=..,V=.. [--seed N] [--cu-seqlens 0,1500,3000]
//                   [--dtype bf16|f16|f32|f64] [--no-initial-states] --out IN.safetensors
//                                              write generated inputs (the demo's generator)
//   dgps-spec compare REF.safetensors GOT.safetensors [--tol X] [--max-abs X] [--max-rel X]
//                                              per-tensor errors of GOT against REF; 1 when out of tolerance
//   dgps-spec gradients SPEC --inputs F --cotangents C --out G
//                                              float64 reference gradients (docs/backward.md)
// Exit status: 0 success, 1 bad spec / bad input, 2 bad command line. No exception escapes main.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "dgps/dsl/CheckCommand.h"
#include "dgps/dsl/DataCommands.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/ReferenceGrad.h"

namespace {

// A tolerance: a finite number >= 0 (CLI11's NonNegativeNumber would print the whole double range).
const CLI::Validator kTolerance(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) return "expected a number >= 0, got '" + text + "'";
      return "";
    },
    "X>=0");

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"dgps-spec: check DGPS spec files and run the float64 reference semantics"};
    app.require_subcommand(1);

    std::string checkSpec;
    CLI::App* check = app.add_subcommand("check", "validate a spec; print its DGPS class, hash, "
                                                  "tensors and canonical form");
    check->add_option("SPEC", checkSpec, "spec file (YAML)")->required();

    std::string refSpec, refInputs, refOut;
    CLI::App* reference = app.add_subcommand("reference", "run the float64 reference on inputs "
                                                          "from a safetensors file");
    reference->add_option("SPEC", refSpec, "spec file (YAML)")->required();
    reference->add_option("--inputs", refInputs, "input tensors (safetensors)")->required();
    reference->add_option("--out", refOut, "output file (safetensors, f64)")->required();

    std::string demoSpec;
    CLI::App* demo = app.add_subcommand("demo", "run the float64 reference on generated inputs");
    demo->add_option("SPEC", demoSpec, "spec file (YAML)")->required();

    dgps::InputsCommandOptions inOpt;
    bool noInitialStates = false;
    CLI::App* inputs = app.add_subcommand("inputs", "write generated inputs for a spec and shape to a "
                                                    "safetensors file (for `reference` and dgps-run)");
    inputs->add_option("SPEC", inOpt.spec_path, "spec file (YAML)")->required();
    inputs->add_option("--shape", inOpt.shape, "B=..,T=..,H=..,K=..,V=.. (HV optional; T optional with "
                                               "--cu-seqlens)")->required();
    inputs->add_option("--seed", inOpt.seed, "random seed (default 20260425, the demo's)");
    inputs->add_option("--cu-seqlens", inOpt.cu_seqlens, "packed sequence boundaries, e.g. 0,1500,3000 "
                                                         "(varlen specs; B = 1)");
    inputs->add_option("--dtype", inOpt.dtype, "dtype of q, k, v: bf16, f16, f32, f64 (default: the spec's "
                                               "first input dtype)");
    inputs->add_flag("--no-initial-states", noInitialStates, "leave out initial_state / initial_precond_state");
    inputs->add_option("--out", inOpt.out_path, "output file (safetensors)")->required();

    dgps::CompareCommandOptions cmpOpt;
    CLI::App* compare = app.add_subcommand("compare", "compare the tensors of two safetensors files (the "
                                                      "first is the reference); exit 1 when out of tolerance");
    compare->add_option("REF", cmpOpt.ref_path, "reference file, e.g. the float64 reference's outputs")->required();
    compare->add_option("GOT", cmpOpt.got_path, "file under test, e.g. dgps-run's outputs")->required();
    compare->add_option("--tol", cmpOpt.tolerances.rel_l2, "largest relative L2 error ||got-ref||/||ref|| "
                                                           "(default 1.5e-2)")->check(kTolerance);
    compare->add_option("--max-abs", cmpOpt.tolerances.max_abs, "largest max |got-ref| (default: unchecked)")
        ->check(kTolerance);
    compare->add_option("--max-rel", cmpOpt.tolerances.max_rel, "largest max |got-ref| / max |ref| "
                                                                "(default: unchecked)")->check(kTolerance);
    std::string gradSpec, gradInputs, gradCotangents, gradOut;
    CLI::App* gradients = app.add_subcommand("gradients", "float64 reference gradients of the inputs, given "
                                                          "cotangents of the outputs (docs/backward.md)");
    gradients->add_option("SPEC", gradSpec, "spec file (YAML)")->required();
    gradients->add_option("--inputs", gradInputs, "input tensors (safetensors)")->required();
    gradients->add_option("--cotangents", gradCotangents,
                          "cotangents do, and optionally dfinal_state, dfinal_precond_state (safetensors)")
        ->required();
    gradients->add_option("--out", gradOut, "gradient file (safetensors, f64: dq, dk, dv, ...)")->required();

    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int rc = app.exit(e);
      return rc == 0 ? 0 : 2;
    }
    if (check->parsed()) return dgps::runCheckCommand(checkSpec, std::cout, std::cerr);
    if (reference->parsed())
      return dgps::runReferenceCommand(refSpec, refInputs, refOut, std::cout, std::cerr);
    if (demo->parsed()) return dgps::runDemoCommand(demoSpec, std::cout, std::cerr);
    if (inputs->parsed()) {
      inOpt.initial_states = !noInitialStates;
      return dgps::runInputsCommand(inOpt, std::cout, std::cerr);
    }
    if (compare->parsed()) return dgps::runCompareCommand(cmpOpt, std::cout, std::cerr);
    if (gradients->parsed())
      return dgps::runGradientsCommand(gradSpec, gradInputs, gradCotangents, gradOut, std::cout, std::cerr);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dgps-spec: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "dgps-spec: internal error\n";
  }
  return 1;
}
