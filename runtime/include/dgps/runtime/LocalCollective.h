// G simulated ranks in one process: one LocalCollective per rank, all sharing a group. The simulated-rank
// tests run every rank's piece in one process (one GPU, or the CPU with host memory) and gather the
// summaries through it exactly as a multi-GPU run gathers them through NCCL.
//
// Completion rule (the one difference from a real collective): a gather completes when the LAST rank of
// the group calls allGather; earlier callers return at once and their recv is written then. So ranks may
// call from one thread, one after the other. With device memory the copies are enqueued, at that moment,
// on every rank's stream, after events recorded on each rank's stream when it called (the copies wait
// for every send buffer), and every rank's stream then waits for all copies that read its send buffer.
// Between its own call and the last rank's call a rank must not enqueue work on its stream that reads
// recv or writes send (a simulated-rank test calls allGather for ranks 0..G-1 in a loop, then goes on).
// The group is thread-safe: ranks may also call from their own threads, but a rank must not read recv
// until every rank has called (join the threads first): an earlier caller returns before its recv is written.
#pragma once

#include <memory>
#include <vector>

#include "dgps/runtime/Collective.h"

namespace dgps {

/// Where a local group's buffers live.
enum class LocalMemory {
  Device,  ///< device memory of one context, copied with cuMemcpyDtoDAsync on the ranks' streams
  Host,    ///< host memory, copied with memcpy when the gather completes; the stream must be null
};

class LocalCollective final : public Collective {
 public:
  /// The G ranks of a new group, rank r at index r. Throws RuntimeError{InvalidArgument} when G < 1.
  static std::vector<std::unique_ptr<LocalCollective>> group(int size, LocalMemory memory);

  int rank() const override { return rank_; }
  int size() const override;

  struct Group;  // shared state of one group (LocalCollective.cpp)

 protected:
  /// Records this rank's call; the last rank's call performs the gather. Throws
  /// RuntimeError{InvalidArgument} when this rank already called in the pending gather, when its bytes
  /// differ from those of an earlier caller ("buffer size mismatch", the pending gather is abandoned),
  /// or a host group gets a non-null stream; RuntimeError{Cuda} when a copy cannot be enqueued.
  void doAllGather(const void* send, void* recv, std::size_t bytes, CUstream stream) override;

 private:
  LocalCollective(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  std::shared_ptr<Group> group_;
  int rank_ = 0;
};

}  // namespace dgps
