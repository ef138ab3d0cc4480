// Seeded mutation run over every parser of the runtime: package manifests and spec.yaml (seeds: the
// shipped generated/*/), the tuning database (seeds: records written by toJsonLine, the project's
// writer), binary-cache entries (seed: an entry written by BinaryCache with a fake binary), ptxas logs
// and kernel sources. Mutations: byte flips, truncations, long runs inserted, lines duplicated, numbers
// replaced by huge, negative or NaN values. A parser may only answer with its documented error (a
// RuntimeError, a Status, nullopt with a reason); any other exception, a crash or a slow answer fails.
// Deterministic: the seed of each run is fixed and printed with every failure.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "RobustUtil.h"
#include "dgps/dsl/Canonical.h"
#include "dgps/runtime/BinaryCache.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kPackages[] = {"atq", "deltanet", "gdn", "kda", "linear_attention", "mamba2",
                                 "osdn", "osdn_apf", "pdn", "pgdn", "pkda"};

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::string operator()(std::string s) {
    const int n = 1 + int(pick(3));
    for (int i = 0; i < n; ++i) s = once(std::move(s));
    return s;
  }

 private:
  std::uint64_t pick(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::string once(std::string s) {
    switch (pick(5)) {
      case 0:  // byte flip
        if (!s.empty()) s[pick(s.size())] = char(pick(256));
        return s;
      case 1:  // truncation
        return s.substr(0, pick(s.size() + 1));
      case 2: {  // a long run of one character
        static const char kRun[] = {'a', '[', '{', ' ', '9', '\0', '-', ':', '\n', '"', '\\', '#', '*', '&'};
        const std::size_t len = std::size_t(1) << pick(17);
        return s.insert(pick(s.size() + 1), std::string(len, kRun[pick(sizeof kRun)]));
      }
      case 3: {  // a line duplicated
        if (s.empty()) return s;
        std::size_t b = s.rfind('\n', pick(s.size()));
        b = b == std::string::npos ? 0 : b + 1;
        std::size_t e = s.find('\n', b);
        e = e == std::string::npos ? s.size() : e + 1;
        const std::string line = s.substr(b, e - b);
        return s.insert(e, line.back() == '\n' ? line : "\n" + line);
      }
      default: {  // a number replaced
        static const char* const kNumbers[] = {"99999999999999999999999", "-1", "-9223372036854775809", "nan",
                                               "NaN", ".nan", "inf", "-inf", "1e999", "-0", "0x7fffffff",
                                               "1e-400", "18446744073709551616", "0", "4294967296"};
        std::size_t at = pick(s.size() + 1);
        while (at < s.size() && !(s[at] >= '0' && s[at] <= '9')) ++at;
        if (at >= s.size()) return s;
        std::size_t end = at;
        while (end < s.size() && ((s[end] >= '0' && s[end] <= '9') || s[end] == '.')) ++end;
        return s.replace(at, end - at, kNumbers[pick(sizeof kNumbers / sizeof *kNumbers)]);
      }
    }
  }

  std::mt19937_64 rng_;
};

// Runs `body` on `runs` mutants of each seed text; `body` returns normally or throws only what it may.
template <typename Body>
void mutate(const std::string& what, const std::vector<std::string>& seeds, int runs, Body body) {
  std::uint64_t run = 0;
  for (const std::string& seed : seeds) {
    for (int i = 0; i < runs; ++i, ++run) {
      const std::uint64_t rng_seed = 0x5eed0000 + run;
      const std::string text = Mutator(rng_seed)(seed);
      const auto t0 = Clock::now();
      try {
        body(text);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << " mutant (seed " << rng_seed << ") escaped with " << typeid(e).name() << ": "
                      << std::string(e.what()).substr(0, 300);
      } catch (...) {
        ADD_FAILURE() << what << " mutant (seed " << rng_seed << ") escaped with a non-standard exception";
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      EXPECT_LT(s, 2.0) << what << " mutant (seed " << rng_seed << ") took " << s << " s";
    }
  }
}

std::vector<std::string> packageFiles(const char* file) {
  std::vector<std::string> out;
  for (const char* p : kPackages) out.push_back(robust::readFile(robust::generatedPackage(p) + "/" + file));
  return out;
}

TEST(Mutation, PackageManifest) {
  mutate("manifest", packageFiles("manifest.yaml"), 120, [](const std::string& text) {
    try {
      parseManifest(text, "fuzz/manifest.yaml");
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
      EXPECT_EQ(std::string(e.what()).rfind("fuzz/manifest.yaml", 0), 0u) << e.what();
    }
  });
}

TEST(Mutation, PackageSpecThroughPackageOpen) {
  robust::TempDir tmp;
  std::vector<std::string> dirs;
  for (const char* p : kPackages) dirs.push_back(robust::copyPackage(p, tmp / p));
  std::size_t which = 0;
  const auto seeds = packageFiles("spec.yaml");
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const std::string dir = dirs[i];
    mutate(std::string("spec.yaml of ") + kPackages[i], {seeds[i]}, 25, [&](const std::string& text) {
      robust::writeFile(dir + "/spec.yaml", text);
      try {
        // Accepted only as dgpsc writes it (a new description is allowed: it is not hashed).
        const Package pkg = Package::open(dir);
        EXPECT_EQ(canonicalYaml(pkg.spec()), text);
      } catch (const RuntimeError& e) {
        EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
      }
    });
    ++which;
  }
  EXPECT_EQ(which, seeds.size());
}

std::string seedDatabase() {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    tuning::TuningRecord r = robust::sampleRecord();
    r.config.block_v = 32 << (i % 3);
    r.key.K = 64 * (1 + i % 2);
    r.median_ms = 0.25 * (i + 1);
    r.p20_ms = r.median_ms * 0.9;
    r.p80_ms = r.median_ms * 1.1;
    text += tuning::toJsonLine(r) + "\n";
  }
  return text;
}

TEST(Mutation, TuningDatabase) {
  robust::TempDir tmp;
  const std::string path = tmp / "tuning.jsonl";
  mutate("tuning database", {seedDatabase()}, 400, [&](const std::string& text) {
    robust::writeFile(path, text);
    tuning::TuningDb db(path);
    const tuning::Status s = db.load();  // declared not to throw
    EXPECT_TRUE(s) << s.message;         // a regular private file: bad lines are warnings, never a failed load
    for (const auto& r : db.records()) {
      EXPECT_TRUE(tuning::isRecordDate(r.date));
      EXPECT_LE(r.p20_ms, r.median_ms);
    }
    // Lines one by one, as a reader that merges files would see them.
    std::size_t b = 0;
    while (b < text.size()) {
      std::size_t e = text.find('\n', b);
      if (e == std::string::npos) e = text.size();
      tuning::TuningRecord r;
      std::string error;
      if (!tuning::parseJsonLine(text.substr(b, e - b), &r, &error)) EXPECT_FALSE(error.empty());
      b = e + 1;
    }
  });
}

TEST(Mutation, BinaryCacheEntry) {
  robust::TempDir tmp;
  const std::string key(64, 'c');
  std::string image(4096, '\0');
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = char((i * 131) & 0xff);  // a fake CUBIN
  BinaryCache cache(tmp / "cache");
  ASSERT_TRUE(cache.store(key, CachedImage{image, false, "ptxas info    : Used 80 registers\n"}));
  const std::string seed = robust::readFile(cache.entryPath(key));
  ASSERT_EQ(seed, BinaryCache::encode(key, CachedImage{image, false, "ptxas info    : Used 80 registers\n"}));
  robust::WarningCapture quiet;  // every corrupt mutant warns; that is expected
  mutate("cache entry", {seed}, 400, [&](const std::string& bytes) {
    std::string why;
    const auto decoded = BinaryCache::decode(bytes, key, &why);
    if (decoded) {
      EXPECT_EQ(bytes, seed) << "a changed entry decoded";
    } else {
      EXPECT_FALSE(why.empty());
    }
    robust::writeFile(cache.entryPath(key), bytes);
    const auto loaded = cache.load(key);
    EXPECT_EQ(loaded.has_value(), decoded.has_value());
  });
}

TEST(Mutation, PtxasLogsAndKernelSources) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'dgps_gdn_fwd_chunk_local' for 'sm_90a'\n"
      "ptxas info    : Function properties for dgps_gdn_fwd_chunk_local\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 2048 bytes smem, 904 bytes cmem[0]\n";
  mutate("ptxas log", {log}, 400, [](const std::string& text) { parsePtxasInfo(text); });
  std::vector<std::string> sources;
  for (const char* p : {"gdn", "pgdn"}) sources.push_back(robust::readFile(robust::generatedPackage(p) + "/kernels.cu"));
  mutate("kernel source", sources, 100, [](const std::string& text) {
    JitRequest r;
    r.source = text;
    try {
      checkSourceIncludes(r);
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::Package);
    }
  });
}

}  // namespace
}  // namespace dgps
