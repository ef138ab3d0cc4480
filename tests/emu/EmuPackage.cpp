// Compiling, loading and launching a kernel package on the CPU emulator (see EmuPackage.h).
#include "EmuPackage.h"

#include <fstream>
#include <sstream>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "emu_hooks.h"

namespace dgps_emu {

namespace {

/// " -DNAME=value", or nothing for a tuning parameter left at 0.
std::string define(const char* name, int value) {
  return value ? std::string(" -D") + name + "=" + std::to_string(value) : std::string();
}

}  // namespace

std::string emuCompileCommand(const std::string& source, const std::string& so, const KernelConfig& c) {
  return std::string(DGPS_EMU_CXX) + " -O1 -std=c++17 -fPIC -shared -Wno-unknown-pragmas -include " + DGPS_EMU_DIR +
         "/emu_prelude.h -I" + DGPS_DEVICE_DIR + " -I" + DGPS_EMU_DIR + " -DDGPS_EMU_WGMMA=1 -Wno-psabi" +
         (c.f16 ? " -DDGPS_INPUT_F16=1" : " -DDGPS_INPUT_BF16=1") + define("DGPS_K", c.K) + define("DGPS_V", c.V) +
         define("DGPS_CHUNK", c.chunk) + define("DGPS_BLOCK_V", c.block_v) + define("DGPS_WARPS", c.warps) +
         define("DGPS_STAGES", c.stages) + define("DGPS_SUMMARY_PAIRS", c.summary_pairs ? 1 : 0) + " -x c++ " + source + " -o " + so;
}

int packageWriteKey(const std::string& manifest) {
  // the features line: "features: {..., write_key: stored}" (absent: rebuilt)
  const std::string key = "write_key: ";
  const size_t features = manifest.find("\nfeatures: {");
  if (features == std::string::npos) return 0;
  const size_t end = manifest.find('}', features);
  const size_t at = manifest.find(key, features);
  if (at == std::string::npos || at > end) return 0;
  const std::string name = manifest.substr(at + key.size(), manifest.find_first_of(",}", at) - at - key.size());
  return name == "stored" ? dgps::launch::kWriteKeyStored
         : name == "segments" ? dgps::launch::kWriteKeyStoredSegments
                              : dgps::launch::kWriteKeyRebuilt;
}

int packageWriteKeyOf(const std::string& dir) {
  std::ifstream in(dir + "/manifest.yaml");
  std::stringstream text;
  text << in.rdbuf();
  return packageWriteKey(text.str());
}

bool compileForEmu(const std::string& source, const std::string& so, const KernelConfig& c) {
  const std::string cmd = emuCompileCommand(source, so, c);
  if (std::system(cmd.c_str()) == 0) return true;
  std::fprintf(stderr, "emulator compile failed: %s\n", cmd.c_str());
  return false;
}

void* openEmuModule(const std::string& so) {
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) std::fprintf(stderr, "dlopen %s: %s\n", so.c_str(), dlerror());
  return h;
}

void* loadForEmu(const std::string& source, const std::string& so, const KernelConfig& c) {
  return compileForEmu(source, so, c) ? openEmuModule(so) : nullptr;
}

bool launchRole(void* module, const std::string& sym, const dgps::launch::Geometry& geo, dgps::ForwardArgs& a) {
  void* fn = dlsym(module, sym.c_str());
  if (!fn) {
    std::fprintf(stderr, "no symbol %s\n", sym.c_str());
    return false;
  }
  auto kernel = reinterpret_cast<void (*)(dgps::ForwardArgs)>(fn);
  char err[512] = {0};
  if (!launch([&] { kernel(a); }, geo.grid.x, geo.block.x, geo.smem_bytes, err, sizeof err)) {
    std::fprintf(stderr, "emulator (%s): %s\n", sym.c_str(), err);
    return false;
  }
  return true;
}

bool encodeRowMaps(dgps::ForwardArgs& a, long long rows, long long heads, int K, int chunk, int row_steps,
                   long long heads_v, int V, int block_v, bool channel_gate) {
  a.row_maps = 0;
  const int KP = dgps::launch::pad16(K);
  if (row_steps != 1 || !a.q || !a.k || !dgps::launch::chunkRowsMapFits(rows, heads, K, chunk, KP)) return false;
  const dgps::launch::TensorMapShape s = dgps::launch::chunkRowsMapShape(rows, heads, K, chunk, KP);
  encode_tensor_map(a.q_rows.opaque, a.q, 3, s.dims, s.strides, s.box, 2);
  encode_tensor_map(a.k_rows.opaque, a.k, 3, s.dims, s.strides, s.box, 2);
  const dgps::launch::TensorMapShape4 c = dgps::launch::walkCoreMapShape(rows, heads, K, chunk, KP);
  encode_tensor_map(a.q_core.opaque, a.q, 4, c.dims, c.strides, c.box, 2);
  encode_tensor_map(a.k_core.opaque, a.k, 4, c.dims, c.strides, c.box, 2);
  a.row_maps = 3 | 32;  // with precond_summary's key rows (bit 5)
  if (channel_gate && heads_v > 0 && a.g && dgps::launch::gateRowsMapFits(rows, heads_v, K, chunk, KP)) {
    const dgps::launch::TensorMapShape4 g = dgps::launch::gateRowsMapShape(rows, heads_v, K, chunk, KP);
    encode_tensor_map(a.g_rows.opaque, a.g, 4, g.dims, g.strides, g.box, 4, 32);
    a.row_maps |= 16;
  }
  const int BV = block_v < dgps::launch::pad16(V) ? block_v : dgps::launch::pad16(V);
  if (heads_v > 0 && a.v && dgps::launch::chunkRowsMapFits(rows, heads_v, V, chunk, BV)) {
    const dgps::launch::TensorMapShape v = dgps::launch::chunkRowsMapShape(rows, heads_v, V, chunk, BV);
    encode_tensor_map(a.v_rows.opaque, a.v, 3, v.dims, v.strides, v.box, 2);
    a.row_maps |= 8;
  }
  return true;
}

}  // namespace dgps_emu
