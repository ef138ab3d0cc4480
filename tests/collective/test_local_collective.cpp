// LocalCollective of host memory (LocalCollective.h): G simulated ranks gather in rank order whatever
// order they call in, from one thread or several; in place; and each misuse is one clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dgps/runtime/Error.h"
#include "dgps/runtime/LocalCollective.h"

namespace dgps {
namespace {

constexpr unsigned char kPoison = 0xEE;

std::vector<std::vector<unsigned char>> randomSends(int G, std::size_t bytes, std::mt19937& rng) {
  std::vector<std::vector<unsigned char>> sends(G, std::vector<unsigned char>(bytes));
  for (auto& s : sends)
    for (auto& b : s) b = static_cast<unsigned char>(rng());
  return sends;
}

void expectGathered(const std::vector<std::vector<unsigned char>>& sends, const std::vector<unsigned char>& recv) {
  const std::size_t bytes = sends[0].size();
  for (std::size_t j = 0; j < sends.size(); ++j)
    EXPECT_TRUE(std::equal(sends[j].begin(), sends[j].end(), recv.begin() + j * bytes)) << "slot " << j;
}

template <typename F>
std::string messageOf(F&& f, RuntimeErrorCode expected) {
  try {
    f();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a RuntimeError";
  return "";
}

TEST(LocalCollective, GathersInRankOrderWhateverTheCallOrder) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int G : {1, 2, 3, 8}) {
    auto ranks = LocalCollective::group(G, LocalMemory::Host);
    for (int round = 0; round < 3; ++round) {  // the group is reusable
      const std::size_t bytes = 1 + rng() % 300;
      auto sends = randomSends(G, bytes, rng);
      std::vector<std::vector<unsigned char>> recvs(G, std::vector<unsigned char>(G * bytes, kPoison));
      std::vector<int> order(G);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (int k = 0; k < G; ++k) {
        const int r = order[k];
        EXPECT_EQ(ranks[r]->rank(), r);
        EXPECT_EQ(ranks[r]->size(), G);
        ranks[r]->allGather(sends[r].data(), bytes, recvs[r].data(), G * bytes, nullptr);
        // Nothing arrives before the last rank calls.
        if (k + 1 < G)
          EXPECT_TRUE(std::all_of(recvs[r].begin(), recvs[r].end(), [](unsigned char b) { return b == kPoison; }));
      }
      for (int r = 0; r < G; ++r) expectGathered(sends, recvs[r]);
    }
  }
}

TEST(LocalCollective, RanksOnTheirOwnThreads) {
  std::mt19937 rng(std::random_device{}());
  const int G = 4;
  const std::size_t bytes = 64;
  auto ranks = LocalCollective::group(G, LocalMemory::Host);
  auto sends = randomSends(G, bytes, rng);
  std::vector<std::vector<unsigned char>> recvs(G, std::vector<unsigned char>(G * bytes, kPoison));
  std::vector<std::thread> threads;
  for (int r = 0; r < G; ++r)
    threads.emplace_back([&, r] { ranks[r]->allGather(sends[r].data(), bytes, recvs[r].data(), G * bytes, nullptr); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < G; ++r) expectGathered(sends, recvs[r]);
}

TEST(LocalCollective, InPlace) {
  std::mt19937 rng(std::random_device{}());
  const int G = 3;
  const std::size_t bytes = 40;
  auto ranks = LocalCollective::group(G, LocalMemory::Host);
  auto sends = randomSends(G, bytes, rng);
  std::vector<std::vector<unsigned char>> recvs(G, std::vector<unsigned char>(G * bytes, kPoison));
  for (int r = 0; r < G; ++r) std::copy(sends[r].begin(), sends[r].end(), recvs[r].begin() + r * bytes);
  for (int r = 0; r < G; ++r)
    ranks[r]->allGather(recvs[r].data() + r * bytes, bytes, recvs[r].data(), G * bytes, nullptr);
  for (int r = 0; r < G; ++r) expectGathered(sends, recvs[r]);
}

TEST(LocalCollective, MisuseIsOneClearError) {
  const int G = 2;
  auto ranks = LocalCollective::group(G, LocalMemory::Host);
  std::vector<unsigned char> send(16, 1), recv(32, kPoison), other(64, kPoison);
  auto inv = RuntimeErrorCode::InvalidArgument;

  std::string m = messageOf([&] { ranks[0]->allGather(send.data(), 16, recv.data(), 31, nullptr); }, inv);
  EXPECT_NE(m.find("buffer size mismatch on rank 0: recv holds 31 bytes, expected size() * sendBytes = 2 * 16"),
            std::string::npos)
      << m;
  m = messageOf([&] { ranks[0]->allGather(send.data(), 16, nullptr, 32, nullptr); }, inv);
  EXPECT_NE(m.find("null recv"), std::string::npos) << m;
  m = messageOf([&] { ranks[0]->allGather(recv.data() + 8, 16, recv.data(), 32, nullptr); }, inv);
  EXPECT_NE(m.find("send overlaps recv"), std::string::npos) << m;
  m = messageOf([&] { ranks[0]->allGather(send.data(), 16, recv.data(), 32, reinterpret_cast<CUstream>(1)); }, inv);
  EXPECT_NE(m.find("expected a null stream"), std::string::npos) << m;

  // Ranks disagreeing on the size: the second caller is told, the gather is abandoned, the group reusable.
  ranks[0]->allGather(send.data(), 16, recv.data(), 32, nullptr);
  m = messageOf([&] { ranks[1]->allGather(send.data(), 32, other.data(), 64, nullptr); }, inv);
  EXPECT_NE(m.find("rank 1: buffer size mismatch: gathers 32 bytes, an earlier rank of the same gather 16"),
            std::string::npos)
      << m;
  EXPECT_TRUE(std::all_of(recv.begin(), recv.end(), [](unsigned char b) { return b == kPoison; }));
  // A rank calling twice before the others.
  ranks[1]->allGather(send.data(), 16, recv.data(), 32, nullptr);
  m = messageOf([&] { ranks[1]->allGather(send.data(), 16, recv.data(), 32, nullptr); }, inv);
  EXPECT_NE(m.find("rank 1: called allGather twice"), std::string::npos) << m;
  ranks[0]->allGather(send.data(), 16, other.data(), 32, nullptr);  // completes the pending gather
  EXPECT_TRUE(std::all_of(other.begin(), other.begin() + 32, [](unsigned char b) { return b == 1; }));

  m = messageOf([] { LocalCollective::group(0, LocalMemory::Host); }, inv);
  EXPECT_NE(m.find("expected size >= 1, got 0"), std::string::npos) << m;
  m = messageOf([&] { requireGroup(*ranks[1], 4, 1, "context parallel plan"); }, inv);
  EXPECT_NE(m.find("context parallel plan: expected 4 ranks, the collective has 2"), std::string::npos) << m;
  m = messageOf([&] { requireGroup(*ranks[1], 2, 0, "context parallel plan"); }, inv);
  EXPECT_NE(m.find("expected rank 0, the collective is rank 1"), std::string::npos) << m;
}

}  // namespace
}  // namespace dgps
