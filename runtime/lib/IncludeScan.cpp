#include "IncludeScan.h"

#include <vector>

#include "TextParse.h"

namespace dgps {
namespace detail {
namespace {

struct LogicalLine {
  std::string text;
  int first_line = 1;  // physical line it starts on
};

// Translation phase 2: a backslash followed (after optional blanks, as GCC allows) by a newline joins
// two physical lines.
std::vector<LogicalLine> logicalLines(std::string_view s) {
  std::vector<LogicalLine> out;
  LogicalLine cur;
  int line = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      std::size_t j = i + 1;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j < s.size() && s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n') ++j;
      if (j < s.size() && s[j] == '\n') {
        ++line;
        i = j;
        continue;
      }
    }
    if (c == '\n') {
      out.push_back(std::move(cur));
      cur = LogicalLine{};
      cur.first_line = ++line;
      continue;
    }
    cur.text.push_back(c);
  }
  out.push_back(std::move(cur));
  return out;
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r'; }

// Skips blanks and complete /* */ comments; stops at anything else (an unclosed comment runs to the end).
void skipBlanks(const std::string& t, std::size_t& i) {
  for (;;) {
    while (i < t.size() && blank(t[i])) ++i;
    if (t.compare(i, 2, "/*") != 0) return;
    const std::size_t end = t.find("*/", i + 2);
    i = end == std::string::npos ? t.size() : end + 2;
  }
}

// At `i` (after blanks): a directive introducer? Advances past it.
bool directiveStart(const std::string& t, std::size_t& i) {
  if (i < t.size() && t[i] == '#') {
    i += 1;
    return true;
  }
  if (t.compare(i, 2, "%:") == 0) {
    i += 2;
    return true;
  }
  if (t.compare(i, 3, "?\?=") == 0) {
    i += 3;
    return true;
  }
  return false;
}

bool isIncludeName(const std::string& n) {
  return n == "include" || n == "include_next" || n == "import" || n == "embed";
}

// Checks the directive starting at `i` of `t`; fills `v` and returns true on a violation.
bool checkDirective(const std::string& t, std::size_t i, const std::function<bool(const std::string&)>& allowed,
                    IncludeViolation& v) {
  skipBlanks(t, i);
  if (!directiveStart(t, i)) return false;
  skipBlanks(t, i);
  std::size_t end = i;
  while (end < t.size() && (text::isAlpha(t[end]) || text::isDigit(t[end]) || t[end] == '_')) ++end;
  const std::string name = t.substr(i, end - i);
  if (!isIncludeName(name)) return false;
  i = end;
  skipBlanks(t, i);
  char close = 0;
  if (i < t.size() && t[i] == '"') close = '"';
  if (i < t.size() && t[i] == '<') close = '>';
  const std::size_t stop = close ? t.find(close, i + 1) : std::string::npos;
  if (stop == std::string::npos) {
    v.why = "#" + name + " without a plain \"header\" or <header> name (a computed include cannot be checked)";
    return true;
  }
  const std::string target = t.substr(i + 1, stop - i - 1);
  if (name != "include") {
    v.why = "#" + name + " is not allowed";
    return true;
  }
  if (!allowed(target)) {
    v.why = "includes " + std::string(1, t[i]) + text::shown(target) + std::string(1, close) +
            ", which is not a header of the device library";
    return true;
  }
  return false;
}

}  // namespace

std::optional<IncludeViolation> findDisallowedInclude(std::string_view source,
                                                      const std::function<bool(const std::string&)>& allowed) {
  for (const LogicalLine& l : logicalLines(source)) {
    const std::string& t = l.text;
    IncludeViolation v;
    v.line = l.first_line;
    v.directive = text::shown(t, 120);
    // Where a directive could start: the line's start, and after every "*/" (a comment that began on an
    // earlier line ends here, and the rest of this line may be a directive).
    std::vector<std::size_t> starts = {0};
    for (std::size_t at = t.find("*/"); at != std::string::npos; at = t.find("*/", at + 2)) starts.push_back(at + 2);
    for (std::size_t s : starts) {
      if (checkDirective(t, s, allowed, v)) return v;
    }
    if (t.find("__has_include") != std::string::npos) {
      v.why = "__has_include is not allowed (it tests for files outside the device library)";
      return v;
    }
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace dgps
