// The manifest's workspace for one call (ManifestWorkspace.h), through the runtime's launch plan.
#include "ManifestWorkspace.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>

#include "LaunchPlan.h"
#include "emu_hooks.h"
#include "dgps/runtime/Package.h"

namespace dgps_emu {

std::size_t ManifestWorkspace::at(const std::string& name) const {
  auto it = offsets.find(name);
  if (it != offsets.end()) return it->second;
  std::fprintf(stderr, "the package's manifest lists no workspace region '%s'\n", name.c_str());
  std::exit(1);
}

ManifestWorkspace manifestWorkspace(const std::string& dir, const dgps::launch::ProblemShape& s,
                                    const dgps::launch::TileConfig& t, long long L) {
  try {
    const dgps::Package pkg = dgps::Package::open(dir);
    dgps::ForwardProblem p;
    p.batch = s.B;
    p.seq_len = s.T;  // already the kernels' row axis (row_steps 1)
    p.num_seqs = s.N;
    p.heads_qk = s.H;
    p.heads_v = s.HV;
    p.key_dim = s.K;
    p.value_dim = s.V;
    p.varlen = s.varlen != 0;
    p.input_dtype = s.f16 ? dgps::ScalarType::F16 : dgps::ScalarType::BF16;
    const dgps::detail::ForwardGeometry g = L >= 1 ? dgps::detail::forwardGeometrySegmented(pkg, p, t, L)
                                                   : dgps::detail::forwardGeometry(pkg, p, t);
    const dgps::LaunchRules& rules = pkg.manifest().launch;
    ManifestWorkspace w;
    w.bytes = g.workspace_bytes;
    for (int i = 0; i < g.buffers; ++i) {
      const std::size_t k = std::size_t(i);
      const std::string& name = k < rules.workspace.size() ? rules.workspace[k].name
                                                           : rules.workspace_segmented[k - rules.workspace.size()].name;
      w.offsets[name] = g.buffer_offsets[k];
      w.ordered.push_back(g.buffer_offsets[k]);
    }
    return w;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: the manifest's workspace: %s\n", dir.c_str(), e.what());
    std::exit(1);
  }
}

void setWorkspaceOffsets(dgps::ForwardArgs& a, const ManifestWorkspace& W) {
  if (W.ordered.size() > std::size_t(dgps::kMaxWorkspaceRegions)) {
    std::fprintf(stderr, "the manifest lists %zu workspace regions, the kernels take at most %d\n", W.ordered.size(),
                 dgps::kMaxWorkspaceRegions);
    std::exit(1);
  }
  for (std::size_t i = 0; i < std::size(a.workspace_offsets); ++i)
    a.workspace_offsets[i] = i < W.ordered.size() ? (int64_t)W.ordered[i] : 0;
}

bool encodeWorkspaceMaps(dgps::ForwardArgs& a, const ManifestWorkspace& W, const dgps::launch::ProblemShape& s,
                         int chunk) {
  const int KP = dgps::launch::pad16((int)s.K);
  const long long rows = dgps::launch::chunkSlots(s, chunk) * s.HV * chunk;
  const dgps::launch::TensorMapShape m = dgps::launch::workspaceCoreMapShape(rows, chunk, KP);
  bool any = false;
  auto region = [&](dgps::TmaDescriptor& map, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      auto it = W.offsets.find(n);
      if (it == W.offsets.end()) continue;
      encode_tensor_map(map.opaque, static_cast<unsigned char*>(a.workspace) + it->second, 3, m.dims, m.strides,
                        m.box, 2);
      any = true;
      return;
    }
  };
  region(a.wsq_core, {"opq", "pwq"});
  region(a.wsk_core, {"opk"});
  region(a.wsw_core, {"opw", "pwk"});
  if (any) a.row_maps |= 4;
  return any;
}

}  // namespace dgps_emu
