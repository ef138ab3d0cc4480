// The collective the runtime needs for context parallelism (docs/context_parallel.md): an all-gather of
// one device buffer per rank, ordered on a CUDA stream. Host applications pass the runtime a Collective:
// NcclCollective (NcclCollective.h) wraps an NCCL communicator loaded at run time, LocalCollective
// (LocalCollective.h) simulates G ranks in one process, and an application with its own transport
// implements doAllGather itself.
//
// No barrier is part of the interface: the context-parallel forward needs only the gather, and stream
// order makes every later use of the gathered buffer wait for it.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace dgps {

class Collective {
 public:
  virtual ~Collective() = default;

  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks G >= 1.
  virtual int size() const = 0;

  /// All-gather: every rank sends `sendBytes` bytes and receives every rank's bytes in rank order,
  ///   recv[j · sendBytes, (j+1) · sendBytes) = rank j's send,   for j in [0, size()),
  /// so recvBytes must equal size() · sendBytes. Every rank of the group calls it with the same
  /// sendBytes. Buffers are device memory (a LocalCollective of host memory excepted); send may be the
  /// rank's own slot of recv (in place, send == recv + rank() · sendBytes), otherwise the two must not
  /// overlap. The operation is enqueued on `stream`: it starts after the work enqueued on it before the
  /// call, and work enqueued after the call sees the gathered data; the call itself may return before
  /// the data arrives. sendBytes == 0 does nothing.
  /// Throws RuntimeError{InvalidArgument} when recvBytes != size() · sendBytes, a buffer is null or the
  /// buffers overlap (nothing is enqueued), and RuntimeError{Collective} when the transport fails.
  void allGather(const void* send, std::size_t sendBytes, void* recv, std::size_t recvBytes, CUstream stream);

 protected:
  /// The transport: called by allGather after the checks above, with bytes > 0.
  virtual void doAllGather(const void* send, void* recv, std::size_t bytes, CUstream stream) = 0;
};

/// Throws RuntimeError{InvalidArgument} "`what`: expected G ranks, the collective has size()" (or the
/// same for a rank) when the collective's group is not the expected one; expectedRank < 0 checks only
/// the size. Used where a plan computed for G ranks meets the collective that will run it.
void requireGroup(const Collective& collective, int expectedSize, int expectedRank, const char* what);

}  // namespace dgps
