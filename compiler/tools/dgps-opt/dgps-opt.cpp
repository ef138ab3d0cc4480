// dgps-opt: runs any part of the DGPS pipeline on textual dgps / chunk IR (lit tests use it).
//   dgps-opt in.mlir --canonicalize --dgps-lower-to-chunk --chunk-fuse-preconditioner ...
//
// The same driver as mlir-opt, except that the input is read here, bounded: MLIR's own opener reads a
// FIFO or /dev/zero until it blocks forever or memory runs out. A file goes through readRegularFile
// (regular files only, at most kMaxInputBytes); standard input ("-") is read up to the same limit; and
// the text is screened for what MLIR handles without bound (InputCheck.h).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "InputCheck.h"
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
  if (!dgps::opt::checkMlirInput(text, bufferName, kMaxInputBytes, error)) {
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
