// dgps-opt: runs any part of the DGPS pipeline on textual dgps / chunk IR (lit tests use it).
//   dgps-opt in.mlir --canonicalize --dgps-lower-to-chunk --chunk-fuse-preconditioner ...
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  dgps::registerDialects(registry);
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  dgps::registerDGPSPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "DGPS optimizer driver\n", registry));
}
