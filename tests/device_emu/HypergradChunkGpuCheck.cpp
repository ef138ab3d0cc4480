// GPU check (ctest label `gpu`) of the chunked OSDN d-scan device pieces (runtime/device/dgps/device/
// hypergrad_chunk.cuh): the same cases as the emulator check (HypergradChunkCases.h), compiled with NVRTC
// through the runtime's JitCompiler and launched on device 0. Without NVRTC or a GPU it prints why and exits
// 77 (ctest: Skipped); with NVRTC but no GPU it compiles the kernels first, so a compile error fails (exit 1).
#include <exception>
#include <filesystem>
#include <iostream>

#include "HypergradChunkCases.h"
#include "dgps/device/hypergrad_chunk_args.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Jit.h"

using namespace dgps;
using namespace dgps::hgtest;

namespace {

// Thin __global__ wrappers: one CTA per (chunk, key head) for the summary, per (sequence, key head) for the pass.
// Chunks are in sequence order; sequence s owns chunks first[s] .. first[s] + count[s] − 1.
const char* kSource = R"(
#include "dgps/device/hypergrad_chunk.cuh"
extern "C" __global__ void hg_summary(dgps::dev::HypergradChunkArgs a, const int* t0, const int* len,
                                      const int* slot) {
  const int b = (int)blockIdx.x, c = b / a.H;
  dgps::dev::hypergrad_chunk_summary_cta(a, t0[c], len[c], slot[c], b % a.H);
}
extern "C" __global__ void hg_pass(dgps::dev::HypergradPassArgs a, const int* len, const int* slot,
                                   const int* first, const int* count) {
  const int b = (int)blockIdx.x, s = b / a.H, f = first[s];
  dgps::dev::hypergrad_chunk_pass_cta(a, len + f, slot + f, count[s], s, b % a.H);
}
)";

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(0, std::max<size_t>(v.size(), 1) * sizeof(T));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}
DeviceBuffer poisoned(size_t n) {
  std::vector<float> nan(std::max<size_t>(n, 1), std::numeric_limits<float>::quiet_NaN());
  return upload(nan);
}
std::vector<float> download(const DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  if (n) b.download(v.data(), n * sizeof(float));
  return v;
}
float* f32(const DeviceBuffer& b) { return static_cast<float*>(b.data()); }
int* i32(const DeviceBuffer& b) { return static_cast<int*>(b.data()); }

bool run(const Case& cs, std::uint64_t seed, CUfunction summary, CUfunction pass) {
  const CudaDriver& cu = cudaDriver();
  Problem P = makeProblem(cs, seed);
  const int H = cs.H, K = cs.K, C = cs.C, N = P.N, S = P.S;
  std::vector<int> t0, len, slot, first(N, 0), count(N, 0);
  for (const Chunk& c : P.chunks) {
    if (count[c.seq]++ == 0) first[c.seq] = static_cast<int>(t0.size());
    t0.push_back(c.t0), len.push_back(c.len), slot.push_back(c.slot);
  }
  DeviceBuffer khat = upload(P.khat), beta = upload(P.beta), rlog = upload(P.rlog), init = upload(P.init);
  const size_t perChunk = static_cast<size_t>(S) * H * C;
  DeviceBuffer R = poisoned(perChunk * K), Y = poisoned(perChunk * K), a = poisoned(perChunk),
               ld = poisoned(static_cast<size_t>(S) * H), pst = poisoned(P.refStart.size()), pcoef = poisoned(perChunk),
               fin = poisoned(P.init.size());
  DeviceBuffer dt0 = upload(t0), dlen = upload(len), dslot = upload(slot), dfirst = upload(first),
               dcount = upload(count);
  dev::HypergradChunkArgs sa{f32(khat), f32(beta), cs.retention ? f32(rlog) : nullptr, cs.eta, H, K, C,
                             f32(R), f32(a), f32(Y), f32(ld)};
  int* pt0 = i32(dt0); int* plen = i32(dlen); int* pslot = i32(dslot); int* pfirst = i32(dfirst);
  int* pcount = i32(dcount);
  const unsigned smemA = static_cast<unsigned>(dev::hypergrad_chunk_summary_smem(C, K));
  checkCuda(cu.cuFuncSetAttribute(summary, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smemA)),
            "cuFuncSetAttribute(hg_summary)");
  void* argsA[] = {&sa, &pt0, &plen, &pslot};
  if (S > 0)
    checkCuda(cu.cuLaunchKernel(summary, static_cast<unsigned>(S * H), 1, 1, 128, 1, 1, smemA, nullptr, argsA, nullptr),
              "launch hg_summary");
  dev::HypergradPassArgs pa{f32(R), f32(a), f32(Y), f32(ld), cs.init ? f32(init) : nullptr, 1.f, H, K, C,
                            f32(pst), f32(pcoef), f32(fin)};
  void* argsB[] = {&pa, &plen, &pslot, &pfirst, &pcount};
  checkCuda(cu.cuLaunchKernel(pass, static_cast<unsigned>(N * H), 1, 1, 64, 1, 1,
                              static_cast<unsigned>(dev::hypergrad_chunk_pass_smem(C, K)), nullptr, argsB, nullptr),
            "launch hg_pass");
  checkCuda(cu.cuCtxSynchronize(), "cuCtxSynchronize");
  return report(cs, seed, P, download(pst, P.refStart.size()), download(pcoef, perChunk),
                download(fin, P.init.size()));
}

}  // namespace

int main() {
  try {
    try {
      (void)nvrtcEnvironment();
    } catch (const std::exception& e) {  // no NVRTC on this machine: nothing can be checked here
      std::cout << "hypergrad_chunk GPU check skipped: " << e.what() << std::endl;
      return 77;
    }
    JitRequest req;
    req.source = kSource;
    req.source_name = "hypergrad_chunk_check.cu";
    std::string why;
    const bool gpu = cudaAvailable(&why);
    req.target = gpu ? selectJitTarget(deviceComputeCapability(0), nvrtcEnvironment().supported_archs)
                     : parseJitTarget("sm_90a");
    JitCompiler jit{BinaryCache(std::filesystem::path(DGPS_GPU_CACHE_DIR))};
    JitBinary bin = jit.compile(req);
    std::cout << "compiled hg_summary, hg_pass for " << req.target.arch << "\n";
    if (!gpu) {
      std::cout << "hypergrad_chunk GPU check skipped after compiling: " << why << std::endl;
      return 77;
    }
    DeviceContextGuard guard(0);
    const CudaDriver& cu = cudaDriver();
    CUmodule module = nullptr;
    checkCuda(cu.cuModuleLoadData(&module, bin.image.data()), "cuModuleLoadData");
    CUfunction summary = nullptr, pass = nullptr;
    checkCuda(cu.cuModuleGetFunction(&summary, module, "hg_summary"), "cuModuleGetFunction(hg_summary)");
    checkCuda(cu.cuModuleGetFunction(&pass, module, "hg_pass"), "cuModuleGetFunction(hg_pass)");
    bool all = true;
    for (const Case& c : cases()) all &= run(c, freshSeed(), summary, pass);
    checkCuda(cu.cuModuleUnload(module), "cuModuleUnload");
    return all ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "hypergrad_chunk GPU check failed: " << e.what() << std::endl;
    return 1;
  }
}
