// dgps-tune-trial: runs ONE tuning candidate in a process of its own so that a kernel fault kills only
// this process, never the tuner's CUDA context. Started by the tuner; not for humans.
// Protocol and exit codes: dgps/runtime/tune/TrialProcess.h.
#include <iostream>

#include "dgps/runtime/tune/TrialProcess.h"

int main(int argc, char** argv) {
  try {
    return dgps::tune::runTrialHelper(argc, argv);
  } catch (...) {
    std::cerr << "dgps-tune-trial: internal error\n";
  }
  return dgps::tune::kTrialExitError;
}
