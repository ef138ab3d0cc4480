// Loading a kernel package onto the CPU emulator (tests only): a package's kernels.cu (or a C++ file that
// includes it) is compiled as plain C++ against the emulator's hooks (emu_prelude.h, emu_hooks.h) into a shared
// object, dlopen'ed, and its extern "C" role entry points are run with dgps_emu::launch. The test executable
// that uses this must export its symbols (CMake ENABLE_EXPORTS): the loaded kernels call the emulator in it.
#pragma once
#include <string>

#include "dgps/device/abi.h"
#include "dgps/dsl/LaunchContract.h"

namespace dgps_emu {

/// The compile-time macros a package's kernels.cu reads (the ones the runtime's JIT sets, docs/architecture.md):
/// head dims DGPS_K / DGPS_V, the input dtype (DGPS_INPUT_F16 or DGPS_INPUT_BF16) and the chunk-forward tuning
/// parameters. A tuning parameter left at 0 is not defined (the decode role reads none of them).
struct KernelConfig {
  int K = 0, V = 0;    ///< key and value head dims
  bool f16 = false;    ///< fp16 inputs and output (bf16 otherwise)
  int chunk = 0;       ///< DGPS_CHUNK: tokens per chunk
  int block_v = 0;     ///< DGPS_BLOCK_V: value columns per CTA
  int warps = 0;       ///< DGPS_WARPS
  int stages = 0;      ///< DGPS_STAGES: pipeline depth
  bool summary_pairs = false;  ///< DGPS_SUMMARY_PAIRS=1: two segment-summary CTAs per SM where they fit
};

/// The host-compiler command that builds `source` (a kernels.cu, or C++ including one) for the emulator into
/// the shared object `so` (the wgmma path emulated, DGPS_EMU_WGMMA=1).
std::string emuCompileCommand(const std::string& source, const std::string& so, const KernelConfig& c);

/// Runs emuCompileCommand; false (after printing the command to stderr) when the compiler fails.
bool compileForEmu(const std::string& source, const std::string& so, const KernelConfig& c);

/// dlopens `so` with its own symbol namespace (RTLD_LOCAL: two packages' equally named kernels do not collide);
/// null after printing dlerror() to stderr.
void* openEmuModule(const std::string& so);

/// compileForEmu then openEmuModule: the loaded module, or null after printing why.
void* loadForEmu(const std::string& source, const std::string& so, const KernelConfig& c);

/// DeviceFeatures.h FeatureSet::write_key of a package whose manifest.yaml text is `manifest`: its features line's
/// write_key (stored 1, segments 2; absent: rebuilt 0). The host then sizes the workspace and the walks' launch as
/// the kernels lay them out.
int packageWriteKey(const std::string& manifest);
/// packageWriteKey of the package folder `dir` (its manifest.yaml; 0 when unreadable, which the caller's read of
/// the same package reports).
int packageWriteKeyOf(const std::string& dir);

/// Runs the module's entry point `sym` (a `void(dgps::ForwardArgs)`) on the emulator over `geo`'s grid, block and
/// dynamic shared memory. False after printing why: no such symbol, or an error the emulator detected
/// (deadlock, divergent collective).
bool launchRole(void* module, const std::string& sym, const dgps::launch::Geometry& geo, dgps::ForwardArgs& a);

/// What runtime/lib/TensorMaps.cpp does on a GPU with tensor copies, in the emulator's map format: encodes a.q_rows
/// and a.k_rows (launch::chunkRowsMapShape over `rows` rows of `heads` heads), a.q_core and a.k_core
/// (walkCoreMapShape) and sets a.row_maps, when one step
/// per token and launch::chunkRowsMapFits allow it; true when it did. a.q and a.k must be set.
/// With heads_v, V and block_v also a.v_rows (bit 3: the walks' value tiles, value tile min(block_v, pad16(V))), at
/// every chunk (the runtime encodes it for chunk <= 32 only, a speed choice: the kernels' path is the same).
/// With channel_gate (a per-channel decay: a.g is [rows, heads_v, K] f32) also a.g_rows (bit 4, the 32-byte
/// swizzled gateRowsMapShape) where gateRowsMapFits. Bit 5 (precond_summary's key rows) is always set.
bool encodeRowMaps(dgps::ForwardArgs& a, long long rows, long long heads, int K, int chunk, int row_steps = 1,
                   long long heads_v = 0, int V = 0, int block_v = 0, bool channel_gate = false);

}  // namespace dgps_emu
