// `check SPEC`: the command behind `dgps-spec check` and `dgpsc check`.
#pragma once

#include <ostream>
#include <string>

namespace dgps {

/// Parses and validates the spec at `path`. On success prints to `out` the DGPS classification, the
/// spec hash, the tensors its chunk_forward kernel takes, and the canonical form; warnings go to
/// `err`; returns 0. On failure prints one line per diagnostic to `err`
/// ("file:line:col: error: key.path: message [expected: ...]") and returns 1. Never throws.
int runCheckCommand(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace dgps
