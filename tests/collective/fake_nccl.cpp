// A fake NCCL for the loader tests (built three ways, see CMakeLists.txt): the entry points NcclCollective
// resolves, with NCCL's C ABI. Communicators are one-rank or, for the rank checks, of any size; the
// all-gather copies host memory and works only for a one-rank communicator (ncclInvalidUsage otherwise;
// ncclInProgress first for a "non-blocking" one),
// so NcclCollective's plumbing runs on a machine without a GPU. Not a model of NCCL's semantics.
#include <cstddef>
#include <cstring>

#ifndef DGPS_FAKE_NCCL_VERSION
#define DGPS_FAKE_NCCL_VERSION 22703
#endif

namespace {
struct FakeComm {
  int nranks;
  int rank;
  bool nonBlocking;   ///< made from an id whose byte 1 is 'n': gathers answer ncclInProgress first
  int pendingPolls;   ///< ncclCommGetAsyncError answers ncclInProgress this many more times
};
struct UniqueId {
  char internal[128];
};
constexpr int kSuccess = 0, kInvalidArgument = 4, kInvalidUsage = 5, kInProgress = 7;
}  // namespace

struct ncclComm : FakeComm {};

extern "C" {

int ncclGetVersion(int* version) {
  *version = DGPS_FAKE_NCCL_VERSION;
  return kSuccess;
}

const char* ncclGetErrorString(int result) {
  return result == kInvalidUsage ? "fake NCCL: invalid usage" : "fake NCCL: error";
}

int ncclGetUniqueId(UniqueId* id) {
  std::memset(id->internal, 0x5a, sizeof id->internal);
  return kSuccess;
}

// A rank of any size may be made: the tests check NcclCollective's rank/size bookkeeping.
int ncclCommInitRank(ncclComm** comm, int nranks, UniqueId id, int rank) {
  if (id.internal[0] != 0x5a || nranks < 1 || rank < 0 || rank >= nranks) return kInvalidArgument;
  *comm = new ncclComm{{nranks, rank, id.internal[1] == 'n', 0}};
  return kSuccess;
}

int ncclCommFinalize(ncclComm*) { return kSuccess; }

int ncclCommDestroy(ncclComm* comm) {
  delete comm;
  return kSuccess;
}

int ncclCommCount(ncclComm* comm, int* count) {
  *count = comm->nranks;
  return kSuccess;
}

int ncclCommUserRank(ncclComm* comm, int* rank) {
  *rank = comm->rank;
  return kSuccess;
}

int ncclCommGetAsyncError(ncclComm* comm, int* error) {
  *error = comm->pendingPolls > 0 ? kInProgress : kSuccess;
  if (comm->pendingPolls > 0) --comm->pendingPolls;
  return kSuccess;
}

#ifndef DGPS_FAKE_NCCL_NO_ALLGATHER
int ncclAllGather(const void* send, void* recv, std::size_t count, int datatype, ncclComm* comm, void*) {
  if (datatype != 0 || comm->nranks != 1) return kInvalidUsage;  // bytes (ncclInt8), one rank only
  if (send != recv) std::memcpy(recv, send, count);
  if (!comm->nonBlocking) return kSuccess;
  comm->pendingPolls = 3;
  return kInProgress;
}
#endif

}  // extern "C"
