#include "dgps/runtime/tune/TuneCli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "dgps/runtime/Error.h"

namespace dgps {
namespace tune {
namespace {

[[noreturn]] void bad(const std::string& m) { throw RuntimeError(RuntimeErrorCode::InvalidArgument, m); }

}  // namespace

ShapeArg parseShapeArg(const std::string& text) {
  try {
    return ::dgps::parseShapeOption(text);
  } catch (const DataError& e) {
    bad(e.what());
  }
}

ReferenceProblem resolveShapeArg(const ShapeArg& a, const Spec& spec) {
  try {
    return ::dgps::resolveShapeOption(a, spec);
  } catch (const DataError& e) {
    bad(e.what());
  }
}

ProgressPrinter::ProgressPrinter(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}

void ProgressPrinter::operator()(const tuning::TuneProgress& p) {
  if (p.phase == tuning::TunePhase::Done) {
    if (line_open_) out_ << "\n";
    line_open_ = false;
    out_.flush();
    return;
  }
  const int width = 24;
  const int filled = p.total > 0 ? p.done * width / p.total : width;
  char head[64];
  std::snprintf(head, sizeof head, "[%-7s] ", tuning::toString(p.phase));
  std::string bar(std::size_t(filled), '#');
  bar += std::string(std::size_t(width - filled), '-');
  char count[32];
  std::snprintf(count, sizeof count, " %3d/%-3d ", p.done, p.total);
  const std::string line = head + bar + count + toString(p.config) + "  " + tuning::toString(p.status);
  if (terminal_) {
    out_ << "\r" << line << "\033[K";
    line_open_ = true;
    if (p.done >= p.total) {
      out_ << "\n";
      line_open_ = false;
    }
  } else if (p.done >= p.total || p.status != tuning::TrialStatus::Ok) {
    out_ << line << "\n";  // one line per finished phase, plus every failure
  }
  out_.flush();
}

}  // namespace tune
}  // namespace dgps
