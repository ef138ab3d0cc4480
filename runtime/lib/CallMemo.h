// The warm-call memo: what a Runtime::forward / decode call works out from the tensors' metadata (the
// validated problem, the tile configuration, the segment choice, the launch geometry and the loaded variant),
// kept per thread for the last few (Runtime, Package instance) pairs, so a call shaped like an earlier one
// skips validateForward / validateDecode, the launch formulas, Package::checkConfig and the variant-table
// lookup. docs/performance.md ("Host time per call") has the numbers.
//
// Why it is exact. Validation reads, of each tensor view: given(), whether data is null, the dtype, the shape,
// the contiguity of the strides, the device ordinal, and of the pointer values only two things: each
// pointer's alignment and whether o aliases q, k or v (the forward). A CallSignature records the metadata of
// every view of a call that validated; a later call whose views equal it field by field would get the same
// answer from validation, except for the pointer rules, which are checked on every call (pointerRulesHold
// in Validation.h; on failure the call takes the full path and gets validation's own message). Everything
// else a hit reuses depends only on the problem and the options compared here (LaunchOptions::config,
// LaunchOptions::segment_chunks), on the package instance (immutable), or on values fixed for the process
// (device multiprocessor count, the DGPS_SEGMENT_CHUNKS read at Runtime construction). A ForwardConfigResolver
// is asked on every call; only when it answers the memo's configuration is the rest reused. Only calls that
// passed every check and resolved their variant are stored, so a hit never skips an error.
//
// Not memoised: the pointer checks against the driver (cuPointerGetAttribute: the memory behind an address
// may have been freed and reallocated on another device since the last call), the stream check, the capture
// query, the cu_seqlens value check and the workspace size check; they run on every call.
//
// Threading: the memo is thread_local, so a hit takes no lock. Each Runtime has a process-unique id (never an
// address, which a later Runtime could reuse), so an entry of a destroyed Runtime can never match.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "LaunchPlan.h"
#include "dgps/runtime/TensorView.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace detail {

/// What validation reads of one view besides its pointer value. Ranks above kMaxRank are never stored
/// (no call with one validates).
struct ViewSignature {
  static constexpr std::size_t kMaxRank = 5;
  bool null_data = true;  ///< with rank, this decides TensorView::given()
  bool contiguous = true;  ///< TensorView::isContiguous()
  std::uint8_t rank = 0;
  ScalarType dtype = ScalarType::F32;
  int device = 0;
  std::array<std::int64_t, kMaxRank> dims{};

  /// Records `v`; false (and nothing usable) when its rank is above kMaxRank.
  bool capture(const TensorView& v);
  /// True when `v` has exactly the recorded metadata (its pointer value may differ).
  bool matches(const TensorView& v) const;
};

/// The signatures of the N views of one call, in a fixed order (forwardViews / decodeViews).
template <std::size_t N>
struct CallSignature {
  std::array<ViewSignature, N> views{};

  bool capture(const std::array<const TensorView*, N>& v) {
    for (std::size_t i = 0; i < N; ++i)
      if (!views[i].capture(*v[i])) return false;
    return true;
  }
  bool matches(const std::array<const TensorView*, N>& v) const {
    for (std::size_t i = 0; i < N; ++i)
      if (!views[i].matches(*v[i])) return false;
    return true;
  }
};

constexpr std::size_t kForwardViews = 15;
constexpr std::size_t kDecodeViews = 11;
/// Every view of a forward / decode call, in a fixed order.
std::array<const TensorView*, kForwardViews> forwardViews(const ForwardTensors& t);
std::array<const TensorView*, kDecodeViews> decodeViews(const DecodeTensors& t);

/// What a forward call works out before its pointer checks and launches.
struct ForwardCall {
  ForwardProblem problem;
  TileConfig config;         ///< the configuration the call runs
  std::int64_t segment = 0;  ///< chunks per segment (0: the plain state pass)
  ForwardGeometry plan;
};

/// What a decode call works out before its pointer checks and launch.
struct DecodeCall {
  DecodeProblem problem;
  TileConfig config;
  LaunchGeometry geometry;
};

/// One remembered forward call of a Runtime (`Module` is the runtime's loaded variant).
template <typename Module>
struct ForwardMemoEntry {
  std::uint64_t runtime_id = 0;  ///< 0: empty
  std::uint64_t package_id = 0;  ///< Package::instanceId()
  CallSignature<kForwardViews> signature;
  std::optional<TileConfig> given_config;     ///< LaunchOptions::config of the call
  std::optional<std::int64_t> given_segment;  ///< LaunchOptions::segment_chunks of the call
  ForwardCall call;
  std::shared_ptr<const Module> module;
};

/// One remembered decode call of a Runtime.
template <typename Module>
struct DecodeMemoEntry {
  std::uint64_t runtime_id = 0;  ///< 0: empty
  std::uint64_t package_id = 0;
  CallSignature<kDecodeViews> signature;
  std::optional<TileConfig> given_config;
  DecodeCall call;
  std::shared_ptr<const Module> module;
};

/// A few entries per thread, replaced round-robin (a thread that alternates between several packages or
/// shapes, e.g. the layers of a hybrid model, keeps each warm).
template <typename Entry, std::size_t Slots = 4>
class CallMemo {
 public:
  /// The entry of (runtime, package) whose other fields the caller compares, or null.
  template <typename Match>
  const Entry* find(std::uint64_t runtime_id, std::uint64_t package_id, Match&& match) const {
    for (const Entry& e : entries_)
      if (e.runtime_id == runtime_id && e.package_id == package_id && match(e)) return &e;
    return nullptr;
  }
  /// The entry to overwrite with a new call.
  Entry& next() {
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % Slots;
    return e;
  }

 private:
  std::array<Entry, Slots> entries_{};
  std::size_t next_ = 0;
};

/// A process-unique, non-zero id for a Runtime.
std::uint64_t newRuntimeId();

}  // namespace detail
}  // namespace dgps
