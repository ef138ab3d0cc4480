#include "dgps/dsl/CheckCommand.h"

#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/Classify.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/Signature.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace {

void printSignature(const Spec& s, std::ostream& out) {
  out << "# tensors (chunk_forward):\n";
  for (const TensorSig& t : forwardSignature(s)) {
    std::string line = "#   " + std::string(t.role == TensorRole::Output ? "out " : "in  ") + t.name;
    line.resize(std::max<size_t>(line.size() + 1, 32), ' ');
    line += shapeText(t);
    line.resize(std::max<size_t>(line.size() + 1, 52), ' ');
    line += t.dtype == "input" ? std::string("input dtype") : t.dtype;
    if (t.optional) line += ", optional";
    if (!t.note.empty()) line += "; " + t.note;
    out << line << "\n";
  }
}

}  // namespace

int runCheckCommand(const std::string& path, std::ostream& out, std::ostream& err) {
  try {
    const ParseResult r = parseSpecFile(path);
    for (const Diagnostic& d : r.diagnostics) err << formatDiagnostic(d) << "\n";
    if (!r.ok()) {
      size_t n = 0;
      for (const Diagnostic& d : r.diagnostics) n += d.severity == Severity::Error;
      err << path << ": " << n << (n == 1 ? " error" : " errors") << "; spec rejected\n";
      return 1;
    }
    const Spec& s = *r.spec;
    if (std::optional<Diagnostic> refusal = kernelsRefusal(s)) {  // valid, but dgpsc compile refuses it
      refusal->severity = Severity::Warning;
      err << formatDiagnostic(*refusal) << " (dgpsc compile refuses this spec)\n";
    }
    out << "# spec: " << path << "\n";
    out << "# class: " << classify(s) << "\n";
    out << "# hash: " << specHash(s) << "\n";
    printSignature(s, out);
    out << canonicalYaml(s);
    return 0;
  } catch (const std::exception& e) {
    err << path << ": internal error: " << e.what() << "\n";
  } catch (...) {
    err << path << ": internal error\n";
  }
  return 1;
}

}  // namespace dgps
