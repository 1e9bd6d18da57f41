#pragma once
// Test helpers of the devpool module: seeds ($TESSERA_SEED reproduces a run), a temporary
// directory removed afterwards, and HookedBackend, a host backend that runs a test's hook
// before a chosen copy (to cancel, fail or race a load at a known point).
// Threading: TempDir and Rng are owned by one test thread; HookedBackend is as thread-safe as
// the backend it wraps, and its hook runs on the loader's reader threads.

#include <stdlib.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <string_view>

#include "devpool/backend.h"

namespace tessera::devpool::testing {

// $TESSERA_SEED when set, else a fresh random seed; the caller prints it.
inline std::uint64_t testSeed() {
  if (const char* text = std::getenv("TESSERA_SEED"); text != nullptr && *text != '\0') {
    std::uint64_t value = 0;
    const std::string_view s(text);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size()) {
      std::fprintf(stderr, "TESSERA_SEED=%s is not an unsigned integer\n", text);
      std::abort();
    }
    return value;
  }
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

// splitmix64: a seed means the same draws on every platform.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi].
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) {
    return hi <= lo ? lo : lo + next() % (hi - lo + 1);
  }

 private:
  std::uint64_t state_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-devpool-XXXXXX").string();
    // mkdtemp replaces the trailing XXXXXX with a unique suffix and creates the directory.
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// A host backend that behaves like a device (no host address for the arena, not virtual, so
// the loader uses staging buffers and async copies) and whose copies can be interrupted: before
// copy number `hookAt` (1-based, counted over all streams) it runs `hook`; when `failAt` is
// reached the copy fails instead.
class HookedBackend final : public DeviceBackend {
 public:
  explicit HookedBackend(int streams = 2) : inner_(makeHostBackend({streams})) {}

  std::function<void()> hook;
  std::uint64_t hookAt = 0;  // 0: never
  std::uint64_t failAt = 0;  // 0: never
  std::uint64_t copies() const { return copies_.load(); }

  std::string_view name() const override { return "hooked-host"; }
  // Like a device: pageable host memory goes through the staging buffers.
  bool isVirtual() const override { return false; }
  int streamCount() const override { return inner_->streamCount(); }
  std::string describe() const override { return "host backend with test hooks"; }
  Result<void> allocateArena(std::uint64_t bytes) override { return inner_->allocateArena(bytes); }
  std::uint64_t arenaBytes() const override { return inner_->arenaBytes(); }
  Result<StagingBuffer> allocateStaging(std::uint64_t bytes) override {
    return inner_->allocateStaging(bytes);
  }
  Result<void> copyToArenaAsync(int stream, std::uint64_t arenaOffset, const void* src,
                                std::uint64_t bytes) override {
    const std::uint64_t n = ++copies_;
    if (n == hookAt && hook) hook();
    if (n == failAt) return fail(Error::internal("injected copy failure"));
    return inner_->copyToArenaAsync(stream, arenaOffset, src, bytes);
  }
  Result<Fence> recordFence(int stream) override { return inner_->recordFence(stream); }
  Result<void> waitFence(const Fence& fence) override { return inner_->waitFence(fence); }
  Result<void> synchronizeAll() override { return inner_->synchronizeAll(); }
  Result<void> copyFromArena(std::uint64_t arenaOffset, void* dst, std::uint64_t bytes) override {
    return inner_->copyFromArena(arenaOffset, dst, bytes);
  }

 protected:
  void freeStaging(std::byte*, std::uint64_t) override {}  // the inner backend's buffers

 private:
  std::unique_ptr<DeviceBackend> inner_;
  std::atomic<std::uint64_t> copies_{0};
};

}  // namespace tessera::devpool::testing
