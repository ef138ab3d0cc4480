// Private to dgps_dsl: what the YAML reader (SpecYaml.cpp) hands the validator (SpecValidate.cpp),
// and the value tables both use.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dgps/dsl/Diagnostic.h"
#include "dgps/dsl/Spec.h"

namespace dgps {
namespace detail {

/// Where a key path was written: the key itself and its value. Paths look like "precond.squash.x",
/// list elements like "dims.key[1]".
struct KeyLoc {
  SourceLoc key;
  SourceLoc value;
};
using LocMap = std::map<std::string, KeyLoc>;

/// Value and combination rules (docs/spec.md "Validation"). `locs` holds the positions of keys that
/// were written; rules about a key that was not written point at the nearest written ancestor, then at
/// the axis' own loc. Appends to `out`.
/// `unread` holds the paths the reader already reported (a wrong type, a missing key): rules about
/// them or anything below them are skipped, so one mistake gives one message ("" skips everything).
void validate(const Spec& spec, const LocMap& locs, const std::set<std::string>& unread,
              const std::string& file, std::vector<Diagnostic>& out);

/// Smallest edit distance (insert, delete, substitute, adjacent swap) between two strings.
int editDistance(const std::string& a, const std::string& b);

/// The candidate closest to `word` if it is close enough to be a plausible typo, else "".
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

/// `text` made safe for a one-line message: control characters escaped (\n, \t, \xNN) and anything
/// beyond `max` bytes replaced by "...".
std::string printable(const std::string& text, size_t max = 60);

/// "a, b, c" / "a|b|c".
std::string join(const std::vector<std::string>& items, const char* sep);

/// Allowed values (docs/spec.md "Limits").
constexpr size_t kMaxNameLength = 64;
constexpr int kMinHeadDim = 16;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxHeadsQk = 65535;
constexpr int kMaxGvaRatio = 64;
const std::vector<int>& allowedChunks();   // {16, 32, 64}: solve_tril block sizes (docs/math.md §7.6).
// chunk, warps, stages: launch_rules.h kChunkChoices, kWarpChoices, kStageChoices (what config.cuh accepts).
const std::vector<int>& allowedBlockV();   // {16, 32, 64, 128}
const std::vector<int>& allowedWarps();    // {2, 4, 8}
const std::vector<int>& allowedStages();   // {1, 2}

/// Sorting rank of input dtypes in canonical lists: bf16, f16, f32.
int dtypeRank(DType d);

}  // namespace detail
}  // namespace dgps
