// The resolved-variant table: what makes a warm Runtime::forward / decode call cheap.
//
// Resolving a kernel variant the long way builds the NVRTC request (a copy of the package's source and the
// -D list), hashes it with SHA-256 into the binary-cache key (tens of kilobytes per call) and looks the
// loaded module up by that key. The result depends only on the fields of VariantKey, so the runtime does
// it once per key and keeps the answer here; a warm call is then one hash of a few integers and a lookup
// under a shared (reader) lock: no SHA-256, no string building, no file system, no allocation.
//
// Invalidation. A key holds everything the variant depends on:
//   - the package, by Package::instanceId(): every Package::open gets a new id, so a package re-opened
//     after its folder changed (another source, manifest or spec) can never hit an entry of the old one;
//     copies of one opened Package share the id, which is right because a Package is immutable;
//   - the CUDA context and device ordinal (a module is loaded into one context);
//   - K, V, the input dtype and the tile configuration (the -D macros of the compile).
// The JIT target (sm_90a) and the NVRTC/header versions are fixed per device and process, so they are not
// key fields. Entries are never stale: nothing a key names can change while the process runs. (The developer
// hook DGPS_NVRTC_OPTIONS is read when a variant is first built; changing it inside a running process does
// not rebuild variants already resolved.)
//
// Threading contract. getOrBuild may be called from any number of threads. A hit takes the reader lock
// only. On a miss, exactly one caller per key runs `build` (others asking for the same key wait for it,
// callers of other keys proceed, and `build` runs without the table lock, so a seconds-long NVRTC compile
// blocks nobody else). If `build` throws, nothing is stored, the exception reaches that caller, and the
// next call for the key builds again. Values are handed out as shared_ptr<const Value>: they stay valid
// after eviction.
//
// Size bound: at most `capacity` keys. Inserting a key into a full table first drops every entry (a
// program that opens packages in a loop must not grow without bound); dropped keys are simply resolved
// again on their next call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "dgps/dsl/Tensor.h"
#include "dgps/runtime/TileConfig.h"

namespace dgps {
namespace detail {

/// Everything that selects one compiled-and-loaded kernel variant (see "Invalidation" above).
struct VariantKey {
  std::uint64_t package_id = 0;   ///< Package::instanceId()
  const void* context = nullptr;  ///< the CUcontext the module is loaded into
  int device = -1;                ///< CUDA device ordinal
  std::int64_t key_dim = 0;       ///< K
  std::int64_t value_dim = 0;     ///< V
  ScalarType input_dtype = ScalarType::BF16;
  TileConfig config;

  bool operator==(const VariantKey& o) const {
    return package_id == o.package_id && context == o.context && device == o.device && key_dim == o.key_dim &&
           value_dim == o.value_dim && input_dtype == o.input_dtype && config == o.config;
  }
  bool operator!=(const VariantKey& o) const { return !(*this == o); }
};

/// FNV-1a style mix of every field (no allocation).
struct VariantKeyHash {
  std::size_t operator()(const VariantKey& k) const;
};

/// "package 3, device 0 (context 0x...), K=128, V=128, bf16, chunk=64,block_v=64,warps=4,stages=1" for logs
/// and test failures.
std::string toString(const VariantKey& key);

template <typename Value>
class VariantTable {
 public:
  explicit VariantTable(std::size_t capacity = 4096) : capacity_(capacity == 0 ? 1 : capacity) {}
  VariantTable(const VariantTable&) = delete;
  VariantTable& operator=(const VariantTable&) = delete;

  /// The stored value for `key`, or null (never builds).
  std::shared_ptr<const Value> find(const VariantKey& key) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second->value;
  }

  /// The value for `key`; on a miss `build()` (returning std::shared_ptr<const Value>, never null) is run
  /// once per key as described in the threading contract above.
  template <typename Build>
  std::shared_ptr<const Value> getOrBuild(const VariantKey& key, Build&& build) {
    if (auto hit = find(key)) return hit;
    std::shared_ptr<Slot> slot;
    {
      std::unique_lock<std::shared_mutex> lock(mu_);
      auto it = map_.find(key);
      if (it == map_.end()) {
        if (map_.size() >= capacity_) map_.clear();
        it = map_.emplace(key, std::make_shared<Slot>()).first;
      }
      slot = it->second;
      if (slot->value) return slot->value;
    }
    // One builder per key: later callers of this key wait here, then find the value.
    std::lock_guard<std::mutex> building(slot->build_mu);
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (slot->value) return slot->value;
    }
    std::shared_ptr<const Value> value = build();
    std::unique_lock<std::shared_mutex> lock(mu_);
    slot->value = value;
    ++builds_;
    return value;
  }

  /// Keys held now.
  std::size_t size() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return map_.size();
  }
  /// Successful builds since construction (a test and diagnostics counter).
  std::size_t builds() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return builds_;
  }

 private:
  struct Slot {
    std::mutex build_mu;                  ///< held while this key's value is built
    std::shared_ptr<const Value> value;   ///< guarded by the table's mu_
  };
  mutable std::shared_mutex mu_;
  std::unordered_map<VariantKey, std::shared_ptr<Slot>, VariantKeyHash> map_;
  std::size_t capacity_;
  std::size_t builds_ = 0;
};

}  // namespace detail
}  // namespace dgps
