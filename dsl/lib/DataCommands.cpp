// `dgps-spec inputs` and `dgps-spec compare` (DataCommands.h).
#include "dgps/dsl/DataCommands.h"

#include <cstdio>
#include <exception>
#include <ostream>
#include <set>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/ShapeArg.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

ScalarType activationDtype(const std::string& name, const Spec& spec) {
  if (name.empty()) return spec.input_dtypes.empty() ? ScalarType::BF16 : toScalarType(spec.input_dtypes.front());
  for (ScalarType t : {ScalarType::BF16, ScalarType::F16, ScalarType::F32, ScalarType::F64})
    if (name == toString(t)) return t;
  throw DataError("--dtype '" + name + "': expected bf16, f16, f32 or f64");
}

// The generated inputs are held in memory and written in one piece: bound their size before generating.
// Counted generously (every per-token tensor a spec can take), in double so no product overflows.
void checkInputSize(const ReferenceProblem& s) {
  const double tokens = double(s.batch) * double(s.seq_len);
  const double perToken = 2.0 * double(s.heads_qk) * double(s.key_dim) + double(s.heads_v) * double(s.value_dim) +
                          double(s.heads_v) * double(s.key_dim) + 2.0 * double(s.heads_v) + 2.0 * double(s.heads_qk);
  const double states = double(s.numSeqs()) * double(s.heads_v) * double(s.key_dim) * double(s.value_dim);
  const double total = tokens * perToken + states;
  const double limit = 2147483648.0;  // 2^31 elements: several GiB of inputs
  if (total > limit) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "--shape: the inputs would hold about %.3g elements, over the limit of 2^31; "
                  "use a smaller B, T, H, K or V", total);
    throw DataError(buf);
  }
}

std::string shapeText(const ReferenceProblem& s) {
  std::string t = "B=" + std::to_string(s.batch) + ",T=" + std::to_string(s.seq_len) + ",H=" +
                  std::to_string(s.heads_qk) + ",HV=" + std::to_string(s.heads_v) + ",K=" + std::to_string(s.key_dim) +
                  ",V=" + std::to_string(s.value_dim);
  if (!s.cu_seqlens.empty()) t += " cu_seqlens=" + shapeToString(s.cu_seqlens);
  return t;
}

std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", x);
  return buf;
}

}  // namespace

int runInputsCommand(const InputsCommandOptions& o, std::ostream& out, std::ostream& err) {
  try {
    Spec spec;
    if (!loadSpecForCommand(o.spec_path, spec, err)) return 1;
    ShapeArg arg = parseShapeOption(o.shape);
    std::vector<std::int64_t> cu;
    if (!o.cu_seqlens.empty()) {
      cu = parseCuSeqlensArg(o.cu_seqlens);
      if (arg.T == 0) arg.T = cu.back();
    }
    ReferenceProblem shape = resolveShapeOption(arg, spec);
    shape.cu_seqlens = cu;
    checkProblemShape(spec, shape);  // before the size bound, so a contradiction is reported as such
    checkInputSize(shape);
    const ScalarType dtype = activationDtype(o.dtype, spec);
    InputGenOptions gen;
    gen.initial_state = gen.initial_precond_state = o.initial_states;
    SafetensorsFile file;
    file.tensors = generateInputs(spec, shape, o.seed, dtype, gen);
    file.metadata["dgps_spec"] = spec.name;
    file.metadata["dgps_seed"] = std::to_string(o.seed);
    file.metadata["dgps_shape"] = shapeText(shape);
    file.metadata["dgps_producer"] = "dgps-spec inputs";
    writeSafetensors(o.out_path, file);
    out << "inputs " << spec.name << " " << shapeText(shape) << ", " << toString(dtype) << ", seed " << o.seed
        << ":\n";
    for (const auto& [name, t] : file.tensors) out << "  " << name << " " << t.shapeString() << " " << toString(t.dtype()) << "\n";
    out << "written to " << o.out_path << "\n";
    return 0;
  } catch (const DataError& e) {
    err << "error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    err << "error: internal failure while generating inputs: " << e.what() << "\n";
  }
  return 1;
}

int runCompareCommand(const CompareCommandOptions& o, std::ostream& out, std::ostream& err) {
  try {
    const SafetensorsFile ref = readSafetensors(o.ref_path);  // its errors name the file
    const SafetensorsFile got = readSafetensors(o.got_path);
    std::set<std::string> names;
    for (const auto& kv : ref.tensors) names.insert(kv.first);
    for (const auto& kv : got.tensors) names.insert(kv.first);
    if (names.empty()) {
      err << "error: " << o.ref_path << " and " << o.got_path << " hold no tensors\n";
      return 1;
    }
    int failures = 0;
    for (const std::string& name : names) {
      auto r = ref.tensors.find(name), g = got.tensors.find(name);
      if (r == ref.tensors.end() || g == got.tensors.end()) {
        err << "error: tensor '" << name << "' is in " << (r == ref.tensors.end() ? o.got_path : o.ref_path)
            << " but not in " << (r == ref.tensors.end() ? o.ref_path : o.got_path) << "\n";
        ++failures;
        continue;
      }
      if (g->second.shape() != r->second.shape()) {
        err << "error: tensor '" << name << "': shape " << g->second.shapeString() << " in " << o.got_path
            << " but " << r->second.shapeString() << " in " << o.ref_path << "\n";
        ++failures;
        continue;
      }
      const TensorErrors e = compareTensors(g->second, r->second);
      const std::string why = toleranceFailure(e, o.tolerances);
      out << name << " " << r->second.shapeString() << " " << toString(r->second.dtype()) << " vs "
          << toString(g->second.dtype()) << ": max_abs " << sci(e.max_abs) << "  max_rel " << sci(e.max_rel)
          << "  rel_l2 " << sci(e.rel_l2) << "  non-finite " << e.nonfinite_ref << "/" << e.nonfinite_got << "  "
          << (why.empty() ? "ok" : "FAIL: " + why) << "\n";
      if (!why.empty()) ++failures;
    }
    if (failures > 0) {
      err << "error: " << failures << " of " << names.size() << " tensor(s) failed the comparison of " << o.got_path
          << " against " << o.ref_path << "\n";
      return 1;
    }
    return 0;
  } catch (const DataError& e) {
    err << "error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    err << "error: internal failure in compare: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace dgps
