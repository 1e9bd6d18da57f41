#include "devpool/backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace tessera::devpool {
namespace {

// The contract every backend keeps: arena once, copies land where asked, fences order them.
void roundTrip(DeviceBackend& backend) {
  constexpr std::uint64_t kArena = 4 << 20;
  ASSERT_TRUE(backend.allocateArena(kArena).has_value());
  EXPECT_EQ(backend.arenaBytes(), kArena);
  auto again = backend.allocateArena(kArena);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition);

  auto staging = backend.allocateStaging(1 << 20);
  ASSERT_TRUE(staging.has_value()) << staging.error().message;
  for (int s = 0; s < backend.streamCount(); ++s) {
    std::byte* data = staging->data();
    for (std::uint64_t i = 0; i < (1 << 20); ++i)
      data[i] = static_cast<std::byte>((i * 7 + s) & 0xff);
    // Two copies of the same buffer on one stream, the second over part of the first.
    ASSERT_TRUE(backend.copyToArenaAsync(s, static_cast<std::uint64_t>(s) << 20, data, 1 << 20));
    ASSERT_TRUE(backend.copyToArenaAsync(s, (static_cast<std::uint64_t>(s) << 20) + 10, data, 100));
    auto fence = backend.recordFence(s);
    ASSERT_TRUE(fence.has_value());
    ASSERT_TRUE(backend.waitFence(*fence).has_value());
    std::vector<std::byte> back(1 << 20);
    ASSERT_TRUE(
        backend.copyFromArena(static_cast<std::uint64_t>(s) << 20, back.data(), back.size()));
    EXPECT_EQ(std::memcmp(back.data(), data, 10), 0);
    EXPECT_EQ(std::memcmp(back.data() + 10, data, 100), 0);  // the later copy won
    EXPECT_EQ(std::memcmp(back.data() + 110, data + 110, back.size() - 110), 0);
  }
  EXPECT_TRUE(backend.synchronizeAll().has_value());
  std::byte one{};
  auto beyond = backend.copyToArenaAsync(0, kArena, &one, 1);
  ASSERT_FALSE(beyond.has_value());
  EXPECT_EQ(beyond.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(backend.copyToArenaAsync(backend.streamCount(), 0, &one, 1).has_value());
  EXPECT_FALSE(backend.copyFromArena(kArena - 1, &one, 2).has_value());
}

TEST(HostBackend, KeepsTheBackendContract) {
  auto backend = makeHostBackend({3});
  EXPECT_EQ(backend->name(), "host");
  EXPECT_TRUE(backend->isVirtual());
  EXPECT_EQ(backend->streamCount(), 3);
  roundTrip(*backend);
}

TEST(HostBackend, CopiesBeforeTheArenaAreRefused) {
  auto backend = makeHostBackend();
  std::byte one{};
  auto r = backend->copyToArenaAsync(0, 0, &one, 1);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("not allocated"), std::string::npos);
}

TEST(Backends, UnknownNameIsAnError) {
  auto r = makeBackend("tpu");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("expected host or cuda"), std::string::npos);
  auto host = makeBackend("host", 5);
  ASSERT_TRUE(host.has_value());
  EXPECT_EQ((*host)->streamCount(), 5);
}

TEST(CudaBackend, WithoutTheRuntimeSaysSo) {
  CudaBackendOptions options;
  options.libraryNames = {"libcudart-tessera-test-absent.so", "/nonexistent/libcudart.so.12"};
  auto r = makeCudaBackend(options);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(r.error().message.rfind("libcudart.so not found: the CUDA backend needs the CUDA "
                                    "runtime; use the host backend",
                                    0),
            0u)
      << r.error().message;
  EXPECT_NE(r.error().message.find("libcudart-tessera-test-absent.so"), std::string::npos);
}

TEST(CudaBackend, LibraryWithoutTheRuntimeSymbolsIsRefused) {
  CudaBackendOptions options;
  options.libraryNames = {"libm.so.6"};  // loads, but is no CUDA runtime
  auto r = makeCudaBackend(options);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("lacks a CUDA runtime function"), std::string::npos)
      << r.error().message;
}

// With the default search: on a machine with a GPU the backend keeps the same contract as the
// host backend; without the runtime or without a device it fails with a message, not a crash.
TEST(CudaBackend, DefaultSearchWorksOrExplains) {
  auto r = makeCudaBackend({});
  if (!r.has_value()) {
    std::printf("no CUDA backend here: %s\n", r.error().message.c_str());
    EXPECT_FALSE(r.error().message.empty());
    EXPECT_TRUE(r.error().message.find("libcudart") != std::string::npos ||
                r.error().message.find("CUDA") != std::string::npos ||
                r.error().message.find("cuda") != std::string::npos)
        << r.error().message;
    return;
  }
  std::printf("CUDA backend: %s\n", (*r)->describe().c_str());
  EXPECT_FALSE((*r)->isVirtual());
  roundTrip(**r);
}

}  // namespace
}  // namespace tessera::devpool
