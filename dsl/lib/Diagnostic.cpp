#include "dgps/dsl/Diagnostic.h"

namespace dgps {

const char* toString(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
  }
  return "?";
}

std::string formatDiagnostic(const Diagnostic& d) {
  std::string out = d.file.empty() ? std::string("<spec>") : d.file;
  if (d.line > 0) {
    out += ":" + std::to_string(d.line);
    if (d.column > 0) out += ":" + std::to_string(d.column);
  }
  out += ": ";
  out += toString(d.severity);
  out += ": ";
  if (!d.path.empty()) out += d.path + ": ";
  out += d.message;
  if (!d.expected.empty()) out += " [expected: " + d.expected + "]";
  return out;
}

bool hasErrors(const std::vector<Diagnostic>& ds) {
  for (const Diagnostic& d : ds)
    if (d.severity == Severity::Error) return true;
  return false;
}

}  // namespace dgps
