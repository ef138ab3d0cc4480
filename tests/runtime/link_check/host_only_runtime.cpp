// A host program that links dgps_runtime and nothing else of DGPS: it opens a package and computes the
// forward workspace size from the manifest's launch formulas. tests/runtime/CheckRuntimeLink.cmake then
// reads this program's link command and fails if the float64 reference, safetensors or command-line code
// (the dgps_dsl library) was linked in.
#include <cstdio>
#include <exception>

#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PACKAGE_DIR\n", argv[0]);
    return 2;
  }
  try {
    const dgps::Package pkg = dgps::Package::open(argv[1]);
    dgps::ForwardProblem p;
    p.batch = p.num_seqs = 2;
    p.seq_len = 1000;
    p.heads_qk = p.heads_v = 4;
    p.key_dim = pkg.manifest().key_dims.front();
    p.value_dim = pkg.manifest().value_dims.front();
    dgps::Runtime rt;
    const std::size_t bytes = rt.forwardWorkspaceBytes(pkg, p, pkg.manifest().default_config);
    std::printf("%s: %zu forward kernels, workspace %zu bytes\n", pkg.name().c_str(), pkg.manifest().launch.forward.size(),
                bytes);
    return bytes > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
