// dgps-tune PACKAGE --shape B=8,T=4096,H=16,K=128,V=128 [--dtype bf16] [--db PATH] ...
// Autotunes a generated package on this GPU and records the winner (see TuneCommand.h).
#include <iostream>

#include "TuneCommand.h"

int main(int argc, char** argv) {
  try {
    return dgps::tune::runTuneCommand(argc, argv, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "dgps-tune: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "dgps-tune: internal error\n";
  }
  return 1;
}
