// The GPU suite's main: without a usable GPU it prints why and exits 77, which ctest reports as
// "Skipped" (SKIP_RETURN_CODE); with one, it runs the gtest cases.
#include <gtest/gtest.h>

#include <iostream>

#include "dgps/runtime/CudaDriver.h"

int main(int argc, char** argv) {
  std::string why;
  if (!dgps::cudaAvailable(&why)) {
    std::cout << "dgps GPU suite skipped: " << why << std::endl;
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
