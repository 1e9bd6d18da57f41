// The host backend: the arena is one anonymous mapping, populated at allocation so that the
// first load does not pay page faults; each stream is a worker thread that runs its copies in
// order.

#include <sys/mman.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "devpool/backend.h"

namespace tessera::devpool {

StagingBuffer::~StagingBuffer() {
  release();
}

StagingBuffer::StagingBuffer(StagingBuffer&& other) noexcept
    : owner_(other.owner_), data_(other.data_), bytes_(other.bytes_) {
  other.owner_ = nullptr;
  other.data_ = nullptr;
  other.bytes_ = 0;
}

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void StagingBuffer::release() {
  if (owner_ != nullptr && data_ != nullptr) owner_->freeStaging(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

// Staging buffers are page-aligned so that O_DIRECT reads may land in them.
constexpr std::size_t kStagingAlignment = 4096;

class HostStream {
 public:
  HostStream() : worker_([this] { run(); }) {}
  ~HostStream() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void enqueue(std::byte* dst, const void* src, std::uint64_t bytes) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({dst, src, bytes});
      ++enqueued_;
    }
    wake_.notify_all();
  }

  std::uint64_t enqueuedCount() {
    std::lock_guard lock(mutex_);
    return enqueued_;
  }

  void waitFor(std::uint64_t sequence) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return completed_ >= sequence; });
  }

 private:
  struct Copy {
    std::byte* dst;
    const void* src;
    std::uint64_t bytes;
  };

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      const Copy copy = queue_.front();
      queue_.pop_front();
      lock.unlock();
      std::memcpy(copy.dst, copy.src, copy.bytes);
      lock.lock();
      ++completed_;
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Copy> queue_;
  std::uint64_t enqueued_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: started once the fields above exist
};

class HostBackend final : public DeviceBackend {
 public:
  explicit HostBackend(int streams) {
    for (int i = 0; i < streams; ++i) streams_.push_back(std::make_unique<HostStream>());
  }
  ~HostBackend() override {
    streams_.clear();  // joins the workers before the arena goes
    if (arena_ != nullptr) ::munmap(arena_, arenaBytes_);
  }

  std::string_view name() const override { return "host"; }
  bool isVirtual() const override { return true; }
  int streamCount() const override { return static_cast<int>(streams_.size()); }
  std::string describe() const override {
    return "host memory (no GPU), " + std::to_string(streams_.size()) + " copy threads";
  }

  Result<void> allocateArena(std::uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    if (arena_ != nullptr) return fail(Error::precondition("the arena is already allocated"));
    if (bytes == 0) return fail(Error::invalid("arena size must be positive"));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      return fail(Error::exhausted("host arena of " + std::to_string(bytes) +
                                   " bytes: mmap failed: " + std::strerror(errno)));
    }
    arena_ = static_cast<std::byte*>(p);
    arenaBytes_ = bytes;
    return {};
  }

  std::uint64_t arenaBytes() const override {
    std::lock_guard lock(mutex_);
    return arenaBytes_;
  }

  Result<StagingBuffer> allocateStaging(std::uint64_t bytes) override {
    if (bytes == 0) return fail(Error::invalid("staging buffer size must be positive"));
    const std::uint64_t rounded =
        (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
    void* p = std::aligned_alloc(kStagingAlignment, rounded);
    if (p == nullptr) {
      return fail(Error::exhausted("staging buffer of " + std::to_string(bytes) + " bytes"));
    }
    std::memset(p, 0, rounded);  // touch every page now, not during the first load
    return StagingBuffer(this, static_cast<std::byte*>(p), bytes);
  }

  Result<void> copyToArenaAsync(int stream, std::uint64_t arenaOffset, const void* src,
                                std::uint64_t bytes) override {
    TESSERA_RETURN_IF_ERROR(checkRange(arenaOffset, bytes));
    if (stream < 0 || stream >= streamCount()) {
      return fail(Error::invalid("stream " + std::to_string(stream) + " out of range"));
    }
    streams_[static_cast<std::size_t>(stream)]->enqueue(arena_ + arenaOffset, src, bytes);
    return {};
  }

  Result<Fence> recordFence(int stream) override {
    if (stream < 0 || stream >= streamCount()) {
      return fail(Error::invalid("stream " + std::to_string(stream) + " out of range"));
    }
    return Fence{stream, streams_[static_cast<std::size_t>(stream)]->enqueuedCount()};
  }

  Result<void> waitFence(const Fence& fence) override {
    if (fence.stream < 0 || fence.stream >= streamCount()) {
      return fail(
          Error::invalid("fence on stream " + std::to_string(fence.stream) + " out of range"));
    }
    streams_[static_cast<std::size_t>(fence.stream)]->waitFor(fence.sequence);
    return {};
  }

  Result<void> synchronizeAll() override {
    for (int s = 0; s < streamCount(); ++s) {
      auto fence = recordFence(s);
      TESSERA_RETURN_IF_ERROR(fence);
      TESSERA_RETURN_IF_ERROR(waitFence(*fence));
    }
    return {};
  }

  std::byte* hostAddress(std::uint64_t arenaOffset) override {
    return arena_ != nullptr && arenaOffset < arenaBytes_ ? arena_ + arenaOffset : nullptr;
  }

  Result<void> copyFromArena(std::uint64_t arenaOffset, void* dst, std::uint64_t bytes) override {
    TESSERA_RETURN_IF_ERROR(checkRange(arenaOffset, bytes));
    std::memcpy(dst, arena_ + arenaOffset, bytes);
    return {};
  }

 protected:
  void freeStaging(std::byte* data, std::uint64_t) override { std::free(data); }

 private:
  Result<void> checkRange(std::uint64_t offset, std::uint64_t bytes) const {
    if (arena_ == nullptr) return fail(Error::precondition("the arena is not allocated"));
    if (offset > arenaBytes_ || bytes > arenaBytes_ - offset) {
      return fail(Error::invalid("arena range [" + std::to_string(offset) + ", +" +
                                 std::to_string(bytes) + ") beyond the arena of " +
                                 std::to_string(arenaBytes_) + " bytes"));
    }
    return {};
  }

  mutable std::mutex mutex_;  // guards allocation of the arena
  std::byte* arena_ = nullptr;
  std::uint64_t arenaBytes_ = 0;
  std::vector<std::unique_ptr<HostStream>> streams_;
};

}  // namespace

std::unique_ptr<DeviceBackend> makeHostBackend(const HostBackendOptions& options) {
  return std::make_unique<HostBackend>(options.streams < 1 ? 1 : options.streams);
}

Result<std::unique_ptr<DeviceBackend>> makeBackend(std::string_view name, int streams) {
  if (name == "host") {
    HostBackendOptions options;
    if (streams > 0) options.streams = streams;
    return makeHostBackend(options);
  }
  if (name == "cuda") {
    CudaBackendOptions options;
    if (streams > 0) options.streams = streams;
    return makeCudaBackend(options);
  }
  return fail(
      Error::invalid("unknown device backend '" + std::string(name) + "' (expected host or cuda)"));
}

}  // namespace tessera::devpool
