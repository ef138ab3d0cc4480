// G simulated ranks in one process (LocalCollective.h): the last caller of a gather performs it.
#include "dgps/runtime/LocalCollective.h"

#include <cstring>
#include <mutex>
#include <string>

#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"

namespace dgps {

namespace {

/// One rank's call in the pending gather.
struct Call {
  bool posted = false;
  const void* send = nullptr;
  void* recv = nullptr;
  CUstream stream = nullptr;
  CUevent ready = nullptr;  ///< device groups: recorded on `stream` when the rank called
};

[[noreturn]] void invalid(int rank, const std::string& what) {
  throw RuntimeError(RuntimeErrorCode::InvalidArgument, "LocalCollective rank " + std::to_string(rank) + ": " + what);
}

CUevent recordEvent(CUstream stream) {
  const CudaDriver& d = cudaDriver();
  CUevent e = nullptr;
  checkCuda(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate (LocalCollective)");
  const CUresult r = d.cuEventRecord(e, stream);
  if (r != CUDA_SUCCESS) {
    d.cuEventDestroy(e);
    checkCuda(r, "cuEventRecord (LocalCollective)");
  }
  return e;
}

}  // namespace

struct LocalCollective::Group {
  int size = 0;
  LocalMemory memory = LocalMemory::Host;
  std::mutex mutex;
  std::vector<Call> calls;
  int posted = 0;
  std::size_t bytes = 0;  ///< of the pending gather's first caller

  /// Drops the pending gather (after a mismatch): releases its events, forgets its calls.
  void abandon() {
    for (Call& c : calls) {
      if (c.ready) cudaDriver().cuEventDestroy(c.ready);
      c = Call{};
    }
    posted = 0;
  }

  void copyHost() {
    for (int i = 0; i < size; ++i)
      for (int j = 0; j < size; ++j) {
        char* dst = static_cast<char*>(calls[i].recv) + static_cast<std::size_t>(j) * bytes;
        if (dst != calls[j].send) std::memcpy(dst, calls[j].send, bytes);
      }
  }

  /// Rank i's copies on its stream after every rank's `ready`; then every stream waits for all copies.
  void copyDevice() {
    const CudaDriver& d = cudaDriver();
    std::vector<CUevent> done;
    for (int i = 0; i < size; ++i) {
      for (int j = 0; j < size; ++j)
        if (j != i) checkCuda(d.cuStreamWaitEvent(calls[i].stream, calls[j].ready, 0), "cuStreamWaitEvent");
      for (int j = 0; j < size; ++j) {
        const CUdeviceptr dst = reinterpret_cast<CUdeviceptr>(calls[i].recv) + static_cast<std::size_t>(j) * bytes;
        const CUdeviceptr src = reinterpret_cast<CUdeviceptr>(calls[j].send);
        if (dst != src) checkCuda(d.cuMemcpyDtoDAsync(dst, src, bytes, calls[i].stream), "cuMemcpyDtoDAsync");
      }
      done.push_back(recordEvent(calls[i].stream));
    }
    for (int j = 0; j < size; ++j)
      for (int i = 0; i < size; ++i)
        if (i != j) checkCuda(d.cuStreamWaitEvent(calls[j].stream, done[i], 0), "cuStreamWaitEvent");
    for (CUevent e : done) d.cuEventDestroy(e);  // released once the waits complete
  }
};

std::vector<std::unique_ptr<LocalCollective>> LocalCollective::group(int size, LocalMemory memory) {
  if (size < 1)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "LocalCollective::group: expected size >= 1, got " + std::to_string(size));
  auto g = std::make_shared<Group>();
  g->size = size;
  g->memory = memory;
  g->calls.resize(static_cast<std::size_t>(size));
  std::vector<std::unique_ptr<LocalCollective>> ranks;
  for (int r = 0; r < size; ++r) ranks.emplace_back(new LocalCollective(g, r));
  return ranks;
}

int LocalCollective::size() const { return group_->size; }

void LocalCollective::doAllGather(const void* send, void* recv, std::size_t bytes, CUstream stream) {
  Group& g = *group_;
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.memory == LocalMemory::Host && stream)
    invalid(rank_, "a host-memory group copies on the calling thread; expected a null stream");
  Call& call = g.calls[rank_];
  if (call.posted)
    invalid(rank_, "called allGather twice in one gather (expected every rank of the group to call once before "
                   "any calls again)");
  if (g.posted > 0 && bytes != g.bytes) {
    const std::size_t expected = g.bytes;
    g.abandon();
    invalid(rank_, "buffer size mismatch: gathers " + std::to_string(bytes) + " bytes, an earlier rank of the "
                   "same gather " + std::to_string(expected) + " (the gather is abandoned)");
  }
  CUevent ready = g.memory == LocalMemory::Device ? recordEvent(stream) : nullptr;
  call = Call{true, send, recv, stream, ready};
  g.bytes = bytes;
  if (++g.posted < g.size) return;
  // The last rank: perform the gather, then reset the group for the next one whatever happens.
  struct Reset {
    Group& g;
    ~Reset() { g.abandon(); }
  } reset{g};
  if (g.memory == LocalMemory::Host)
    g.copyHost();
  else
    g.copyDevice();
}

}  // namespace dgps
