// NVRTC JIT on the CPU: target selection, ptxas resource parsing (docs/math.md §7.5), cache keys that change with
// every input, compiles of a tiny package for sm_90a through the embedded device headers, the disk cache
// (hit, corrupt entry rebuilt), a failing compile that leaves its log, and dgps-jit-check itself.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <sys/wait.h>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>
#include <memory>

#include "RuntimeTestUtil.h"
#include "dgps/device/launch_rules.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

using test::TempDir;

const std::vector<int> kNvrtc13 = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};

TEST(JitTarget, SelectionFollowsTheDeviceAndNvrtc) {
  JitTarget t = selectJitTarget({9, 0}, kNvrtc13);
  EXPECT_EQ(t.arch, "sm_90a");  // exact CC 9.0: arch-specific target
  EXPECT_FALSE(t.ptx);
  EXPECT_EQ(selectJitTarget({8, 0}, kNvrtc13).arch, "sm_80");
  EXPECT_EQ(selectJitTarget({8, 9}, kNvrtc13).arch, "sm_89");
  EXPECT_EQ(selectJitTarget({10, 0}, kNvrtc13).arch, "sm_100");  // never sm_90a on a newer GPU
  // A device newer than NVRTC knows: PTX for the highest supported arch below it.
  t = selectJitTarget({13, 0}, kNvrtc13);
  EXPECT_EQ(t.arch, "compute_121");
  EXPECT_TRUE(t.ptx);
  t = selectJitTarget({9, 0}, {75, 80, 86});  // an old NVRTC on an H100
  EXPECT_EQ(t.arch, "compute_86");
  EXPECT_TRUE(t.ptx);
  try {
    selectJitTarget({6, 1}, kNvrtc13);
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::Jit);
    EXPECT_NE(std::string(e.what()).find("compute capability 6.1"), std::string::npos) << e.what();
  }
}

TEST(JitTarget, ExplicitArchIsCheckedAgainstTheLoadedNvrtc) {
  EXPECT_EQ(parseJitTarget("sm_90a").arch, "sm_90a");
  EXPECT_TRUE(parseJitTarget("compute_90").ptx);
  try {
    parseJitTarget("sm_20");
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported by the loaded NVRTC"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseJitTarget("hopper"), RuntimeError);
}

TEST(Ptxas, ParsesResourceLines) {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'dgps_a' for 'sm_90a'\n"
      "ptxas info    : Function properties for dgps_a\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 33024 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'dgps_b' for 'sm_90a'\n"
      "ptxas info    : Function properties for dgps_b\n"
      "ptxas         .     256 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers, 376 bytes cmem[0]\n";
  auto u = parsePtxasInfo(log);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].name, "dgps_a");
  EXPECT_EQ(u[0].arch, "sm_90a");
  EXPECT_EQ(u[0].registers, 168);
  EXPECT_EQ(u[0].barriers, 1);
  EXPECT_EQ(u[0].shared_bytes, 33024);
  EXPECT_FALSE(u[0].spills());
  EXPECT_EQ(u[1].stack_frame_bytes, 256);
  EXPECT_EQ(u[1].spill_store_bytes, 12);
  EXPECT_EQ(u[1].spill_load_bytes, 8);
  EXPECT_TRUE(u[1].spills());
}

TEST(JitKey, ChangesWithEveryField) {
  JitKeyFields base;
  base.source = "src";
  base.source_name = "a/kernels.cu";
  base.headers_digest = "h";
  base.options = {"--gpu-architecture=sm_90a", "-DDGPS_K=64"};
  base.nvrtc_version = "13.0";
  base.include_cuda_version = 13000;
  base.arch = "sm_90a";
  const std::string k0 = jitCacheKey(base);
  EXPECT_EQ(k0.size(), 64u);
  EXPECT_EQ(jitCacheKey(base), k0);
  std::vector<std::function<void(JitKeyFields&)>> edits = {
      [](JitKeyFields& f) { f.source += " "; },
      [](JitKeyFields& f) { f.source_name = "b/kernels.cu"; },
      [](JitKeyFields& f) { f.headers_digest = "h2"; },
      [](JitKeyFields& f) { f.options[1] = "-DDGPS_K=128"; },
      [](JitKeyFields& f) { f.options.push_back("-lineinfo"); },
      [](JitKeyFields& f) { f.options = {"--gpu-architecture=sm_90a-DDGPS_K=64"}; },  // field boundaries count
      [](JitKeyFields& f) { f.nvrtc_version = "13.1"; },
      [](JitKeyFields& f) { f.include_cuda_version = 12080; },
      [](JitKeyFields& f) { f.arch = "sm_90"; },
  };
  for (std::size_t i = 0; i < edits.size(); ++i) {
    JitKeyFields f = base;
    edits[i](f);
    EXPECT_NE(jitCacheKey(f), k0) << "edit " << i;
  }
}

TEST(JitKey, RequestKeyCoversDefinesTargetAndHeaders) {
  TempDir tmp;
  Package p = Package::open(test::writeTinyPackage(tmp / "tiny"));
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitTarget sm90a = parseJitTarget("sm_90a");
  TileConfig c = p.manifest().default_config;
  const std::string k0 = jit.cacheKey(variantRequest(p, 64, 64, ScalarType::BF16, c, sm90a));
  EXPECT_NE(jit.cacheKey(variantRequest(p, 64, 64, ScalarType::F16, c, sm90a)), k0);
  EXPECT_NE(jit.cacheKey(variantRequest(p, 64, 128, ScalarType::BF16, c, sm90a)), k0);
  EXPECT_NE(jit.cacheKey(variantRequest(p, 64, 64, ScalarType::BF16, TileConfig{64, 32, 4, 1}, sm90a)), k0);
  EXPECT_NE(jit.cacheKey(variantRequest(p, 64, 64, ScalarType::BF16, c, parseJitTarget("sm_90"))), k0);
  JitRequest r = variantRequest(p, 64, 64, ScalarType::BF16, c, sm90a);
  r.extra_headers.push_back({"x.h", "#define X 1\n"});
  EXPECT_NE(jit.cacheKey(r), k0);
  JitKeyFields f = jit.keyFields(variantRequest(p, 64, 64, ScalarType::BF16, c, sm90a));
  EXPECT_EQ(f.arch, "sm_90a");
  auto has = [&](const std::string& o) { return std::find(f.options.begin(), f.options.end(), o) != f.options.end(); };
  EXPECT_TRUE(has("--gpu-architecture=sm_90a"));
  EXPECT_TRUE(has("-std=c++17"));
  EXPECT_TRUE(has("-DDGPS_K=64"));
  EXPECT_TRUE(has("-DDGPS_V=64"));
  EXPECT_TRUE(has("-DDGPS_INPUT_BF16=1"));
  EXPECT_TRUE(has("-DDGPS_CHUNK=64"));
  EXPECT_TRUE(has("-DDGPS_BLOCK_V=64"));
  EXPECT_TRUE(has("-DDGPS_WARPS=4"));
  EXPECT_TRUE(has("-DDGPS_STAGES=1"));
}

TEST(JitEnvironment, FindsHeadersMatchingNvrtc) {
  const NvrtcEnvironment& env = nvrtcEnvironment();
  EXPECT_GE(env.major, 12);
  EXPECT_FALSE(env.supported_archs.empty());
  ASSERT_FALSE(env.include_dir.empty()) << env.describe();
  EXPECT_EQ(env.include_cuda_version, env.major * 1000 + env.minor * 10) << env.describe();
  std::string d = env.describe();
  EXPECT_NE(d.find("NVRTC " + std::to_string(env.major) + "."), std::string::npos) << d;
  EXPECT_NE(d.find("runtime built against CUDA"), std::string::npos) << d;
  EXPECT_NE(d.find("driver"), std::string::npos) << d;
  auto names = embeddedHeaderNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "dgps/device/abi.h"), names.end());
  EXPECT_EQ(embeddedHeadersDigest().size(), 64u);
}

TEST(JitCompile, TinyPackageForSm90aThenFromCache) {
  TempDir tmp;
  Package p = Package::open(test::writeTinyPackage(tmp / "tiny"));
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitRequest r = variantRequest(p, 64, 64, ScalarType::BF16, p.manifest().default_config, parseJitTarget("sm_90a"));
  JitBinary b = jit.compile(r);
  EXPECT_FALSE(b.from_cache);
  EXPECT_FALSE(b.is_ptx);
  ASSERT_GT(b.image.size(), 4u);
  EXPECT_EQ(b.image.substr(1, 3), "ELF");  // a CUBIN is an ELF image
  ASSERT_EQ(b.usage.size(), 3u) << b.log;
  for (const auto& u : b.usage) {
    EXPECT_EQ(u.arch, "sm_90a");
    EXPECT_GT(u.registers, 0);
    EXPECT_FALSE(u.spills()) << u.name;
  }
  JitBinary again = jit.compile(r);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.image, b.image);
  EXPECT_EQ(again.usage.size(), 3u);

  // f16 variant too.
  JitBinary h = jit.compile(variantRequest(p, 64, 64, ScalarType::F16, TileConfig{64, 32, 4, 1}, parseJitTarget("sm_90a")));
  EXPECT_NE(h.key, b.key);
  EXPECT_EQ(h.usage.size(), 3u);
}

TEST(JitCompile, CorruptCacheEntryIsRebuiltWithAWarning) {
  TempDir tmp;
  Package p = Package::open(test::writeTinyPackage(tmp / "tiny"));
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitRequest r = variantRequest(p, 64, 64, ScalarType::BF16, p.manifest().default_config, parseJitTarget("sm_90a"));
  JitBinary b = jit.compile(r);
  std::string path = jit.cache().entryPath(b.key);
  std::string bytes = test::readFile(path);
  bytes[bytes.size() / 2] ^= 0x20;
  test::writeFile(path, bytes);
  test::WarningCapture warnings;
  JitBinary again = jit.compile(r);
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(again.image, b.image);
  EXPECT_TRUE(warnings.contains("checksum mismatch")) << (warnings.messages().empty() ? "" : warnings.messages()[0]);
  EXPECT_TRUE(jit.compile(r).from_cache);  // the rebuilt entry replaced the corrupt one
}

TEST(JitCompile, FailureKeepsLogSourceAndOptions) {
  TempDir tmp;
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitRequest r;
  r.source = "#include \"dgps/device/platform.cuh\"\nextern \"C\" __global__ void k(dgps::ForwardArgs a) { undefined_thing(); }\n";
  r.source_name = "broken/kernels.cu";
  r.target = parseJitTarget("sm_90a");
  r.defines = {"DGPS_K=64"};
  try {
    jit.compile(r);
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::Jit);
    std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC failed to compile broken/kernels.cu for sm_90a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undefined_thing"), std::string::npos) << msg;
    EXPECT_NE(msg.find("NVRTC " + std::to_string(nvrtcEnvironment().major)), std::string::npos) << msg;
    auto at = msg.find("full log, source and options: ");
    ASSERT_NE(at, std::string::npos) << msg;
    std::string log_path = msg.substr(at + 30, msg.find('\n', at) - at - 30);
    EXPECT_EQ(log_path.rfind(tmp.path() + "/cache/failures/", 0), 0u) << log_path;
    std::string dir = log_path.substr(0, log_path.rfind('/'));
    EXPECT_NE(test::readFile(log_path).find("undefined_thing"), std::string::npos);
    EXPECT_NE(test::readFile(dir + "/options.txt").find("--gpu-architecture=sm_90a"), std::string::npos);
    EXPECT_NE(test::readFile(dir + "/options.txt").find("-DDGPS_K=64"), std::string::npos);
    EXPECT_EQ(test::readFile(dir + "/kernels.cu"), r.source);
    EXPECT_NE(test::readFile(dir + "/environment.txt").find("NVRTC"), std::string::npos);
  }
}

// docs/math.md §7.5: a runtime-indexed per-thread array lives in local memory; the resource report must show it.
TEST(JitCompile, LocalMemoryIsDetected) {
  TempDir tmp;
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitRequest r;
  r.source =
      "extern \"C\" __global__ void spills(float* a, int n) {\n"
      "  float s[256];\n"
      "  for (int i = 0; i < 256; ++i) s[i] = a[i * n];\n"
      "  a[threadIdx.x] = s[n & 255];\n"
      "}\n";
  r.source_name = "spill.cu";
  r.target = parseJitTarget("sm_90a");
  JitBinary b = jit.compile(r);
  ASSERT_EQ(b.usage.size(), 1u) << b.log;
  EXPECT_TRUE(b.usage[0].spills());
  EXPECT_GE(b.usage[0].stack_frame_bytes, 1024);
}

TEST(JitCompile, PtxTarget) {
  TempDir tmp;
  Package p = Package::open(test::writeTinyPackage(tmp / "tiny"));
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitBinary b = jit.compile(
      variantRequest(p, 64, 64, ScalarType::BF16, p.manifest().default_config, parseJitTarget("compute_90")));
  EXPECT_TRUE(b.is_ptx);
  EXPECT_NE(b.image.find(".target sm_90"), std::string::npos);
  EXPECT_NE(b.image.find("dgps_tiny_decode"), std::string::npos);
}

int runTool(const std::string& args, std::string& output) {
  std::string cmd = std::string(DGPS_JIT_CHECK_EXE) + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  output.clear();
  while (std::size_t n = fread(buf, 1, sizeof(buf), f)) output.append(buf, n);
  int status = pclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(JitCheckTool, CleanPackagePassesAndSpillingPackageFails) {
  TempDir tmp;
  std::string good = test::writeTinyPackage(tmp / "tiny");
  std::string out;
  EXPECT_EQ(runTool(good + " --all-configs --cache-dir " + tmp.path() + "/cache", out), 0) << out;
  EXPECT_NE(out.find("dgps_tiny_fwd_chunk_local"), std::string::npos) << out;
  EXPECT_NE(out.find("regs"), std::string::npos) << out;
  EXPECT_NE(out.find("4 variant(s) of 1 package(s), 0 failure(s)"), std::string::npos) << out;

  // The same package with a kernel that keeps a runtime-indexed array: local memory -> exit 1.
  std::string src = test::tinyKernelsCu();
  // make the decode kernel itself spill: route its store through a runtime-indexed local array
  src.replace(src.find("o[i] = fromF(toF(q[i % DGPS_K]));"), std::string("o[i] = fromF(toF(q[i % DGPS_K]));").size(),
              "{ float l[DGPS_K]; for (int j = 0; j < DGPS_K; ++j) l[j] = toF(q[(j * a.batch) % DGPS_K]);"
              " o[i] = fromF(l[(i * a.heads_v) % DGPS_K]); }");
  std::string bad = test::writeTinyPackage(tmp / "spilly", src);
  EXPECT_EQ(runTool(bad + " --cache-dir " + tmp.path() + "/cache", out), 1) << out;
  EXPECT_NE(out.find("FAIL: local memory / spills"), std::string::npos) << out;

  EXPECT_EQ(runTool(tmp.path() + "/missing", out), 1) << out;
  EXPECT_NE(out.find("cannot read the package manifest"), std::string::npos) << out;
  EXPECT_EQ(runTool(good + " --arch sm_1", out), 1) << out;
  EXPECT_NE(out.find("invalid --arch"), std::string::npos) << out;
}

}  // namespace
}  // namespace dgps

namespace dgps {
namespace {

/// The global stores of a PTX text (compiled with -lineinfo) that one source file issues: the opcode of each
/// st.global.* whose current .loc lies in a `.file` ending in `file`, or is inlined at a call in it (a store
/// helper of platform.cuh called from that file).
std::vector<std::string> globalStoresFrom(const std::string& ptx, const std::string& file) {
  std::vector<std::string> lines;
  {
    std::istringstream in(ptx);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  std::set<std::string> ids;  // .file indices of that file
  for (const std::string& l : lines) {
    std::istringstream w(l);
    std::string dir, id, name;
    if (w >> dir >> id >> name && dir == ".file" && name.size() > file.size() + 1 &&
        name.compare(name.size() - file.size() - 1, file.size(), file) == 0)
      ids.insert(id);
  }
  std::vector<std::string> ops;
  bool inside = false;
  for (const std::string& l : lines) {
    std::istringstream w(l);
    std::string first, id;
    if (!(w >> first)) continue;
    if (first == ".loc" && w >> id) {
      const std::size_t at = l.find("inlined_at ");
      std::string caller;
      if (at != std::string::npos) std::istringstream(l.substr(at + 11)) >> caller;
      inside = ids.count(id) > 0 || ids.count(caller) > 0;
    } else if (inside && first.rfind("st.global.", 0) == 0) {
      ops.push_back(first);
    }
  }
  return ops;
}

// The operand rows chunk_local writes (tile/gated_rows.cuh) leave as one 16-byte store per 8 channels: nvcc split
// the U4 struct assigned through a pointer into four 4-byte stores, which made KDA's chunk_local ~6% slower on the
// H200 (docs/performance.md, run 17). KDA's shipped package is compiled to PTX on the CPU, so the store width is
// checked without a GPU; K = 120 also takes the pad stores. The per-channel f32 stores of store_last_exp2 are
// scalar by design.
TEST(JitCompile, GatedRowStoresAreSixteenByteStores) {
  TempDir tmp;
  Package p = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/kda");
  JitCompiler jit{BinaryCache(tmp / "cache")};
  JitRequest r = variantRequest(p, 120, 120, ScalarType::BF16, p.manifest().default_config,
                                parseJitTarget("compute_90"));
  r.extra_options.push_back("-lineinfo");
  JitBinary b = jit.compile(r);
  ASSERT_TRUE(b.is_ptx);
  int vector = 0;
  for (const std::string& op : globalStoresFrom(b.image, "dgps/tile/gated_rows.cuh")) {
    if (op == "st.global.v4.u32") ++vector;
    else EXPECT_EQ(op, "st.global.f32") << "a row store of tile/gated_rows.cuh is not one 16-byte store";
  }
  EXPECT_GE(vector, 1) << "no 16-byte row store found in tile/gated_rows.cuh's code";
}

// Every chunk size the device library offers (launch_rules.h kChunkChoices, which the spec validator lets a spec
// list) compiles, for a scalar-decay package and a per-channel preconditioned one. C = 16 once did not: the state
// walks named the warpgroup MMA of N = 16, which does not exist, in a branch the compiler still instantiated.
TEST(JitCompile, EveryChunkChoiceCompiles) {
  TempDir tmp;
  JitCompiler jit{BinaryCache(tmp / "cache")};
  for (const char* name : {"gdn", "pkda"}) {
    Package p = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/" + name);
    for (int chunk : launch::kChunkChoices) {
      TileConfig c = p.manifest().default_config;
      c.chunk = chunk;
      JitBinary b;
      EXPECT_NO_THROW(b = jit.compile(variantRequest(p, 128, 128, ScalarType::BF16, c, parseJitTarget("compute_90"))))
          << name << " at chunk " << chunk;
      EXPECT_NE(b.image.find("_fwd_state_output"), std::string::npos) << name << " at chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace dgps
