// dgps-opt: runs any part of the DGPS pipeline on textual dgps / chunk IR (lit tests use it).
//   dgps-opt in.mlir --canonicalize --dgps-lower-to-chunk --chunk-fuse-preconditioner ...
//
// The same driver as mlir-opt, except that the input is read here, bounded: MLIR's own opener reads a
// FIFO or /dev/zero until it blocks forever or memory runs out. A file goes through readRegularFile
// (regular files only, at most kMaxInputBytes); standard input ("-") is read up to the same limit; and
// files named by locations are checked before MLIR's diagnostic printer opens them (checkLocationFiles).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "dgps/Transforms/Passes.h"
#include "dgps/dsl/FileRead.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace {

/// The largest MLIR text dgps-opt reads: the pipeline's IR is a few kilobytes.
constexpr std::uint64_t kMaxInputBytes = 64ull << 20;

/// Reads standard input up to the limit; false (with `error`) when it is longer or unreadable.
bool readStdin(std::string& data, std::string& error) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = "cannot read standard input";
      return false;
    }
    if (n == 0) return true;
    if (data.size() + static_cast<std::uint64_t>(n) > kMaxInputBytes) {
      error = "standard input is longer than the limit for MLIR input, " + std::to_string(kMaxInputBytes) + " bytes";
      return false;
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
}

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
bool checkLocationFiles(const std::string& text, const std::string& inputName, std::string& error) {
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
    if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > kMaxInputBytes) {
      error = "a location names the file '" + name + "', which is " +
              (S_ISREG(st.st_mode) ? "larger than " + std::to_string(kMaxInputBytes) + " bytes"
                                   : std::string("not a regular file")) +
              "; expected locations in regular files (or in files that do not exist)";
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  dgps::registerDialects(registry);
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  dgps::registerDGPSPasses();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(argc, argv, "DGPS optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  // --show-dialects reads no input: MLIR's driver prints them.
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));

  std::string text, error;
  if (inputFile == "-") {
    if (!readStdin(text, error)) {
      llvm::errs() << "dgps-opt: error: " << error << "\n";
      return 1;
    }
  } else {
    dgps::FileReadResult file = dgps::readRegularFile(inputFile, kMaxInputBytes, "MLIR input");
    if (!file.ok) {
      llvm::errs() << "dgps-opt: error: " << inputFile << ": " << file.error << "\n";
      return 1;
    }
    text = std::move(file.data);
  }
  const std::string bufferName = inputFile == "-" ? "<stdin>" : inputFile;
  if (!checkLocationFiles(text, bufferName, error)) {
    llvm::errs() << "dgps-opt: error: " << bufferName << ": " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "dgps-opt: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(text, bufferName);
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(buffer), registry, config))) return 1;
  output->keep();
  return 0;
}
