// `dgps-spec gradients`: the float64 reference gradients from the command line.
#include <chrono>
#include <exception>
#include <iomanip>
#include <ostream>

#include "dgps/dsl/ReferenceGrad.h"
#include "dgps/dsl/Safetensors.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {

int runGradientsCommand(const std::string& spec_path, const std::string& inputs_path,
                        const std::string& cotangents_path, const std::string& gradients_path, std::ostream& out,
                        std::ostream& err) {
  try {
    Spec spec;
    if (!loadSpecForCommand(spec_path, spec, err)) return 1;
    const SafetensorsFile in = readSafetensors(inputs_path);  // its errors name the file
    const SafetensorsFile ct = readSafetensors(cotangents_path);
    // Inputs first, so that an error is prefixed by the file it is about.
    try {
      validateReferenceInputs(spec, in.tensors);
    } catch (const DataError& e) {
      throw DataError(inputs_path + ": " + e.what());
    }
    const auto start = std::chrono::steady_clock::now();
    SafetensorsFile file;
    try {
      file.tensors = runReferenceBackward(spec, in.tensors, ct.tensors);
    } catch (const DataError& e) {
      throw DataError(cotangents_path + ": " + e.what());
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    file.metadata["dgps_spec"] = spec.name;
    file.metadata["dgps_producer"] = "dgps reference gradients (float64)";
    writeSafetensors(gradients_path, file);
    out << "gradients " << spec.name << ": " << file.tensors.size() << " gradient tensors written to "
        << gradients_path << " (" << std::fixed << std::setprecision(1) << ms << " ms)\n";
    return 0;
  } catch (const DataError& e) {
    err << "error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    err << "error: internal failure in the reference gradients: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace dgps
