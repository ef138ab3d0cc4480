// The runtime's resolved-variant table (runtime/lib/VariantTable.h), on the CPU: a hit returns the stored
// value without building, every key field separates entries, a failed build stores nothing, four threads
// asking for one new key build it once, the size bound holds, and Package::instanceId separates packages
// opened from different (or the same) folders. Also: the name-free launch geometry the warm path uses
// equals planForward / planDecode for every committed package.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "LaunchPlan.h"
#include "RuntimeTestUtil.h"
#include "VariantTable.h"
#include "dgps/runtime/Package.h"

namespace dgps {
namespace {

using detail::VariantKey;
using detail::VariantTable;

struct Built {
  int serial = 0;  // which build produced it
};

VariantKey baseKey() {
  VariantKey k;
  k.package_id = 7;
  k.context = reinterpret_cast<const void*>(std::uintptr_t(0x1000));
  k.device = 0;
  k.key_dim = 128;
  k.value_dim = 128;
  k.input_dtype = ScalarType::BF16;
  k.config = TileConfig{64, 64, 4, 1};
  return k;
}

// Counts builds and numbers the values.
struct Builder {
  std::atomic<int> calls{0};
  std::shared_ptr<const Built> operator()() {
    auto b = std::make_shared<Built>();
    b->serial = ++calls;
    return b;
  }
};

TEST(VariantTable, HitReturnsTheStoredValueWithoutBuilding) {
  VariantTable<Built> table;
  Builder build;
  const VariantKey k = baseKey();
  EXPECT_EQ(table.find(k), nullptr);
  auto first = table.getOrBuild(k, [&] { return build(); });
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(build.calls.load(), 1);
  VariantKey same = baseKey();  // an equal key built separately
  for (int i = 0; i < 100; ++i) EXPECT_EQ(table.getOrBuild(same, [&] { return build(); }).get(), first.get());
  EXPECT_EQ(build.calls.load(), 1);
  EXPECT_EQ(table.find(same).get(), first.get());
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.builds(), 1u);
}

TEST(VariantTable, EveryKeyFieldSeparatesEntries) {
  // Each mutation changes one field; none may reuse the base entry or each other's.
  std::vector<std::function<void(VariantKey&)>> changes = {
      [](VariantKey& k) { k.package_id = 8; },
      [](VariantKey& k) { k.context = reinterpret_cast<const void*>(std::uintptr_t(0x2000)); },
      [](VariantKey& k) { k.device = 1; },
      [](VariantKey& k) { k.key_dim = 64; },
      [](VariantKey& k) { k.value_dim = 64; },
      [](VariantKey& k) { k.input_dtype = ScalarType::F16; },
      [](VariantKey& k) { k.config.chunk = 32; },
      [](VariantKey& k) { k.config.block_v = 32; },
      [](VariantKey& k) { k.config.warps = 8; },
      [](VariantKey& k) { k.config.stages = 2; },
  };
  VariantTable<Built> table;
  Builder build;
  const auto base = table.getOrBuild(baseKey(), [&] { return build(); });
  std::set<const Built*> seen = {base.get()};
  for (std::size_t i = 0; i < changes.size(); ++i) {
    SCOPED_TRACE("change " + std::to_string(i));
    VariantKey k = baseKey();
    changes[i](k);
    EXPECT_NE(k, baseKey());
    EXPECT_EQ(table.find(k), nullptr) << detail::toString(k);
    auto v = table.getOrBuild(k, [&] { return build(); });
    EXPECT_TRUE(seen.insert(v.get()).second) << "reused an entry for " << detail::toString(k);
  }
  EXPECT_EQ(build.calls.load(), int(changes.size()) + 1);
  EXPECT_EQ(table.size(), changes.size() + 1);
  // And the base key still finds its own value.
  EXPECT_EQ(table.find(baseKey()).get(), base.get());
}

TEST(VariantTable, RandomKeysNeverCollide) {
  // Keys drawn from small ranges (many near-equal keys): a lookup must return the value built for exactly
  // that key, which each value records.
  struct Tagged {
    VariantKey key;
  };
  VariantTable<Tagged> table;
  std::mt19937 rng(20261201);
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  for (int i = 0; i < 2000; ++i) {
    VariantKey k;
    k.package_id = std::uint64_t(pick(4));
    k.context = reinterpret_cast<const void*>(std::uintptr_t(0x1000 * (1 + pick(2))));
    k.device = pick(2);
    k.key_dim = 64 << pick(2);
    k.value_dim = 64 << pick(2);
    k.input_dtype = pick(2) ? ScalarType::BF16 : ScalarType::F16;
    k.config = TileConfig{32 << pick(2), 32 << pick(2), 4 << pick(2), 1 + pick(2)};
    auto v = table.getOrBuild(k, [&] { return std::make_shared<const Tagged>(Tagged{k}); });
    ASSERT_EQ(v->key, k) << "lookup of " << detail::toString(k) << " returned " << detail::toString(v->key);
  }
}

TEST(VariantTable, FailedBuildStoresNothingAndIsRetried) {
  VariantTable<Built> table;
  const VariantKey k = baseKey();
  EXPECT_THROW(table.getOrBuild(k, []() -> std::shared_ptr<const Built> { throw std::runtime_error("nvrtc failed"); }),
               std::runtime_error);
  EXPECT_EQ(table.find(k), nullptr);
  EXPECT_EQ(table.builds(), 0u);
  Builder build;
  auto v = table.getOrBuild(k, [&] { return build(); });
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(build.calls.load(), 1);
}

TEST(VariantTable, FourThreadsFirstUseBuildOnce) {
  VariantTable<Built> table;
  std::atomic<int> calls{0};
  std::atomic<int> ready{0};
  const VariantKey k = baseKey();
  std::vector<std::shared_ptr<const Built>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < 4) std::this_thread::yield();  // start together
      got[std::size_t(t)] = table.getOrBuild(k, [&] {
        // A slow build (like an NVRTC compile): the other three must wait for it, not build again.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        auto b = std::make_shared<Built>();
        b->serial = ++calls;
        return std::shared_ptr<const Built>(b);
      });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(calls.load(), 1);
  for (int t = 0; t < 4; ++t) {
    ASSERT_NE(got[std::size_t(t)], nullptr);
    EXPECT_EQ(got[std::size_t(t)].get(), got[0].get()) << "thread " << t;
  }
  EXPECT_EQ(table.builds(), 1u);
}

TEST(VariantTable, FourThreadsDifferentKeysBuildConcurrently) {
  // Each build waits until all four are running: this finishes only if builds of different keys overlap.
  VariantTable<Built> table;
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  bool all_overlapped = true;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      VariantKey k = baseKey();
      k.device = t;
      table.getOrBuild(k, [&] {
        std::unique_lock<std::mutex> lock(mu);
        ++running;
        cv.notify_all();
        if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return running == 4; })) all_overlapped = false;
        return std::make_shared<const Built>();
      });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(all_overlapped) << "builds of different keys were serialised";
  EXPECT_EQ(table.size(), 4u);
}

TEST(VariantTable, CapacityBoundDropsEntriesButValuesStayValid) {
  VariantTable<Built> table(2);
  Builder build;
  VariantKey a = baseKey(), b = baseKey(), c = baseKey();
  b.device = 1;
  c.device = 2;
  auto va = table.getOrBuild(a, [&] { return build(); });
  table.getOrBuild(b, [&] { return build(); });
  auto vc = table.getOrBuild(c, [&] { return build(); });
  EXPECT_LE(table.size(), 2u);
  EXPECT_EQ(va->serial, 1);  // still readable after its entry was dropped
  EXPECT_EQ(table.find(c).get(), vc.get());
  auto va2 = table.getOrBuild(a, [&] { return build(); });  // rebuilt, not a wrong value
  EXPECT_EQ(va2->serial, 4);
}

TEST(VariantTable, PackageInstanceIdSeparatesOpensAndIsSharedByCopies) {
  test::TempDir tmp;
  const std::string dir = test::writeTinyPackage(tmp / "tiny");
  const Package a = Package::open(dir);
  const Package again = Package::open(dir);
  const Package copy = a;  // NOLINT(performance-unnecessary-copy-initialization): copies must share the id
  EXPECT_NE(a.instanceId(), 0u);
  EXPECT_NE(a.instanceId(), again.instanceId()) << "re-opening a folder must not reuse the old entries";
  EXPECT_EQ(a.instanceId(), copy.instanceId());

  // A folder whose kernel source changed after the first open: a new id, so a new variant.
  const std::string edited = test::writeTinyPackage(tmp / "tiny2", test::tinyKernelsCu() + "\n// edited\n");
  const Package b = Package::open(edited);
  EXPECT_NE(b.instanceId(), a.instanceId());

  VariantTable<Built> table;
  Builder build;
  auto keyFor = [](const Package& p) {
    VariantKey k = baseKey();
    k.package_id = p.instanceId();
    return k;
  };
  auto va = table.getOrBuild(keyFor(a), [&] { return build(); });
  EXPECT_EQ(table.getOrBuild(keyFor(copy), [&] { return build(); }).get(), va.get());
  EXPECT_NE(table.getOrBuild(keyFor(again), [&] { return build(); }).get(), va.get());
  EXPECT_NE(table.getOrBuild(keyFor(b), [&] { return build(); }).get(), va.get());
  EXPECT_EQ(build.calls.load(), 3);
}

// The warm path computes forwardGeometry/decodeGeometry instead of planForward/planDecode: they must agree.
TEST(VariantTable, NameFreeGeometryEqualsThePlanForEveryPackage) {
  namespace fs = std::filesystem;
  int checked = 0;
  for (const auto& e : fs::directory_iterator(std::string(DGPS_SOURCE_DIR) + "/generated")) {
    if (!fs::exists(e.path() / "manifest.yaml")) continue;
    const Package pkg = Package::open(e.path().string());
    const Manifest& m = pkg.manifest();
    SCOPED_TRACE(m.name);
    const int K = m.key_dims.back(), V = m.value_dims.back();
    const std::int64_t H = pkg.spec().heads_qk > 0 ? pkg.spec().heads_qk : 4;
    const std::int64_t HV = H * std::max(1, pkg.spec().gva_ratio);
    for (std::int64_t B : {1, 3, 32}) {
      if (m.has_forward) {
        ForwardProblem p;
        p.batch = p.num_seqs = B;
        p.seq_len = 1000 + 37 * B;
        p.heads_qk = H;
        p.heads_v = HV;
        p.key_dim = K;
        p.value_dim = V;
        const detail::ForwardPlan plan = detail::planForward(pkg, p, m.default_config);
        const detail::ForwardGeometry g = detail::forwardGeometry(pkg, p, m.default_config);
        ASSERT_EQ(std::size_t(g.count), plan.kernels.size());
        EXPECT_EQ(g.workspace_bytes, plan.workspace_bytes);
        for (int i = 0; i < g.count; ++i) {
          const auto& want = plan.kernels[std::size_t(i)];
          const auto& got = g.kernels[std::size_t(i)];
          EXPECT_EQ(want.symbol, m.forward_symbols[std::size_t(i)]);
          EXPECT_EQ(got.grid, want.grid) << want.role;
          EXPECT_EQ(got.block, want.block) << want.role;
          EXPECT_EQ(got.shared_bytes, want.shared_bytes) << want.role;
        }
        ++checked;
      }
      if (m.has_decode) {
        DecodeProblem d;
        d.batch = B;
        d.heads_qk = H;
        d.heads_v = HV;
        d.key_dim = K;
        d.value_dim = V;
        const detail::KernelLaunch want = detail::planDecode(pkg, d, m.default_config);
        const detail::LaunchGeometry got = detail::decodeGeometry(pkg, d, m.default_config);
        EXPECT_EQ(got.grid, want.grid);
        EXPECT_EQ(got.block, want.block);
        EXPECT_EQ(got.shared_bytes, want.shared_bytes);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace dgps
