// Diagnostics of the spec language: one message per problem, with the file, the 1-based line and
// column of the offending YAML node, the key path inside the spec, and what would have been accepted.
//
// Rendered form (formatDiagnostic), one line, compiler style:
//   specs/pgdn.yaml:7:10: error: precond.squash.x: must be > 1, got 0.5 [expected: a number > 1 (default 1.5)]
#pragma once

#include <string>
#include <vector>

namespace dgps {

enum class Severity {
  Error,    ///< the spec is rejected.
  Warning,  ///< the spec is accepted; something deserves attention (e.g. allow_unstable in effect).
};

struct Diagnostic {
  Severity severity = Severity::Error;
  std::string file;      ///< the spec's file name as given to the parser ("<string>" for in-memory text).
  int line = 0;          ///< 1-based; 0 when no position is known (e.g. the file could not be opened).
  int column = 0;        ///< 1-based; 0 when unknown.
  std::string path;      ///< key path such as "precond.squash.x" or "dims.key[1]"; empty for the document.
  std::string message;   ///< what is wrong, with the offending value where there is one.
  std::string expected;  ///< what is allowed (values, range, type); may be empty.
};

/// "file:line:col: error: path: message [expected: ...]" (line/col or path omitted when unknown).
std::string formatDiagnostic(const Diagnostic& d);

/// True if any diagnostic is an error (warnings do not count).
bool hasErrors(const std::vector<Diagnostic>& ds);

const char* toString(Severity s);

}  // namespace dgps
