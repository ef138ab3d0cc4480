// `dgps-spec reference` and `dgps-spec demo`: the float64 reference from the command line.
#include <chrono>
#include <cmath>
#include <exception>
#include <iomanip>
#include <ostream>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

double norm2(const Tensor& t) {
  double s = 0.0;
  for (std::int64_t i = 0; i < t.numel(); ++i) s += t.get(i) * t.get(i);
  return std::sqrt(s);
}

// A small problem every valid spec accepts: the spec's first K, V and activation dtype; two sequences
// (packed with cu_seqlens when the spec is varlen, to exercise the packed path).
ReferenceProblem demoShape(const Spec& spec) {
  ReferenceProblem s;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 2;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = spec.key_dims.empty() ? 64 : spec.key_dims.front();
  s.value_dim = spec.value_dims.empty() ? 64 : spec.value_dims.front();
  if (spec.varlen) {
    s.batch = 1;
    s.seq_len = 320;
    s.cu_seqlens = {0, 128, 320};
  } else {
    s.batch = 2;
    s.seq_len = 160;
  }
  return s;
}

}  // namespace

int runReferenceCommand(const std::string& spec_path, const std::string& inputs_path,
                        const std::string& outputs_path, std::ostream& out, std::ostream& err) {
  try {
    Spec spec;
    if (!loadSpecForCommand(spec_path, spec, err)) return 1;
    const SafetensorsFile in = readSafetensors(inputs_path);  // its errors name the file
    const auto start = std::chrono::steady_clock::now();
    ReferenceOutputs result;
    try {
      result = runReference(spec, in.tensors);
    } catch (const DataError& e) {
      throw DataError(inputs_path + ": " + e.what());
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    SafetensorsFile file;
    file.tensors = result.toMap();
    file.metadata["dgps_spec"] = spec.name;
    file.metadata["dgps_producer"] = "dgps reference (float64)";
    writeSafetensors(outputs_path, file);
    out << "reference " << spec.name << ": o " << result.o.shapeString() << ", " << file.tensors.size()
        << " output tensors written to " << outputs_path << " (" << std::fixed << std::setprecision(1) << ms
        << " ms)\n";
    return 0;
  } catch (const DataError& e) {
    err << "error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    err << "error: internal failure in the reference: " << e.what() << "\n";
  }
  return 1;
}

int runDemoCommand(const std::string& spec_path, std::ostream& out, std::ostream& err) {
  try {
    Spec spec;
    if (!loadSpecForCommand(spec_path, spec, err)) return 1;
    const ReferenceProblem shape = demoShape(spec);
    const ScalarType dtype = spec.input_dtypes.empty() ? ScalarType::BF16 : toScalarType(spec.input_dtypes.front());
    const ReferenceInputs inputs = generateInputs(spec, shape, /*seed=*/20260425, dtype);
    const auto start = std::chrono::steady_clock::now();
    const ReferenceOutputs result = runReference(spec, inputs);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    out << "spec " << spec.name << " (decay " << toString(spec.decay.kind) << ", gain " << toString(spec.gain.kind)
        << ", precond " << toString(spec.precond.kind);
    if (spec.precond.kind == PrecondKind::Diagonal) {
      out << " " << toString(spec.precond.source) << " on the " << toString(spec.precond.side) << " side";
    }
    out << ", solve " << toString(spec.solve.kind);
    if (householderSteps(spec) > 1) out << " with " << householderSteps(spec) << " Householder steps per token";
    out << ")\n";
    out << "shape B=" << shape.batch << " T=" << shape.seq_len << " H=" << shape.heads_qk << " HV=" << shape.heads_v
        << " K=" << shape.key_dim << " V=" << shape.value_dim << " N=" << shape.numSeqs();
    if (!shape.cu_seqlens.empty()) out << " cu_seqlens=" << shapeToString(shape.cu_seqlens);
    out << ", inputs " << toString(dtype) << ", seed 20260425\n";
    out << std::setprecision(6);
    out << "o " << result.o.shapeString() << " f64, ||o|| = " << norm2(result.o) << "\n";
    if (result.has_final_state) {
      out << "final_state " << result.final_state.shapeString() << ", ||S_T|| = " << norm2(result.final_state) << "\n";
    }
    if (result.has_final_precond_state) {
      out << "final_precond_state " << result.final_precond_state.shapeString()
          << ", ||P_T|| = " << norm2(result.final_precond_state) << "\n";
    }
    out << std::fixed << std::setprecision(1) << "float64 reference time " << ms << " ms\n";
    return 0;
  } catch (const DataError& e) {
    err << "error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    err << "error: internal failure in the reference demo: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace dgps
