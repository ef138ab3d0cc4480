// Hand-written checks for untrusted text (manifests, compile logs, command-line values). No std::regex:
// libstdc++'s regex recurses once per character and overflows the stack on long inputs, and std::stoi
// and friends throw std::out_of_range ("stoi") on huge numbers. Everything here is linear, bounded
// and non-throwing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace dgps {
namespace text {

inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
inline bool isLower(char c) { return c >= 'a' && c <= 'z'; }
inline bool isAlpha(char c) { return isLower(c) || (c >= 'A' && c <= 'Z'); }
inline bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

/// A C identifier [A-Za-z_][A-Za-z0-9_]* of at most `max_len` characters.
inline bool isIdentifier(std::string_view s, std::size_t max_len) {
  if (s.empty() || s.size() > max_len || !(isAlpha(s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!(isAlpha(c) || isDigit(c) || c == '_')) return false;
  return true;
}

/// [a-z][a-z0-9_]* of at most `max_len` characters (package names).
inline bool isLowerIdentifier(std::string_view s, std::size_t max_len) {
  if (s.empty() || s.size() > max_len || !isLower(s[0])) return false;
  for (char c : s)
    if (!(isLower(c) || isDigit(c) || c == '_')) return false;
  return true;
}

/// Exactly `n` lowercase hex digits.
inline bool isLowerHex(std::string_view s, std::size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!(isDigit(c) || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// Parses an optionally signed decimal integer that is the whole of `s` (no spaces) into [lo, hi].
/// Returns false for anything else, including values that overflow 64 bits.
inline bool parseInt(std::string_view s, long long lo, long long hi, long long* out) {
  std::size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return false;
  // Accumulate as a negative number: its range holds LLONG_MIN as well as -LLONG_MAX.
  long long v = 0;
  constexpr long long kMin = std::numeric_limits<long long>::min();
  for (; i < s.size(); ++i) {
    if (!isDigit(s[i])) return false;
    const int d = s[i] - '0';
    if (v < kMin / 10 || v * 10 < kMin + d) return false;
    v = v * 10 - d;
  }
  if (!negative) {
    if (v == kMin) return false;
    v = -v;
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

/// Reads the run of decimal digits at `pos` (advancing it) as a non-negative value <= `hi`. Returns
/// false when there is no digit or the run exceeds `hi`; `pos` is then past the run either way.
inline bool readDigits(std::string_view s, std::size_t& pos, long long hi, long long* out) {
  const std::size_t start = pos;
  while (pos < s.size() && isDigit(s[pos])) ++pos;
  return pos > start && parseInt(s.substr(start, pos - start), 0, hi, out);
}

/// `s` cut to at most `max` bytes for an error message, with the full length when cut.
/// Control bytes are shown as '?' so a binary file cannot garble the terminal.
inline std::string shown(std::string_view s, std::size_t max = 80) {
  std::string out(s.substr(0, std::min(s.size(), max)));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (s.size() > max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace text
}  // namespace dgps
