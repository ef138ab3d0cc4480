// NCCL loaded at run time (NcclCollective.h). The few NCCL types used are declared here with NCCL's ABI
// (nccl.h of 2.14 and later): ncclResult_t and ncclDataType_t are C enums (int), ncclUniqueId a struct of
// 128 chars passed by value, ncclComm_t a pointer, cudaStream_t the driver's CUstream.
#include "dgps/runtime/NcclCollective.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>

#include "dgps/runtime/Error.h"

namespace dgps {

namespace {

using ncclResult = int;  // ncclResult_t
constexpr ncclResult kNcclSuccess = 0;
constexpr ncclResult kNcclInProgress = 7;  // a non-blocking communicator is still enqueueing
constexpr int kNcclInt8 = 0;  // ncclDataType_t ncclInt8: the gather counts bytes
struct ncclUniqueIdAbi {
  char internal[128];
};
static_assert(sizeof(ncclUniqueIdAbi) == sizeof(NcclUniqueId), "NCCL_UNIQUE_ID_BYTES is 128");

/// NCCL_VERSION(2, 14, 0): ncclCommFinalize first appears in 2.14.
constexpr int kMinVersion = 21400;

#define DGPS_NCCL_FUNCTIONS(X)                                                                      \
  X(ncclGetVersion, ncclResult(int*))                                                               \
  X(ncclGetErrorString, const char*(ncclResult))                                                    \
  X(ncclGetUniqueId, ncclResult(ncclUniqueIdAbi*))                                                  \
  X(ncclCommInitRank, ncclResult(ncclComm**, int, ncclUniqueIdAbi, int))                            \
  X(ncclCommFinalize, ncclResult(ncclComm*))                                                        \
  X(ncclCommDestroy, ncclResult(ncclComm*))                                                         \
  X(ncclCommCount, ncclResult(ncclComm*, int*))                                                     \
  X(ncclCommUserRank, ncclResult(ncclComm*, int*))                                                  \
  X(ncclCommGetAsyncError, ncclResult(ncclComm*, ncclResult*))                                      \
  X(ncclAllGather, ncclResult(const void*, void*, std::size_t, int, ncclComm*, CUstream))

}  // namespace

/// The resolved entry points of one loaded library.
struct NcclApi {
#define DGPS_NCCL_MEMBER(name, type) std::add_pointer_t<type> name = nullptr;
  DGPS_NCCL_FUNCTIONS(DGPS_NCCL_MEMBER)
#undef DGPS_NCCL_MEMBER
  int version = 0;
};

namespace {

struct LoadState {
  NcclApi nccl;
  bool ok = false;
  std::string error;
};

std::string versionText(int v) {
  // NCCL_VERSION: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9.
  const int major = v >= 10000 ? v / 10000 : v / 1000, minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

LoadState load(const std::string& path, bool fromEnv) {
  LoadState s;
  const std::string where = path + (fromEnv ? " (DGPS_NCCL_LIBRARY)" : "");
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    s.error = "NCCL not found: " + where + " could not be loaded (" + (why ? why : "dlopen failed") +
              "); context parallelism needs NCCL 2.14 or newer (set DGPS_NCCL_LIBRARY to its path)";
    return s;
  }
#define DGPS_NCCL_RESOLVE(name, type)                                                               \
  s.nccl.name = reinterpret_cast<std::add_pointer_t<type>>(dlsym(lib, #name));                      \
  if (!s.nccl.name) {                                                                               \
    s.error = "no usable NCCL: " + where + " has no entry point " #name " (expected NCCL 2.14 or newer)"; \
    return s;                                                                                       \
  }
  DGPS_NCCL_FUNCTIONS(DGPS_NCCL_RESOLVE)
#undef DGPS_NCCL_RESOLVE
  const ncclResult r = s.nccl.ncclGetVersion(&s.nccl.version);
  if (r != kNcclSuccess) {
    s.error = "no usable NCCL: ncclGetVersion of " + where + " failed with code " + std::to_string(r);
    return s;
  }
  if (s.nccl.version < kMinVersion) {
    s.error = "NCCL too old: " + where + " is NCCL " + versionText(s.nccl.version) +
              ", expected 2.14 or newer (ncclCommFinalize)";
    return s;
  }
  s.ok = true;
  return s;
}

/// The library DGPS_NCCL_LIBRARY names now (libnccl.so.2 when unset), loaded once per path and kept
/// loaded for the process: a communicator keeps using the library it was made with.
const NcclApi& nccl() {
  static std::mutex mutex;
  static std::map<std::string, LoadState> loaded;
  const char* env = std::getenv("DGPS_NCCL_LIBRARY");
  const bool fromEnv = env && *env;
  const std::string path = fromEnv ? env : "libnccl.so.2";
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) it = loaded.emplace(path, load(path, fromEnv)).first;
  if (!it->second.ok) throw RuntimeError(RuntimeErrorCode::Collective, it->second.error);
  return it->second.nccl;
}

void checkNccl(const NcclApi& n, ncclResult r, const char* what, ncclComm* comm = nullptr) {
  if (r == kNcclSuccess) return;
  std::string msg =
      std::string(what) + " failed: " + n.ncclGetErrorString(r) + " (ncclResult " + std::to_string(r) + ")";
  ncclResult async = kNcclSuccess;
  if (comm && n.ncclCommGetAsyncError(comm, &async) == kNcclSuccess && async != kNcclSuccess)
    msg += "; the communicator reports " + std::string(n.ncclGetErrorString(async));
  throw RuntimeError(RuntimeErrorCode::Collective, msg);
}

}  // namespace

int ncclVersion() { return nccl().version; }

bool ncclAvailable(std::string* reason) {
  try {
    nccl();
    return true;
  } catch (const RuntimeError& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

NcclCollective::NcclCollective(const NcclApi& api, ncclComm* comm, bool owned)
    : api_(&api), comm_(comm), owned_(owned) {
  checkNccl(api, api.ncclCommCount(comm_, &size_), "ncclCommCount", comm_);
  checkNccl(api, api.ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", comm_);
}

std::unique_ptr<NcclCollective> NcclCollective::wrap(ncclComm* comm, int expectedSize, int expectedRank) {
  if (!comm) throw RuntimeError(RuntimeErrorCode::InvalidArgument, "NcclCollective::wrap: null communicator");
  std::unique_ptr<NcclCollective> c(new NcclCollective(nccl(), comm, false));
  if (expectedSize >= 0) requireGroup(*c, expectedSize, expectedRank, "NcclCollective::wrap");
  return c;
}

NcclUniqueId NcclCollective::uniqueId() {
  const NcclApi& n = nccl();
  ncclUniqueIdAbi id{};
  checkNccl(n, n.ncclGetUniqueId(&id), "ncclGetUniqueId");
  NcclUniqueId out;
  std::memcpy(out.bytes.data(), id.internal, sizeof id.internal);
  return out;
}

std::unique_ptr<NcclCollective> NcclCollective::create(const NcclUniqueId& id, int size, int rank) {
  if (size < 1 || rank < 0 || rank >= size)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "NcclCollective::create: rank " + std::to_string(rank) +
                                                              " of size " + std::to_string(size) +
                                                              " (expected size >= 1 and 0 <= rank < size)");
  const NcclApi& n = nccl();
  ncclUniqueIdAbi abi;
  std::memcpy(abi.internal, id.bytes.data(), sizeof abi.internal);
  ncclComm* comm = nullptr;
  checkNccl(n, n.ncclCommInitRank(&comm, size, abi, rank), "ncclCommInitRank");
  std::unique_ptr<NcclCollective> c;
  try {
    c.reset(new NcclCollective(n, comm, true));
  } catch (...) {
    n.ncclCommDestroy(comm);
    throw;
  }
  requireGroup(*c, size, rank, "NcclCollective::create");  // NCCL itself guarantees it; cheap to confirm
  return c;
}

NcclCollective::~NcclCollective() {
  if (!owned_ || !comm_) return;
  // Finalize flushes outstanding operations; errors cannot propagate from a destructor.
  api_->ncclCommFinalize(comm_);
  api_->ncclCommDestroy(comm_);
}

void NcclCollective::doAllGather(const void* send, void* recv, std::size_t bytes, CUstream stream) {
  ncclResult r = api_->ncclAllGather(send, recv, bytes, kNcclInt8, comm_, stream);
  // A communicator made non-blocking by the host answers ncclInProgress until the operation is enqueued;
  // NCCL documents polling ncclCommGetAsyncError for the outcome.
  while (r == kNcclInProgress) {
    std::this_thread::yield();
    if (api_->ncclCommGetAsyncError(comm_, &r) != kNcclSuccess) break;
  }
  checkNccl(*api_, r, "ncclAllGather", comm_);
}

}  // namespace dgps
