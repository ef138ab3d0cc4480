// The text form of a tile configuration (dgps/runtime/TileConfig.h). Lives in dgps_tuning, the lowest
// runtime library (no CUDA), so the tuner, the tuning DB and the runtime print and read one form.
#include "dgps/runtime/TileConfig.h"

#include <sstream>
#include <tuple>

#include "../TextParse.h"
#include "dgps/runtime/Error.h"

namespace dgps::launch {

std::string toString(const TileConfig& c) {
  std::string s = "chunk=" + std::to_string(c.chunk) + ",block_v=" + std::to_string(c.block_v) +
                  ",warps=" + std::to_string(c.warps) + ",stages=" + std::to_string(c.stages);
  // only a chosen segment length is printed, so configurations without one keep their old text
  if (c.segment_chunks >= 0) s += ",segment_chunks=" + std::to_string(c.segment_chunks);
  return s;
}

TileConfig parseTileConfig(const std::string& text, const TileConfig& base) {
  TileConfig c = base;
  const std::string expected = "expected key=value items separated by commas, key one of chunk, block_v, warps, "
                               "stages (an integer in [1, 1024]) or segment_chunks (an integer in [0, 2^30])";
  if (text.size() > 1024) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "tile config \"" + text::shown(text) + "\": too long (" + expected + ")");
  }
  std::istringstream in(text);
  std::string item;
  auto trim = [](std::string s) {
    while (!s.empty() && text::isSpace(s.back())) s.pop_back();
    std::size_t b = 0;
    while (b < s.size() && text::isSpace(s[b])) ++b;
    return s.substr(b);
  };
  while (std::getline(in, item, ',')) {
    if (trim(item).empty()) continue;
    const auto eq = item.find('=');
    const std::string k = eq == std::string::npos ? "" : trim(item.substr(0, eq));
    long long v = 0;
    const bool segment = k == "segment_chunks";
    if (eq == std::string::npos ||
        !text::parseInt(trim(item.substr(eq + 1)), segment ? 0 : 1, segment ? (1LL << 30) : 1024, &v)) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         "tile config \"" + text::shown(text) + "\": cannot read \"" + text::shown(item) + "\" (" +
                             expected + ")");
    }
    if (k == "chunk") c.chunk = int(v);
    else if (k == "block_v") c.block_v = int(v);
    else if (k == "warps") c.warps = int(v);
    else if (k == "stages") c.stages = int(v);
    else if (segment) c.segment_chunks = int(v);
    else {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument, "tile config \"" + text::shown(text) + "\": unknown key \"" +
                                                                text::shown(k) +
                                                                "\" (expected chunk, block_v, warps, stages or segment_chunks)");
    }
  }
  return c;
}

namespace {
/// The segment length's place in the simplicity order: the plain pass (0, or -1: the rule's) first, then
/// longer segments (fewer of them, less fold and summary work) before shorter ones.
long long segmentOrder(int L) { return L <= 0 ? 0 : (1LL << 31) - L; }
}  // namespace

bool simplerThan(const TileConfig& a, const TileConfig& b) {
  const long long sa = segmentOrder(a.segment_chunks), sb = segmentOrder(b.segment_chunks);
  return std::tie(a.stages, a.warps, a.block_v, a.chunk, sa) < std::tie(b.stages, b.warps, b.block_v, b.chunk, sb);
}

}  // namespace dgps::launch
