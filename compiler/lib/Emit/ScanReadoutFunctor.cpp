// The channel scan's read-out functor (ScanReadoutFunctor.h).
#include "ScanReadoutFunctor.h"

#include <vector>

#include "dgps/Emit/Package.h"

namespace dgps {
namespace {

/// One member of the functor: its type, its name and the CUDA expression it is initialised from.
struct Member {
  std::string type, name, init;
};

/// The functor's parts for one read-out: a comment line, its members, the bodies of step and operator(), and
/// whether the scan defers the read-out past the batch's steps (channel_scan.cuh kDeferred).
struct Parts {
  std::string comment;
  std::vector<Member> members;
  std::string step, read;
  bool deferred = false;
};

Parts softPower(const ScanReadoutSpec& r) {
  Parts p;
  p.comment = "P = base^(−r/(1+|r|)), r = ln(s_i + eps) − center: a soft power of the state after row i's step";
  // the constants once per thread, outside the scan (dev::SoftPower folds them into two FMAs per row)
  p.members = {{"dgps::dev::SoftPower", "sp",
                "dgps::dev::SoftPower::of(-dgps::dev::lg2(" + cudaFloatLiteral(r.base.value_or(0.0)) + "), " +
                    cudaFloatLiteral(r.eps.value_or(0.0)) + ", " + (r.center.empty() ? "0.f" : r.center) + ")"}};
  p.step = "return s;";
  // the state of a scan of squares is >= 0; the clamp at 0 keeps ln finite should a coefficient be negative
  p.read = "return sp(dgps::dev::fmax_(next, 0.f));";
  // a log, a reciprocal and an exp2 per row: after the batch's steps, so the rows' read-outs overlap
  p.deferred = true;
  return p;
}

Parts clamped(const ScanReadoutSpec& r, bool post) {
  Parts p;
  std::string bounds = r.min && r.max ? "[min, max]" : r.min ? "[min, ∞)" : r.max ? "(−∞, max]" : "";
  p.comment = std::string("P = the state ") + (post ? "after" : "before") + " row i's step" +
              (bounds.empty() ? " (no projection)" : "; the state is projected onto " + bounds + " after each step");
  std::string s = "s";
  if (r.min) {
    p.members.push_back({"float", "min", cudaFloatLiteral(*r.min)});
    s = "dgps::dev::fmax_(" + s + ", min)";
  }
  if (r.max) {
    p.members.push_back({"float", "max", cudaFloatLiteral(*r.max)});
    s = "dgps::dev::fmin_(" + s + ", max)";
  }
  p.step = "return " + s + ";";
  p.read = post ? "return next;" : "return prev;";
  // a choice of state: read out in the step, so only the multiplier stays live (not both states)
  p.deferred = false;
  return p;
}

}  // namespace

void printScanReadout(std::ostream& os, const std::string& indent, const ScanReadoutSpec& r, const std::string& var) {
  const Parts p = r.kind == tile::ScanReadout::soft_power ? softPower(r)
                                                           : clamped(r, r.kind == tile::ScanReadout::clamped_post);
  os << indent << "// the scan's read-out (" << tile::stringifyScanReadout(r.kind).str() << "): " << p.comment
     << "\n";
  os << indent << "struct ScanReadout {\n";
  os << indent << "  enum : bool { kDeferred = " << (p.deferred ? "true" : "false") << " };\n";
  for (const Member& m : p.members) os << indent << "  " << m.type << " " << m.name << ";\n";
  os << indent << "  DGPS_DEV float step(float s) const { " << p.step << " }\n";
  // the argument the read-out does not use stays unnamed (no unused-parameter warning in either compiler)
  const bool usesPrev = p.read.find("prev") != std::string::npos;
  os << indent << "  DGPS_DEV float operator()(float" << (usesPrev ? " prev" : "") << ", float"
     << (usesPrev ? "" : " next") << ") const { " << p.read << " }\n";
  os << indent << "};\n";
  os << indent << "const ScanReadout " << var << "{";
  for (size_t i = 0; i < p.members.size(); ++i) os << (i ? ", " : "") << p.members[i].init;
  os << "};\n";
}

}  // namespace dgps
