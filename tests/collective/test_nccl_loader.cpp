// The NCCL loader's errors (NcclCollective.h): a missing library, a library lacking an entry point, one
// too old, and, through a complete fake, the rank bookkeeping and the all-gather path of NcclCollective.
// The real libnccl.so.2, when installed, must load and report 2.14 or newer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dgps/runtime/Error.h"
#include "dgps/runtime/NcclCollective.h"

namespace dgps {
namespace {

/// Sets DGPS_NCCL_LIBRARY for one scope (the loader reads it on every call).
class NcclLibrary {
 public:
  explicit NcclLibrary(const char* path) { setenv("DGPS_NCCL_LIBRARY", path, 1); }
  ~NcclLibrary() { unsetenv("DGPS_NCCL_LIBRARY"); }
};

/// The RuntimeError `f` throws: its code and message (fails the test when nothing is thrown).
template <typename F>
std::pair<RuntimeErrorCode, std::string> errorOf(F&& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "expected a RuntimeError";
  return {RuntimeErrorCode::Io, ""};
}

TEST(NcclLoader, MissingLibraryNamesThePathAndTheVariable) {
  NcclLibrary lib("/nonexistent/libnccl.so.2");
  std::string why;
  EXPECT_FALSE(ncclAvailable(&why));
  auto [code, msg] = errorOf([] { ncclVersion(); });
  EXPECT_EQ(code, RuntimeErrorCode::Collective);
  EXPECT_EQ(msg, why);
  EXPECT_NE(msg.find("NCCL not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent/libnccl.so.2 (DGPS_NCCL_LIBRARY)"), std::string::npos) << msg;
  // Every entry point fails the same way, before touching a communicator.
  EXPECT_EQ(errorOf([] { NcclCollective::uniqueId(); }).second, msg);
  EXPECT_EQ(errorOf([] { NcclCollective::create(NcclUniqueId{}, 2, 0); }).second, msg);
}

TEST(NcclLoader, MissingEntryPointIsNamed) {
  NcclLibrary lib(DGPS_FAKE_NCCL_MISSING);
  auto [code, msg] = errorOf([] { ncclVersion(); });
  EXPECT_EQ(code, RuntimeErrorCode::Collective);
  EXPECT_NE(msg.find("has no entry point ncclAllGather"), std::string::npos) << msg;
}

TEST(NcclLoader, TooOldVersionIsNamed) {
  NcclLibrary lib(DGPS_FAKE_NCCL_OLD);
  auto [code, msg] = errorOf([] { ncclVersion(); });
  EXPECT_EQ(code, RuntimeErrorCode::Collective);
  EXPECT_NE(msg.find("is NCCL 2.13.5, expected 2.14 or newer"), std::string::npos) << msg;
}

TEST(NcclLoader, CreateChecksRanksAndGathersThroughTheLibrary) {
  NcclLibrary lib(DGPS_FAKE_NCCL_OK);
  EXPECT_EQ(ncclVersion(), 22703);
  const NcclUniqueId id = NcclCollective::uniqueId();
  EXPECT_EQ(errorOf([&] { NcclCollective::create(id, 2, 2); }).first, RuntimeErrorCode::InvalidArgument);
  EXPECT_EQ(errorOf([&] { NcclCollective::create(id, 0, 0); }).first, RuntimeErrorCode::InvalidArgument);

  auto one = NcclCollective::create(id, 1, 0);
  EXPECT_EQ(one->size(), 1);
  EXPECT_EQ(one->rank(), 0);
  std::mt19937 rng(std::random_device{}());
  std::vector<unsigned char> send(37), recv(37, 0xEE);  // recv poisoned
  for (auto& b : send) b = static_cast<unsigned char>(rng());
  one->allGather(send.data(), send.size(), recv.data(), recv.size(), nullptr);
  EXPECT_EQ(recv, send);
  // A recv of the wrong size is refused before NCCL sees it.
  auto [code, msg] = errorOf([&] { one->allGather(send.data(), send.size(), recv.data(), 36, nullptr); });
  EXPECT_EQ(code, RuntimeErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("buffer size mismatch"), std::string::npos) << msg;

  // NCCL's own errors come back as RuntimeError{Collective} with its error string: the fake refuses to
  // gather across ranks it cannot reach.
  auto second = NcclCollective::create(id, 2, 1);
  std::vector<unsigned char> two(74);
  auto [code2, msg2] = errorOf([&] { second->allGather(send.data(), 37, two.data(), 74, nullptr); });
  EXPECT_EQ(code2, RuntimeErrorCode::Collective);
  EXPECT_NE(msg2.find("ncclAllGather failed: fake NCCL: invalid usage"), std::string::npos) << msg2;
}

TEST(NcclLoader, NonBlockingCommunicatorIsPolledToCompletion) {
  NcclLibrary lib(DGPS_FAKE_NCCL_OK);
  NcclUniqueId id = NcclCollective::uniqueId();
  id.bytes[1] = 'n';  // the fake's non-blocking communicator: ncclInProgress, then three polls
  auto one = NcclCollective::create(id, 1, 0);
  std::vector<unsigned char> send(19), recv(19, 0xEE);
  std::iota(send.begin(), send.end(), 1);
  one->allGather(send.data(), send.size(), recv.data(), recv.size(), nullptr);
  EXPECT_EQ(recv, send);
}

TEST(NcclLoader, WrapChecksTheCommunicatorsGroup) {
  NcclLibrary lib(DGPS_FAKE_NCCL_OK);
  auto owner = NcclCollective::create(NcclCollective::uniqueId(), 4, 3);  // owns the fake communicator
  auto wrapped = NcclCollective::wrap(owner->comm(), 4, 3);
  EXPECT_EQ(wrapped->size(), 4);
  EXPECT_EQ(wrapped->rank(), 3);
  auto [code, msg] = errorOf([&] { NcclCollective::wrap(owner->comm(), 8); });
  EXPECT_EQ(code, RuntimeErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("expected 8 ranks, the collective has 4"), std::string::npos) << msg;
  auto [code2, msg2] = errorOf([&] { NcclCollective::wrap(owner->comm(), 4, 1); });
  EXPECT_EQ(code2, RuntimeErrorCode::InvalidArgument);
  EXPECT_NE(msg2.find("expected rank 1, the collective is rank 3"), std::string::npos) << msg2;
  EXPECT_EQ(errorOf([] { NcclCollective::wrap(nullptr); }).first, RuntimeErrorCode::InvalidArgument);
}

TEST(NcclLoader, InstalledNcclLoads) {
  std::string why;
  if (!ncclAvailable(&why)) GTEST_SKIP() << "no usable libnccl.so.2 on this machine: " << why;
  EXPECT_GE(ncclVersion(), 21400);
}

}  // namespace
}  // namespace dgps
