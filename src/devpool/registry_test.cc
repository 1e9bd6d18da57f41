#include "devpool/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "devpool/testing/test_util.h"

namespace tessera::devpool {
namespace {

constexpr std::uint64_t kRegistryBlock = 64 << 10;

// Each version's weights: bytes that say which version they belong to.
std::string weights(const std::string& version, std::uint64_t bytes) {
  std::string s(bytes, '\0');
  for (std::uint64_t i = 0; i < bytes; ++i) {
    s[i] = static_cast<char>(version[i % version.size()] ^ static_cast<char>(i * 31));
  }
  return s;
}

struct RegistryRig {
  explicit RegistryRig(DeviceBackend& b, std::uint64_t blocks = 128) : backend(b) {
    pool = std::move(*BlockPool::create(backend, {blocks * kRegistryBlock, kRegistryBlock}));
    LoaderOptions options;
    options.chunkBytes = 64 << 10;
    options.readerThreads = 2;
    loader = std::move(*Loader::create(*pool, options));
    registry = std::make_unique<ModelRegistry>(*loader);
    registry->setTransitionListener(
        [this](const std::string& name, const std::string& version, VersionState state) {
          transitions.push_back(name + "@" + version + ":" + versionStateName(state));
        });
  }
  ModelSpec spec(const std::string& name, const std::string& version, const std::string& bytes) {
    return {name, version, {LoadSource::hostMemory("cache", std::as_bytes(std::span(bytes)))}};
  }
  std::uint64_t usedBlocks() const { return pool->stats().totalBlocks - pool->stats().freeBlocks; }

  DeviceBackend& backend;
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<ModelRegistry> registry;
  std::vector<std::string> transitions;  // written under the registry's lock
};

TEST(ModelRegistry, LoadServeUnload) {
  auto backend = makeHostBackend();
  RegistryRig rig(*backend);
  const std::string v1 = weights("v1", 300'000);
  EXPECT_FALSE(rig.registry->acquire("llama").has_value());
  auto r = rig.registry->loadVersion(rig.spec("llama", "v1", v1));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->servingVersion, "v1");
  EXPECT_EQ(r->previousVersion, "");
  EXPECT_EQ(r->load.bytes, v1.size());

  auto status = rig.registry->status("llama");
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(status->serving.has_value());
  EXPECT_EQ(status->serving->state, VersionState::kReady);
  EXPECT_EQ(status->serving->doneBytes, v1.size());
  {
    auto lease = rig.registry->acquire("llama");
    ASSERT_TRUE(lease.has_value());
    EXPECT_EQ(lease->version(), "v1");
    EXPECT_EQ(rig.registry->status("llama")->serving->leases, 1);
  }
  EXPECT_EQ(rig.registry->status("llama")->serving->leases, 0);
  auto same = rig.registry->loadVersion(rig.spec("llama", "v1", v1));
  ASSERT_FALSE(same.has_value());
  EXPECT_EQ(same.error().code, ErrorCode::kAlreadyExists);

  auto u = rig.registry->unload("llama");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->previousVersion, "v1");
  EXPECT_FALSE(u->drainTimedOut);
  EXPECT_FALSE(rig.registry->acquire("llama").has_value());
  EXPECT_FALSE(rig.registry->status("llama").has_value());
  EXPECT_EQ(rig.usedBlocks(), 0u);
  EXPECT_EQ(rig.transitions, (std::vector<std::string>{"llama@v1:loading", "llama@v1:ready",
                                                       "llama@v1:draining", "llama@v1:unloading"}));
  EXPECT_FALSE(rig.registry->unload("llama").has_value());
}

// Readers hammer acquire() while the model switches from v1 to v2: every acquire succeeds,
// each sees v1 or v2 (never neither, never v1 after v2), and the weights under every lease are
// the right version's, read from the device while the lease is held.
TEST(ModelRegistry, HotSwitchLeavesNoGap) {
  auto backend = makeHostBackend();
  RegistryRig rig(*backend);
  const std::string v1 = weights("v1", 1'000'000), v2 = weights("v2", 1'200'000);
  ASSERT_TRUE(rig.registry->loadVersion(rig.spec("m", "v1", v1)).has_value());
  const std::uint64_t v1Blocks = rig.usedBlocks();

  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, sawV2{0}, acquires{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      bool seenV2 = false;
      testing::Rng rng(static_cast<std::uint64_t>(t));
      while (!done.load()) {
        auto lease = rig.registry->acquire("m");
        ++acquires;
        if (!lease) {
          ++failures;
          continue;
        }
        const bool isV2 = lease->version() == "v2";
        if (!isV2 && seenV2) ++failures;  // went back to the old version
        seenV2 = seenV2 || isV2;
        const std::string& expect = isV2 ? v2 : v1;
        const std::uint64_t at = rng.between(0, expect.size() - 64);
        char buf[64];
        if (!lease->model().readBack(*backend, at, buf, sizeof buf) ||
            std::string(buf, sizeof buf) != expect.substr(at, sizeof buf)) {
          ++failures;
        }
        if (isV2) ++sawV2;
      }
    });
  }
  // Let the readers run on v1 first.
  while (acquires.load() < 200) std::this_thread::yield();
  auto r = rig.registry->loadVersion(rig.spec("m", "v2", v2));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->previousVersion, "v1");
  EXPECT_FALSE(r->drainTimedOut);
  const int afterSwitch = acquires.load();
  while (acquires.load() < afterSwitch + 200) std::this_thread::yield();
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(sawV2.load(), 0);
  EXPECT_EQ(rig.registry->status("m")->serving->version, "v2");
  EXPECT_TRUE(rig.registry->status("m")->retiring.empty());
  EXPECT_NE(rig.usedBlocks(), 0u);
  EXPECT_NE(rig.usedBlocks(), v1Blocks + rig.pool->blocksFor(v2.size()));  // v1 is gone
  EXPECT_EQ(rig.usedBlocks(), rig.pool->blocksFor(v2.size()));
  EXPECT_EQ(rig.transitions,
            (std::vector<std::string>{"m@v1:loading", "m@v1:ready", "m@v2:loading", "m@v2:ready",
                                      "m@v1:draining", "m@v1:unloading"}));
}

TEST(ModelRegistry, FailedSwitchKeepsTheOldVersionServing) {
  testing::TempDir dir;
  auto backend = makeHostBackend();
  RegistryRig rig(*backend);
  const std::string v1 = weights("v1", 200'000);
  ASSERT_TRUE(rig.registry->loadVersion(rig.spec("m", "v1", v1)).has_value());
  const std::uint64_t used = rig.usedBlocks();
  const ModelSpec broken{"m", "v2", {LoadSource::safetensors(dir.file("missing.safetensors"))}};
  auto r = rig.registry->loadVersion(broken);
  ASSERT_FALSE(r.has_value());
  auto status = rig.registry->status("m");
  ASSERT_TRUE(status->serving.has_value());
  EXPECT_EQ(status->serving->version, "v1");
  EXPECT_FALSE(status->loading.has_value());
  ASSERT_TRUE(status->lastFailure.has_value());
  EXPECT_EQ(status->lastFailure->version, "v2");
  EXPECT_EQ(status->lastFailure->state, VersionState::kFailed);
  EXPECT_NE(status->lastFailure->message.find("missing.safetensors"), std::string::npos);
  EXPECT_EQ(rig.usedBlocks(), used);
  EXPECT_EQ(rig.registry->acquire("m")->version(), "v1");
  EXPECT_EQ(rig.transitions.back(), "m@v2:failed");
}

// A lease outlives the drain timeout: the switch reports it, and the old version's blocks are
// given back only when that lease ends.
TEST(ModelRegistry, DrainTimeoutKeepsBlocksUntilTheLastLease) {
  auto backend = makeHostBackend();
  RegistryRig rig(*backend);
  const std::string v1 = weights("v1", 500'000), v2 = weights("v2", 300'000);
  ASSERT_TRUE(rig.registry->loadVersion(rig.spec("m", "v1", v1)).has_value());
  auto lease = rig.registry->acquire("m");
  ASSERT_TRUE(lease.has_value());
  auto r = rig.registry->loadVersion(rig.spec("m", "v2", v2), {}, SwitchOptions{20});
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->drainTimedOut);
  EXPECT_EQ(r->leasesLeft, 1);
  EXPECT_EQ(rig.usedBlocks(), rig.pool->blocksFor(v1.size()) + rig.pool->blocksFor(v2.size()));
  // The old weights are still readable through the lease.
  char c = 0;
  ASSERT_TRUE(lease->model().readBack(*backend, 7, &c, 1).has_value());
  EXPECT_EQ(c, v1[7]);
  lease->release();
  EXPECT_EQ(rig.usedBlocks(), rig.pool->blocksFor(v2.size()));
  EXPECT_TRUE(rig.pool->checkInvariants().has_value());
}

TEST(ModelRegistry, CancelLoadingAndRefuseASecondLoad) {
  testing::HookedBackend backend;
  RegistryRig rig(backend);
  const std::string v1 = weights("v1", 2'000'000);
  Result<SwitchResult> second = fail(Error::internal("not run"));
  Result<void> cancelled = fail(Error::internal("not run"));
  std::optional<ModelStatus> during;
  backend.hookAt = 3;
  backend.hook = [&] {
    during = rig.registry->status("m");
    second = rig.registry->loadVersion(rig.spec("m", "v9", v1));
    cancelled = rig.registry->cancelLoading("m");
  };
  auto r = rig.registry->loadVersion(rig.spec("m", "v1", v1));
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(isCancelled(r.error())) << r.error().message;
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(second.error().message.find("already loading version v1"), std::string::npos);
  EXPECT_TRUE(cancelled.has_value());
  ASSERT_TRUE(during.has_value());
  ASSERT_TRUE(during->loading.has_value());
  EXPECT_EQ(during->loading->state, VersionState::kLoading);
  EXPECT_FALSE(during->serving.has_value());
  EXPECT_EQ(rig.usedBlocks(), 0u);
  EXPECT_FALSE(rig.registry->acquire("m").has_value());
  EXPECT_FALSE(rig.registry->cancelLoading("m").has_value());
  EXPECT_EQ(rig.registry->status("m")->lastFailure->state, VersionState::kFailed);
}

TEST(ModelRegistry, LeaseOutlivesTheRegistry) {
  auto backend = makeHostBackend();
  RegistryRig rig(*backend);
  const std::string v1 = weights("v1", 100'000);
  ASSERT_TRUE(rig.registry->loadVersion(rig.spec("m", "v1", v1)).has_value());
  auto lease = rig.registry->acquire("m");
  ASSERT_TRUE(lease.has_value());
  rig.registry.reset();
  char c = 0;
  ASSERT_TRUE(lease->model().readBack(*backend, 1, &c, 1).has_value());
  EXPECT_EQ(c, v1[1]);
  lease->release();
  EXPECT_EQ(rig.usedBlocks(), 0u);
}

}  // namespace
}  // namespace tessera::devpool
