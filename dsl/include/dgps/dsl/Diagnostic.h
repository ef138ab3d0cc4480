// Diagnostics of the spec language: one message per problem, with the file, the 1-based line and
// column of the offending YAML node, the key path inside the spec, and what would have been accepted.
//
// Rendered form (formatDiagnostic), one line, compiler style:
//   specs/pgdn.yaml:7:10: error: precond.squash.x: must be > 1, got 0.5 [expected: a number > 1 (default 1.5)]
//
// The same form is the one error style of every schema reader: the spec parser here, the runtime's package
// manifest reader (runtime/lib/Package.cpp) and its tuning-database reader (runtime/lib/tuning/TuningDb.cpp)
// all render through formatDiagnostic (formatFileProblem), e.g.
//   pkg/manifest.yaml:19:23: error: launch.forward[1].smem: bad formula "chunk * * 4": expected a number, ...
//   ~/.cache/dgps/tuning.jsonl:3: warning: config.warps: expected an integer in [1, 1024], got "four" (invalid
//   record skipped)
// A value of the wrong kind or range says "expected <what is allowed>, got <what came>" in the message, or
// keeps what is allowed in `expected` (the spec parser's habit); either way the line names what, where and
// what was expected.
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

/// formatDiagnostic of a problem at `file`:`line`:`column` (1-based; 0 when unknown) in the field `path`
/// (empty for the file as a whole): the located message a reader throws or warns with.
std::string formatFileProblem(Severity severity, const std::string& file, int line, int column,
                              const std::string& path, const std::string& message);

/// True if any diagnostic is an error (warnings do not count).
bool hasErrors(const std::vector<Diagnostic>& ds);

const char* toString(Severity s);

}  // namespace dgps
