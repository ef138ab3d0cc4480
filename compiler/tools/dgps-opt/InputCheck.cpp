// Screening of dgps-opt's input (InputCheck.h).
#include "InputCheck.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <vector>

namespace dgps::opt {
namespace {

/// Decodes the MLIR string literal starting at text[i] == '"' (escapes \\, \", \n, \t and \HH);
/// returns the index after the closing quote, or npos when it is not closed.
std::size_t readStringLiteral(const std::string& text, std::size_t i, std::string& out) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.clear();
  for (++i; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') return i + 1;
    if (c == '\n') return std::string::npos;
    if (c != '\\' || i + 1 >= text.size()) {
      out += c;
      continue;
    }
    const char e = text[++i];
    if (e == 'n') out += '\n';
    else if (e == 't') out += '\t';
    else if (i + 1 < text.size() && hex(e) >= 0 && hex(text[i + 1]) >= 0) out += static_cast<char>(hex(e) * 16 + hex(text[++i]));
    else out += e;
  }
  return std::string::npos;
}

/// MLIR's diagnostic printer opens the file a location names ("file":line:col) to quote its line, with
/// an unbounded read: loc("/dev/zero":1:1) on an invalid op exhausts memory, a FIFO blocks forever.
/// Every string literal followed by ':' and a digit is such a file name; each one that exists must be a
/// regular file within the input limit (checked without reading it). False when one is not.
bool checkLocationFiles(const std::string& text, const std::string& inputName, std::uint64_t maxBytes, std::string& error) {
  std::string name;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] != '"') {
      ++i;
      continue;
    }
    const std::size_t end = readStringLiteral(text, i, name);
    if (end == std::string::npos) return true;  // the parser reports the unterminated string
    i = end;
    std::size_t j = end;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j >= text.size() || text[j] != ':') continue;
    ++j;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j >= text.size() || text[j] < '0' || text[j] > '9' || name == inputName) continue;
    struct stat st {};
    if (name.empty() || ::stat(name.c_str(), &st) != 0) continue;  // nothing to open: MLIR prints no quote
    if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > maxBytes) {
      error = "a location names the file '" + name + "', which is " +
              (S_ISREG(st.st_mode) ? "larger than " + std::to_string(maxBytes) + " bytes"
                                   : std::string("not a regular file")) +
              "; expected locations in regular files (or in files that do not exist)";
      return false;
    }
  }
  return true;
}

/// Whether the '#' at text[hash] follows a value name (%name#N: a use of result N), not e.g. an attribute alias.
bool followsValueName(const std::string& text, std::size_t hash) {
  std::size_t k = hash;
  while (k > 0 && ((text[k - 1] >= 'a' && text[k - 1] <= 'z') || (text[k - 1] >= 'A' && text[k - 1] <= 'Z') ||
                   (text[k - 1] >= '0' && text[k - 1] <= '9') || text[k - 1] == '_' || text[k - 1] == '$' ||
                   text[k - 1] == '.' || text[k - 1] == '-'))
    --k;
  return k > 0 && k < hash && text[k - 1] == '%';
}

/// MLIR parses an integer literal into an APInt in time quadratic in its digits (20,000 digits take
/// half a minute), and nested attributes and types by recursion (a few thousand '[' overflow the
/// stack). No IR of the pipeline needs more than a few dozen digits or levels, so longer digit runs and
/// deeper nesting (outside strings and comments) are refused up front.
bool checkTokens(const std::string& text, std::string& error) {
  std::string ignored;
  std::size_t line = 1, depth = 0;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == '"') {
      const std::size_t end = readStringLiteral(text, i, ignored);
      if (end == std::string::npos) return true;  // the parser reports the unterminated string
      for (std::size_t j = i; j < end; ++j) line += text[j] == '\n';
      i = end;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '[' || c == '{' || c == '(' || c == '<') {
      if (++depth > kMaxNesting) {
        error = "line " + std::to_string(line) + ": brackets nested more than " + std::to_string(kMaxNesting) +
                " deep; expected at most " + std::to_string(kMaxNesting) + " levels";
        return false;
      }
    } else if ((c == ']' || c == '}' || c == ')' || (c == '>' && (i == 0 || text[i - 1] != '-'))) && depth > 0) {
      --depth;
    }
    if (c >= '0' && c <= '9') {
      std::size_t j = i;
      while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
      if (j - i > kMaxDigitRun) {
        error = "line " + std::to_string(line) + ": a number of " + std::to_string(j - i) + " digits; expected at most " +
                std::to_string(kMaxDigitRun) + " digits in a row";
        return false;
      }
      if (i > 0 && text[i - 1] == '#' && followsValueName(text, i - 1) &&
          (j - i > 19 || std::stoull(text.substr(i, j - i)) > kMaxResultNumber)) {
        error = "line " + std::to_string(line) + ": a use of result #" + text.substr(i, std::min<std::size_t>(j - i, 24)) +
                " of a value; expected a result number of at most " + std::to_string(kMaxResultNumber);
        return false;
      }
      i = j;
      continue;
    }
    ++i;
  }
  return true;
}


bool isSuffixIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '.' || c == '-';
}

/// MLIR 19's parser keeps a use of a value not yet defined as a placeholder that an enclosing scope may
/// resolve later; when a later region then fails to parse, destroying it leaves the placeholder's use list
/// pointing at freed operands (a use after free while the failed parse is torn down: a mutated name in one
/// chunk.kernel, a type error in the next). DGPS IR is written in definition order, so a value used before its
/// name is defined anywhere earlier in the text is refused before MLIR sees it. Definitions: a name followed by
/// '=' (results, also in a list "%a, %b:2 = ..."), and a name followed by ':' inside the argument list that
/// follows a symbol or a block label opening its line (function and block arguments). Names are not scoped per
/// function, so the check can only miss a forward use, never refuse IR in definition order.
bool checkDefinitionOrder(const std::string& text, std::string& error) {
  std::string ignored;
  std::set<std::string> defined;
  std::size_t line = 1;
  int parenDepth = 0;
  std::vector<int> argOpen;  // parenDepth at which an argument list opened
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == '"') {
      const std::size_t end = readStringLiteral(text, i, ignored);
      if (end == std::string::npos) return true;  // the parser reports the unterminated string
      for (std::size_t j = i; j < end; ++j) line += text[j] == '\n';
      i = end;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    // an argument list follows a symbol ("func.func @f(") or a block label that opens its line ("^bb1(");
    // a branch's "^bb1(%x : t)" passes operands, which are uses
    auto opensLine = [&] {
      std::size_t b = i;
      while (b > 0 && (text[b - 1] == ' ' || text[b - 1] == '\t')) --b;
      return b == 0 || text[b - 1] == '\n';
    };
    if ((c == '@' || (c == '^' && opensLine())) && i + 1 < text.size()) {
      std::size_t j = i + 1;
      while (j < text.size() && isSuffixIdChar(text[j])) ++j;
      if (j < text.size() && text[j] == '(' && j > i + 1) {
        ++parenDepth;
        argOpen.push_back(parenDepth);
        i = j + 1;
        continue;
      }
      i = j;
      continue;
    }
    if (c == '(') ++parenDepth;
    if (c == ')') {
      if (!argOpen.empty() && argOpen.back() == parenDepth) argOpen.pop_back();
      if (parenDepth > 0) --parenDepth;
    }
    if (c != '%') {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < text.size() && isSuffixIdChar(text[j])) ++j;
    const std::string name = text.substr(i + 1, j - i - 1);
    if (name.empty()) {
      i = j + (j == i + 1);
      continue;
    }
    // what follows the name: an optional result count ":N", then ',' (a result list goes on) or '='
    std::size_t k = j;
    auto skipSpace = [&] {
      while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) ++k;
    };
    skipSpace();
    bool definition = false;
    if (!argOpen.empty() && k < text.size() && text[k] == ':') {
      definition = true;  // a function or block argument
    } else {
      // a result list: %a, %b:2, %c = ...
      std::size_t m = k;
      for (;;) {
        if (m < text.size() && text[m] == ':') {
          ++m;
          while (m < text.size() && text[m] >= '0' && text[m] <= '9') ++m;
          while (m < text.size() && (text[m] == ' ' || text[m] == '\t')) ++m;
        }
        if (m < text.size() && text[m] == '=' && (m + 1 >= text.size() || text[m + 1] != '=')) {
          definition = true;
          break;
        }
        if (m >= text.size() || text[m] != ',') break;
        ++m;
        while (m < text.size() && (text[m] == ' ' || text[m] == '\t')) ++m;
        if (m >= text.size() || text[m] != '%') break;
        ++m;
        while (m < text.size() && isSuffixIdChar(text[m])) ++m;
        while (m < text.size() && (text[m] == ' ' || text[m] == '\t')) ++m;
      }
    }
    // "%0#1" uses result 1 of %0
    if (definition) {
      defined.insert(name);
    } else if (!defined.count(name)) {
      error = "line " + std::to_string(line) + ": %" + name +
              " is used before it is defined; expected IR in definition order (every value defined above its "
              "first use)";
      return false;
    }
    i = j;
  }
  return true;
}

}  // namespace

bool checkMlirInput(const std::string& text, const std::string& bufferName, std::uint64_t maxBytes, std::string& error) {
  return checkTokens(text, error) && checkLocationFiles(text, bufferName, maxBytes, error) &&
         checkDefinitionOrder(text, error);
}

}  // namespace dgps::opt
