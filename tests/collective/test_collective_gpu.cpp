// On one GPU (ctest gpu.collective): G simulated ranks gather device buffers through LocalCollective,
// one stream per rank, with work queued on the streams before and after the gather (stream order must
// hold), and NCCL gathers through a one-rank communicator made from a unique id.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/LocalCollective.h"
#include "dgps/runtime/NcclCollective.h"

namespace dgps {
namespace {

constexpr unsigned char kPoison = 0xEE;

/// A stream of the device's primary context, destroyed with the guard still current.
struct Stream {
  CUstream s = nullptr;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream() { checkCuda(cudaDriver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }
  ~Stream() { cudaDriver().cuStreamDestroy(s); }
};

TEST(CollectiveGpu, LocalGroupGathersDeviceBuffersInStreamOrder) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  DeviceContextGuard guard(0);
  const CudaDriver& d = cudaDriver();
  for (int G : {2, 4, 8}) {
    SCOPED_TRACE("G=" + std::to_string(G));
    const std::size_t bytes = 4096 + 4 * (rng() % 1000);
    auto ranks = LocalCollective::group(G, LocalMemory::Device);
    std::vector<Stream> streams(G);
    std::vector<DeviceBuffer> send, recv;
    std::vector<std::vector<unsigned char>> host(G, std::vector<unsigned char>(bytes));
    for (int r = 0; r < G; ++r) {
      for (auto& b : host[r]) b = static_cast<unsigned char>(rng());
      send.emplace_back(0, bytes);
      recv.emplace_back(0, G * bytes);
      // Queued on the rank's stream before its gather: the gather must see these bytes, not the poison.
      checkCuda(d.cuMemsetD8Async(send[r].ptr(), kPoison, bytes, streams[r].s), "cuMemsetD8Async");
      checkCuda(d.cuMemsetD8Async(recv[r].ptr(), kPoison, G * bytes, streams[r].s), "cuMemsetD8Async");
      checkCuda(d.cuMemcpyHtoDAsync(send[r].ptr(), host[r].data(), bytes, streams[r].s), "cuMemcpyHtoDAsync");
    }
    for (int r = 0; r < G; ++r) ranks[r]->allGather(send[r].data(), bytes, recv[r].data(), G * bytes, streams[r].s);
    // Queued after the gather on each stream: overwriting a send buffer must not reach any other rank.
    for (int r = 0; r < G; ++r)
      checkCuda(d.cuMemsetD8Async(send[r].ptr(), 0, bytes, streams[r].s), "cuMemsetD8Async");
    for (int r = 0; r < G; ++r) {
      std::vector<unsigned char> got(G * bytes);
      checkCuda(d.cuMemcpyDtoHAsync(got.data(), recv[r].ptr(), G * bytes, streams[r].s), "cuMemcpyDtoHAsync");
      checkCuda(d.cuStreamSynchronize(streams[r].s), "cuStreamSynchronize");
      for (int j = 0; j < G; ++j)
        EXPECT_TRUE(std::equal(host[j].begin(), host[j].end(), got.begin() + j * bytes))
            << "rank " << r << " slot " << j;
    }
  }
}

TEST(CollectiveGpu, OneRankNcclCommunicatorGathers) {
  std::string why;
  if (!ncclAvailable(&why)) GTEST_SKIP() << "NCCL not usable here: " << why;
  DeviceContextGuard guard(0);
  const CudaDriver& d = cudaDriver();
  auto nccl = NcclCollective::create(NcclCollective::uniqueId(), 1, 0);
  ASSERT_EQ(nccl->size(), 1);
  std::mt19937 rng(std::random_device{}());
  const std::size_t bytes = 1000;
  std::vector<unsigned char> host(bytes), got(bytes);
  for (auto& b : host) b = static_cast<unsigned char>(rng());
  Stream stream;
  DeviceBuffer send(0, bytes), recv(0, bytes);
  checkCuda(d.cuMemsetD8Async(recv.ptr(), kPoison, bytes, stream.s), "cuMemsetD8Async");
  checkCuda(d.cuMemcpyHtoDAsync(send.ptr(), host.data(), bytes, stream.s), "cuMemcpyHtoDAsync");
  nccl->allGather(send.data(), bytes, recv.data(), bytes, stream.s);
  checkCuda(d.cuMemcpyDtoHAsync(got.data(), recv.ptr(), bytes, stream.s), "cuMemcpyDtoHAsync");
  checkCuda(d.cuStreamSynchronize(stream.s), "cuStreamSynchronize");
  EXPECT_EQ(got, host);
}

}  // namespace
}  // namespace dgps
