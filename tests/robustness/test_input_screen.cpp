// dgps-opt's input screening (compiler/tools/dgps-opt/InputCheck.h), definition order: MLIR 19 keeps a use
// of a value not yet defined as a placeholder for an enclosing scope; when a later region fails to parse,
// tearing it down left that placeholder's use list pointing at freed operands (valgrind: an invalid write in
// Operation::dropAllReferences; in-process, after many inputs, "malloc(): unaligned tcache chunk"). The
// mutant that found it renamed a value in one chunk.kernel (so a later use of its old name became a forward
// use) and broke a type in the next. Such text is refused before MLIR sees it; IR in definition order, every
// lit input included, is not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "InputCheck.h"

namespace dgps::opt {
namespace {

bool screen(const std::string& text, std::string& error) {
  error.clear();
  return checkMlirInput(text, "input.mlir", 1 << 20, error);
}

// MLIR 19 makes a forward-referenced %v#N a placeholder with N + 1 results: a mutant's %2#2147483648 ran the
// parser out of memory ("LLVM ERROR: out of memory"). Result numbers past kMaxResultNumber are refused with their
// line; small ones, and '#' that follows no value name (an attribute alias), are not.
TEST(InputScreen, AHugeResultNumberIsRefusedWithItsLine) {
  const std::string text =
      "func.func @f() {\n"
      "  %2:3 = chunk.kernel \"chunk_local\" -> (!t, !t, !t) {\n"
      "  }\n"
      "  %w = chunk.wy_recompute %2#2147483648 : (!t) -> !t\n"
      "  return\n"
      "}\n";
  std::string error;
  EXPECT_FALSE(screen(text, error));
  EXPECT_NE(error.find("line 4: a use of result #2147483648 of a value; expected a result number of at most 1024"),
            std::string::npos)
      << error;
  std::string small = text;
  small.replace(small.find("2147483648"), 10, "2");
  EXPECT_TRUE(screen(small, error)) << error;
  EXPECT_TRUE(screen("#map = affine_map<(d0) -> (d0)>\n#a#99999999 = 1\n", error)) << error;
}

TEST(InputScreen, AForwardUseAcrossKernelsIsRefusedWithItsLine) {
  const std::string text =
      "func.func @f() {\n"
      "  %0 = chunk.kernel \"chunk_local\" -> !t {\n"
      "    %- = chunk.load \"q\" : !q\n"
      "    %3 = chunk.qk_attn query %1, write %- : (!q, !q) -> !a\n"
      "    chunk.yield %3 : !a\n"
      "  }\n"
      "  chunk.kernel \"state_output\" {\n"
      "    %1 = chunk.load \"q\" : !q\n"
      "  }\n"
      "  return\n"
      "}\n";
  std::string error;
  EXPECT_FALSE(screen(text, error));
  EXPECT_NE(error.find("line 4: %1 is used before it is defined"), std::string::npos) << error;
}

TEST(InputScreen, DefinitionsOfEveryFormAreAccepted) {
  const std::string text =
      "// %9 in a comment is not a use\n"
      "func.func @g(%arg0: i64, %arg1 : f32) -> i64 {\n"
      "  %a, %b:2 = \"x.op\"(%arg0) {s = \"%7 in a string\"} : (i64) -> (i64, i64, i64)\n"
      "  %c = \"x.use\"(%a, %b#1, %arg1) : (i64, i64, f32) -> i64\n"
      "  cf.br ^bb1(%c : i64)\n"
      "^bb1(%d: i64):\n"
      "  return %d : i64\n"
      "}\n";
  std::string error;
  EXPECT_TRUE(screen(text, error)) << error;
}

TEST(InputScreen, ABranchOperandIsAUse) {
  const std::string text =
      "func.func @h() {\n"
      "  cf.br ^bb1(%later : i64)\n"
      "^bb1(%later: i64):\n"
      "  return\n"
      "}\n";
  std::string error;
  EXPECT_FALSE(screen(text, error));
  EXPECT_NE(error.find("line 2: %later is used before it is defined"), std::string::npos) << error;
}

TEST(InputScreen, EveryLitInputPasses) {
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(DGPS_SOURCE_DIR) + "/tests/lit")) {
    if (e.path().extension() != ".mlir") continue;
    std::ifstream in(e.path());
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string error;
    EXPECT_TRUE(screen(ss.str(), error)) << e.path() << ": " << error;
    ++files;
  }
  EXPECT_GE(files, 20);
}

}  // namespace
}  // namespace dgps::opt
