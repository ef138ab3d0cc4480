// The checks every all-gather goes through before its transport (Collective.h).
#include "dgps/runtime/Collective.h"

#include <cstdint>
#include <string>

#include "dgps/runtime/Error.h"

namespace dgps {

namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw RuntimeError(RuntimeErrorCode::InvalidArgument, "allGather: " + what);
}

}  // namespace

void Collective::allGather(const void* send, std::size_t sendBytes, void* recv, std::size_t recvBytes,
                           CUstream stream) {
  const int G = size(), r = rank();
  if (G < 1 || r < 0 || r >= G)
    invalid("the collective reports rank " + std::to_string(r) + " of size " + std::to_string(G) +
            " (expected 0 <= rank < size)");
  if (sendBytes > SIZE_MAX / static_cast<std::size_t>(G) || recvBytes != sendBytes * G)
    invalid("buffer size mismatch on rank " + std::to_string(r) + ": recv holds " + std::to_string(recvBytes) +
            " bytes, expected size() * sendBytes = " + std::to_string(G) + " * " + std::to_string(sendBytes));
  if (sendBytes == 0) return;
  if (!send || !recv) invalid(std::string("null ") + (send ? "recv" : "send") + " buffer on rank " + std::to_string(r));
  const auto s = reinterpret_cast<std::uintptr_t>(send), d = reinterpret_cast<std::uintptr_t>(recv);
  const bool inPlace = s == d + static_cast<std::uintptr_t>(r) * sendBytes;
  if (!inPlace && s < d + recvBytes && d < s + sendBytes)
    invalid("send overlaps recv on rank " + std::to_string(r) +
            " (expected disjoint buffers, or send == recv + rank * sendBytes for an in-place gather)");
  doAllGather(send, recv, sendBytes, stream);
}

void requireGroup(const Collective& collective, int expectedSize, int expectedRank, const char* what) {
  if (collective.size() != expectedSize)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string(what) + ": expected " + std::to_string(expectedSize) +
                           " ranks, the collective has " + std::to_string(collective.size()));
  if (expectedRank >= 0 && collective.rank() != expectedRank)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string(what) + ": expected rank " + std::to_string(expectedRank) +
                           ", the collective is rank " + std::to_string(collective.rank()));
}

}  // namespace dgps
