// Compiles one generated-style source with NVRTC (as the runtime does) to a CUBIN, on a machine without a
// GPU. Usage: nvrtc_compile <src.cu> <out.cubin> <include-dir> [-DNAME=VALUE ...] [--arch=sm_90a] [--ptxas-v]
// Prints the NVRTC log; exit code 0 on success. Used by run.sh to build the harness's kernel variants and to
// prove every header compiles under NVRTC (no standard headers).
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <src.cu> <out.cubin> <include-dir> [-D...] [--arch=sm_XX] [--ptxas-v]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "nvrtc_compile: cannot read %s\n", argv[1]);
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string src = ss.str();
  std::string arch = "-arch=sm_90a";
  std::vector<std::string> opts = {"-std=c++17", std::string("-I") + argv[3], "-default-device", "--use_fast_math"};
  opts.clear();
  opts = {"-std=c++17", std::string("-I") + argv[3]};
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--arch=", 0) == 0) arch = "-arch=" + a.substr(7);
    else if (a == "--ptxas-v") opts.push_back("-Xptxas=-v");
    else opts.push_back(a);
  }
  opts.push_back(arch);
  std::vector<const char*> copts;
  for (auto& o : opts) copts.push_back(o.c_str());
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), argv[1], 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtc_compile: nvrtcCreateProgram failed\n");
    return 1;
  }
  const nvrtcResult r = nvrtcCompileProgram(prog, (int)copts.size(), copts.data());
  size_t logn = 0;
  nvrtcGetProgramLogSize(prog, &logn);
  std::string log(logn, '\0');
  nvrtcGetProgramLog(prog, &log[0]);
  if (logn > 1) std::fprintf(stderr, "%s\n", log.c_str());
  if (r != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtc_compile: %s: %s\n", argv[1], nvrtcGetErrorString(r));
    return 1;
  }
  size_t n = 0;
  nvrtcGetCUBINSize(prog, &n);
  std::vector<char> cubin(n);
  nvrtcGetCUBIN(prog, cubin.data());
  std::ofstream out(argv[2], std::ios::binary);
  out.write(cubin.data(), (std::streamsize)n);
  nvrtcDestroyProgram(&prog);
  return out ? 0 : 1;
}
