// The YAML subset a package's manifest.yaml and spec.yaml are written in (dgpsc writes both): one
// document, no tags (`!!str 1e-6`), no anchors or aliases. Checked on the event stream before the
// files are loaded into nodes, so a value's meaning never depends on YAML features the runtime does
// not read, and a second document is refused instead of silently ignored.
#pragma once

#include <string>

namespace dgps {
namespace detail {

/// Throws RuntimeError{Package} "<file>:<line>:<col>: error: <what is wrong> (expected <what>)" for the first
/// violation, or for malformed YAML. `what` names the file's role in messages ("a package manifest").
void checkPlainYaml(const std::string& text, const std::string& file, const std::string& what);

}  // namespace detail
}  // namespace dgps
