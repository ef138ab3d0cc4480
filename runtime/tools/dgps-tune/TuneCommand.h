// The dgps-tune command, as a function so that tests can run it in-process:
//
//   dgps-tune PACKAGE --shape B=8,T=4096,H=16,K=128,V=128 [--dtype bf16|f16] [--db PATH] [--device N]
//             [--cache-dir DIR] [--force] [--in-process] [--warmup N] [--reps N] [--seed S]
//             [--compile-timeout SEC] [--trial-timeout SEC] [--quiet]
//
// Progress bar on stderr; on stdout a header (device identity), the final table (candidate, status,
// median / p20 / p80 ms, error, registers, local memory, note) and "recorded winner ... in DB PATH".
// Exit status: 0 a winner was recorded (or an exact record reused); 1 tuning failed (no GPU, every
// candidate failed, database unwritable); 2 bad command line or arguments that do not fit the package
// (one message naming the argument, what came and what was expected). Nothing escapes.
// Kept out of the dgps_tune library so that the installed library does not depend on CLI11.
#pragma once

#include <iosfwd>

namespace dgps {
namespace tune {

int runTuneCommand(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace tune
}  // namespace dgps
