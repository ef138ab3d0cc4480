// Autotuning on the deployment GPU (issue 5), the runtime side: everything a host application or a tool
// needs to tune a generated package and to launch with the tuned configurations.
//
//   tune/TuneJob.h             tunePackage(): candidates, isolated screening, timing, database record
//   tune/TuningResolver.h      RuntimeOptions::forward_config hook; modes tune | recorded | default
//   tune/RuntimeTrialBackend.h the TrialBackend over the runtime (compile, screen, time)
//   tune/TrialProcess.h        the dgps-tune-trial child process that screens candidates
//   tune/ScratchForward.h      scratch inputs/outputs, validation slice, error measure
//   tune/TuneCli.h             --shape parsing, progress bar, the dgps-tune command
// The GPU-agnostic core (database, keys, candidate pruning, the search) is tuning/*.h.
//
// Environment: DGPS_TUNING_DB (database file), DGPS_CACHE_DIR (binary cache), DGPS_TUNE_MODE
// (tune | recorded | default, read by TuningResolver), DGPS_TUNE_TRIAL (path of dgps-tune-trial).
#pragma once

#include "dgps/runtime/tune/RuntimeTrialBackend.h"
#include "dgps/runtime/tune/ScratchForward.h"
#include "dgps/runtime/tune/TrialProcess.h"
#include "dgps/runtime/tune/TuneCli.h"
#include "dgps/runtime/tune/TuneJob.h"
#include "dgps/runtime/tune/TuningResolver.h"
