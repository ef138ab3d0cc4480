// Parsing and validation of DGPS spec files (YAML; the language is documented in docs/spec.md).
//
// parseSpecFile / parseSpecString read one YAML document into a Spec, fill every omitted field with
// its default (the released code's values, docs/math.md §3.6), and validate it:
//   * syntax: malformed YAML is one error at yaml-cpp's mark; so is a second YAML document and an
//     explicit YAML tag (`!!str 1e-6`, `!foo {}`), which the language gives no meaning;
//   * keys: unknown keys (with the nearest valid key suggested), duplicate keys, missing required
//     keys (name, decay, gain, precond, solve), keys that do not apply (e.g. gain.range with
//     gain.kind none, precond.squash with source hypergrad_ogd);
//   * types and values: wrong YAML node types, enum values, ranges (K, V in 16..256, x > 1,
//     eps > 0, eta >= 0, chunk in {16,32,64}, ...);
//   * combinations: write-eigenvalue stability of the delta rule under the gain range and the
//     preconditioner bound (docs/math.md §3.4, §7.2), the OSDN d-scan bound (§5.2), and
//     unsupported points (hypergrad_ogd only on the key side of a delta rule).
// Every diagnostic carries file, 1-based line and column, key path, message and expected values.
// No exception escapes these functions: I/O errors, yaml-cpp exceptions and internal failures all
// become diagnostics.
#pragma once

#include <iosfwd>

#include <optional>
#include <string>
#include <vector>

#include "dgps/dsl/Diagnostic.h"
#include "dgps/dsl/Spec.h"

namespace dgps {

struct ParseResult {
  /// Set when there is no error. Lists (dims, dtypes, kernels, tuning) are sorted ascending, so two
  /// specs that differ only in list order compare and hash equal.
  std::optional<Spec> spec;
  /// Errors (then `spec` is empty) and warnings, sorted by position in the file.
  std::vector<Diagnostic> diagnostics;

  bool ok() const { return spec.has_value(); }
};

/// Reads and parses the file at `path`; diagnostics name `path` as the file. The file is read with
/// readRegularFile (FileRead.h): a FIFO, a device, a directory or a file over file_limits::kSpec is one
/// diagnostic, without reading it.
ParseResult parseSpecFile(const std::string& path);

/// For command-line entry points: parses the spec file at `path`, prints every diagnostic (warnings
/// included) to `err`, and on success stores the spec in `spec`. Returns false when the spec has errors.
bool loadSpecForCommand(const std::string& path, Spec& spec, std::ostream& err);

/// Parses spec text; `filename` is only used in diagnostics.
ParseResult parseSpecString(const std::string& text, const std::string& filename = "<string>");

/// Validates a Spec built in code (value ranges and combinations, as the parser does). Positions come
/// from the axis `loc` fields where set. Returns errors and warnings; empty when the spec is valid.
std::vector<Diagnostic> validateSpec(const Spec& spec);

}  // namespace dgps
