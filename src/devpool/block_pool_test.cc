#include "devpool/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "devpool/testing/test_util.h"

namespace tessera::devpool {
namespace {

constexpr std::uint64_t kBlock = 64 << 10;

struct Fixture {
  explicit Fixture(std::uint64_t blocks) : backend(makeHostBackend()) {
    auto p = BlockPool::create(*backend, {blocks * kBlock, kBlock});
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    if (p) pool = std::move(*p);
  }
  std::unique_ptr<DeviceBackend> backend;
  std::unique_ptr<BlockPool> pool;
};

TEST(BlockPool, AllocatesWholeBlocksAndGivesThemBack) {
  Fixture f(16);
  auto a = f.pool->allocate(3 * kBlock + 1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->blocks().size(), 4u);
  EXPECT_EQ(f.pool->stats().freeBlocks, 12u);
  auto zero = f.pool->allocate(0);
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->blocks().size(), 1u);  // even an empty model has a block to point at
  a->release();
  zero->release();
  EXPECT_EQ(f.pool->stats().freeBlocks, 16u);
  EXPECT_EQ(f.pool->stats().allocations, 0u);
  EXPECT_TRUE(f.pool->checkInvariants().has_value());
}

TEST(BlockPool, RefusesWhatExceedsTheFreeTotalAndSaysSo) {
  Fixture f(8);
  auto a = f.pool->allocate(6 * kBlock);
  ASSERT_TRUE(a.has_value());
  auto b = f.pool->allocate(3 * kBlock);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(b.error().message.find("2 of 8 are free"), std::string::npos) << b.error().message;
  EXPECT_TRUE(f.pool->allocate(2 * kBlock).has_value());
}

TEST(BlockPool, RejectsBadGeometry) {
  auto backend = makeHostBackend();
  EXPECT_FALSE(BlockPool::create(*backend, {1 << 20, 1000}).has_value());
  EXPECT_FALSE(BlockPool::create(*backend, {kBlock - 1, kBlock}).has_value());
  auto ok = BlockPool::create(*backend, {4 * kBlock, kBlock});
  ASSERT_TRUE(ok.has_value());
  // The backend's arena exists once: a second pool on it is refused.
  auto again = BlockPool::create(*backend, {4 * kBlock, kBlock});
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message.find("already allocated"), std::string::npos);
}

TEST(BlockPool, ExtentsFollowTheBlockTableAndMergeAdjacentBlocks) {
  Fixture f(8);
  auto a = f.pool->allocate(2 * kBlock);  // blocks 0, 1
  auto b = f.pool->allocate(2 * kBlock);  // blocks 2, 3
  auto c = f.pool->allocate(2 * kBlock);  // blocks 4, 5
  ASSERT_TRUE(a && b && c);
  b->release();
  auto d = f.pool->allocate(4 * kBlock);  // 2, 3 then 6, 7
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->blocks(), (std::vector<std::uint32_t>{2, 3, 6, 7}));
  const auto runs = d->extents(kBlock / 2, 3 * kBlock);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].arenaOffset, 2 * kBlock + kBlock / 2);
  EXPECT_EQ(runs[0].bytes, kBlock + kBlock / 2);
  EXPECT_EQ(runs[1].arenaOffset, 6 * kBlock);
  EXPECT_EQ(runs[1].bytes, kBlock + kBlock / 2);
}

// Thousands of random allocations and frees of mixed sizes: a request that fits the free
// total always succeeds, one that does not is refused, and the books stay consistent.
TEST(BlockPool, RandomCyclesNeverFragment) {
  const std::uint64_t seed = testing::testSeed();
  std::printf("BlockPool.RandomCyclesNeverFragment seed=%llu (TESSERA_SEED reproduces)\n",
              static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::Rng rng(seed);
  constexpr std::uint64_t kBlocks = 512;
  Fixture f(kBlocks);
  std::vector<BlockAllocation> live;
  int refused = 0, loaded = 0;
  for (int step = 0; step < 5000; ++step) {
    const bool doFree = !live.empty() && rng.between(0, 99) < 45;
    if (doFree) {
      const auto i = rng.between(0, live.size() - 1);
      std::swap(live[i], live.back());
      live.pop_back();
    } else {
      // Mixed sizes: small adapters, mid-size models, and ones near half the pool.
      const std::uint64_t kind = rng.between(0, 9);
      const std::uint64_t bytes = kind < 5   ? rng.between(1, 4 * kBlock)
                                  : kind < 8 ? rng.between(4 * kBlock, 64 * kBlock)
                                             : rng.between(64 * kBlock, kBlocks / 2 * kBlock);
      const std::uint64_t freeBytes = f.pool->stats().freeBytes();
      auto a = f.pool->allocate(bytes);
      const bool fits = f.pool->blocksFor(bytes) * kBlock <= freeBytes;
      ASSERT_EQ(a.has_value(), fits)
          << "step " << step << ": " << bytes << " bytes, " << freeBytes << " free";
      if (a) {
        ++loaded;
        live.push_back(std::move(*a));
      } else {
        ++refused;
      }
    }
    if (step % 97 == 0) {
      auto ok = f.pool->checkInvariants();
      ASSERT_TRUE(ok.has_value()) << "step " << step << ": " << ok.error().message;
      std::set<std::uint32_t> seen;
      std::uint64_t used = 0;
      for (const auto& a : live) {
        for (std::uint32_t b : a.blocks()) ASSERT_TRUE(seen.insert(b).second) << "block " << b;
        used += a.blocks().size();
      }
      ASSERT_EQ(used + f.pool->stats().freeBlocks, kBlocks);
    }
  }
  EXPECT_GT(loaded, 1000);
  EXPECT_GT(refused, 0);  // the test did reach a full pool
  live.clear();
  EXPECT_EQ(f.pool->stats().freeBlocks, kBlocks);
  EXPECT_TRUE(f.pool->checkInvariants().has_value());
}

TEST(BlockPool, ConcurrentAllocateAndFreeKeepTheBooks) {
  Fixture f(256);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      testing::Rng rng(1000 + static_cast<std::uint64_t>(t));
      std::vector<BlockAllocation> mine;
      for (int i = 0; i < 2000; ++i) {
        if (!mine.empty() && rng.between(0, 1) == 0) {
          mine.pop_back();
        } else if (auto a = f.pool->allocate(rng.between(1, 8 * kBlock))) {
          mine.push_back(std::move(*a));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(f.pool->stats().freeBlocks, 256u);
  EXPECT_EQ(f.pool->stats().allocations, 0u);
  EXPECT_TRUE(f.pool->checkInvariants().has_value());
}

}  // namespace
}  // namespace tessera::devpool
