// Collective over NCCL, loaded at run time with dlopen like the CUDA driver (CudaDriver.h): the runtime
// has no build-time NCCL dependency, so the same binaries start where NCCL is absent and only a
// context-parallel call fails there, with RuntimeError{Collective} naming why.
//
// The library is libnccl.so.2, or the path in the environment variable DGPS_NCCL_LIBRARY (read at every
// call that needs NCCL; each path is loaded once and kept). A communicator given to wrap() must come from
// that same library (the one torch.distributed loaded: same soname, so the dynamic loader shares it). It must export every entry point used here (ncclGetVersion, ncclGetErrorString,
// ncclGetUniqueId, ncclCommInitRank, ncclCommFinalize, ncclCommDestroy, ncclCommCount, ncclCommUserRank,
// ncclCommGetAsyncError, ncclAllGather) and be NCCL 2.14 or newer (the first release with
// ncclCommFinalize).
//
// A host application that already has a communicator (e.g. torch.distributed's NCCL process group)
// passes it to wrap(); otherwise rank 0 makes a unique id, sends its bytes to every rank by any means,
// and each rank calls create().
#pragma once

#include <array>
#include <memory>
#include <string>

#include "dgps/runtime/Collective.h"

struct ncclComm;  // NCCL's opaque communicator: ncclComm_t is ncclComm*

namespace dgps {

struct NcclApi;  // the entry points of one loaded NCCL library (NcclCollective.cpp)

/// The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES = 128).
struct NcclUniqueId {
  std::array<char, 128> bytes{};
};

/// NCCL's version as loaded, e.g. 22703 for 2.27.3 (ncclGetVersion). Loads the library on first use;
/// thread-safe. Throws RuntimeError{Collective} when it cannot be loaded, lacks an entry point or is
/// older than 2.14.
int ncclVersion();

/// True when ncclVersion() succeeds; otherwise false with its message. Never throws.
bool ncclAvailable(std::string* reason = nullptr);

class NcclCollective final : public Collective {
 public:
  /// Wraps a communicator the host created; it is neither finalized nor destroyed here. When
  /// expectedSize / expectedRank are >= 0 they are checked against the communicator's count and rank
  /// (RuntimeError{InvalidArgument} on a mismatch). Throws RuntimeError{InvalidArgument} on a null comm.
  static std::unique_ptr<NcclCollective> wrap(ncclComm* comm, int expectedSize = -1, int expectedRank = -1);

  /// A fresh unique id (ncclGetUniqueId), made on one rank and shared with the others.
  static NcclUniqueId uniqueId();

  /// Creates and owns a communicator of `size` ranks for `rank` on the current CUDA device
  /// (ncclCommInitRank: collective, every rank must call it). Throws RuntimeError{InvalidArgument} when
  /// rank is outside [0, size), RuntimeError{Collective} when NCCL fails.
  static std::unique_ptr<NcclCollective> create(const NcclUniqueId& id, int size, int rank);

  ~NcclCollective() override;
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ncclComm* comm() const { return comm_; }

 protected:
  /// ncclAllGather of `bytes` int8 elements on `stream`. Throws RuntimeError{Collective} with NCCL's
  /// error string (and the communicator's asynchronous error, if any).
  void doAllGather(const void* send, void* recv, std::size_t bytes, CUstream stream) override;

 private:
  NcclCollective(const NcclApi& api, ncclComm* comm, bool owned);
  const NcclApi* api_ = nullptr;
  ncclComm* comm_ = nullptr;
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace dgps
