// dgps-opt's screening of its input text before MLIR parses it: what MLIR itself handles without
// bound is refused with one message.
//   * file locations ("file":line:col): MLIR's diagnostic printer opens the named file to quote a line,
//     with an unbounded read (loc("/dev/zero":1:1) exhausts memory, a FIFO blocks forever); each named
//     file that exists must be a regular file of at most `maxBytes` (checked with stat, never read);
//   * integer literals: parsed in time quadratic in their length; more than kMaxDigitRun digits in a row
//     (outside strings and comments) are refused;
//   * nesting: attributes and types are parsed by recursion; brackets ([ { ( <) nested more than
//     kMaxNesting deep are refused;
//   * result numbers: a use %v#N with N > kMaxResultNumber (a placeholder of N + 1 results) is refused;
//   * definition order: a value used before any definition of its name above it is refused (MLIR 19 keeps
//     such a use as a placeholder, and tearing down a later failed region leaves it pointing at freed
//     operands; DGPS IR never needs a forward use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dgps::opt {

inline constexpr std::size_t kMaxDigitRun = 256;
inline constexpr std::size_t kMaxNesting = 128;
/// The largest result number a value use may name (%v#N): MLIR 19 makes a forward-referenced %v#N a placeholder
/// with N + 1 results, so %v#2147483648 allocates until memory runs out. No DGPS op has more than a few results.
inline constexpr std::uint64_t kMaxResultNumber = 1024;

/// True when `text` may be handed to MLIR; otherwise false with `error` saying what was found where.
/// `bufferName` is the name the text is parsed under (locations naming it are the input itself).
bool checkMlirInput(const std::string& text, const std::string& bufferName, std::uint64_t maxBytes,
                    std::string& error);

}  // namespace dgps::opt
