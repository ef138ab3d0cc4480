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

std::string formatFileProblem(Severity severity, const std::string& file, int line, int column,
                              const std::string& path, const std::string& message) {
  Diagnostic d;
  d.severity = severity;
  d.file = file;
  d.line = line;
  d.column = line > 0 ? column : 0;  // a column without its line locates nothing
  d.path = path;
  d.message = message;
  return formatDiagnostic(d);
}

bool hasErrors(const std::vector<Diagnostic>& ds) {
  for (const Diagnostic& d : ds)
    if (d.severity == Severity::Error) return true;
  return false;
}

}  // namespace dgps
