// Where a spec sits in the DGPS taxonomy (docs/math.md §2) and which published model it is.
//
// classify(s) renders the four axes and, after two spaces, the matching model:
//   "D=scalar G=beta(0,1) P=diagonal-key/ema_sq_squash S=delta  ~ PGDN"
//   "D=scalar G=Delta(0,inf) P=none S=linear  ~ Mamba-2 (SSD)"
//   "D=diagonal G=beta(0,1) P=diagonal-query/ema_sq_squash S=delta  ~ KDA + diagonal ATQ (no released kernel)"
//   "D=none G=beta(0,3) P=none S=linear  ~ new point of the DGPS space"
// Axis notation: D = none|scalar|diagonal; G = 1 (no gain input), beta(lo,hi) for a bounded gain,
// Delta(lo,inf) for an unbounded one (Mamba-2's step); P = none or diagonal-<side>/<source>, with
// "+retention" for OSDN's APF; S = linear|delta. Matching uses the axes only (normalisation, dims,
// dtypes and tuning do not change the model's identity).
#pragma once

#include <optional>
#include <string>

#include "dgps/dsl/Spec.h"

namespace dgps {

/// The axis summary followed by "  ~ <model>" (see above). Never throws.
std::string classify(const Spec& s);

/// Just the axis summary, e.g. "D=scalar G=beta(0,1) P=none S=delta".
std::string axisSummary(const Spec& s);

/// The known model the axes match ("GDN", "PKDA", "OSDN (APF)", "DeltaNet, negative eigenvalues",
/// ...), or nullopt for a point of the space no published model occupies.
std::optional<std::string> knownModel(const Spec& s);

}  // namespace dgps
