// Canonical form and content hash of a Spec.
//
// canonicalYaml(s) is the fully-defaulted spec as YAML text: fixed key order (the order of
// docs/spec.md), two-space indentation, flow lists sorted ascending, numbers in their shortest form
// that reads back to the same double (formatNumber), strings double-quoted with JSON escapes, and
// only the keys that apply (no gain.range with gain.kind none, no squash with hypergrad_ogd, ...:
// see hasPrecond & co. in Spec.h). It is deterministic across platforms and yaml-cpp versions
// because it is written by hand, not by yaml-cpp's emitter.
//
//   parseSpecString(canonicalYaml(s)).spec == s     for every parsed s (tests/dsl)
//
// specHash(s) is the 64-bit FNV-1a hash of canonicalYaml(s) without its `description` and
// `allow_unstable` lines (neither changes the computation), printed as 16 lower-case hex digits.
// FNV-1a is used because it is ten lines of code with no dependency: the GPU machine and deployment
// hosts have no hashing library, and the hash only has to tell specs apart in caches and package
// manifests (it is not a security boundary). Key order, comments, whitespace, list order and
// equivalent spellings (decay: scalar vs decay: {kind: scalar}, 1e-6 vs 0.000001) do not change it;
// any change of a field that reaches the kernels does.
#pragma once

#include <cstdint>
#include <string>

#include "dgps/dsl/Spec.h"

namespace dgps {

/// The canonical YAML text of `s` (ends with a newline).
std::string canonicalYaml(const Spec& s);

/// 64-bit FNV-1a of the hashed part of the canonical form.
uint64_t specHash64(const Spec& s);

/// specHash64 as 16 lower-case hex digits, e.g. "9a3f0c11d2e4b758".
std::string specHash(const Spec& s);

/// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of `bytes`.
uint64_t fnv1a64(const std::string& bytes);

/// Shortest decimal text that strtod reads back to exactly `x`: "1.5", "1e-6", "-0.2", "inf",
/// "-inf", "nan". -0 prints as "0".
std::string formatNumber(double x);

/// Semantic equality: the canonical forms are equal (source locations are ignored).
bool operator==(const Spec& a, const Spec& b);
inline bool operator!=(const Spec& a, const Spec& b) { return !(a == b); }

}  // namespace dgps
