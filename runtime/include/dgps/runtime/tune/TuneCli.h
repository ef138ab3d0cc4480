// The command-line side of tuning, shared by `dgps-tune` (runtime/tools/dgps-tune/TuneCommand.h; `dgpsc
// tune` compiles a spec and then runs dgps-tune) and host applications: the --shape syntax and the
// progress bar.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "dgps/dsl/Reference.h"
#include "dgps/dsl/ShapeArg.h"
#include "dgps/dsl/Spec.h"
#include "dgps/runtime/tuning/Autotuner.h"

namespace dgps {
namespace tune {

/// The --shape value (dsl/include/dgps/dsl/ShapeArg.h, shared with `dgps-spec inputs`).
using ShapeArg = ::dgps::ShapeArg;

/// dgps::parseShapeOption, with its DataError rethrown as RuntimeError{InvalidArgument} (same message).
ShapeArg parseShapeArg(const std::string& text);

/// dgps::resolveShapeOption, with its DataError rethrown as RuntimeError{InvalidArgument} (same message).
ReferenceProblem resolveShapeArg(const ShapeArg& arg, const Spec& spec);

/// Progress on a stream (stderr): on a terminal one redrawn line per phase
/// "[compile ] ######------  5/12  chunk=64 block_v=32 warps=8 stages=1  ok", otherwise one line per
/// finished phase (logs stay readable).
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool terminal);
  void operator()(const tuning::TuneProgress& p);

 private:
  std::ostream& out_;
  bool terminal_;
  bool line_open_ = false;
};

}  // namespace tune
}  // namespace dgps
