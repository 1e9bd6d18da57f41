#include "devpool/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace tessera::devpool {
namespace {

constexpr const char* kCancelledPrefix = "cancelled: ";
// O_DIRECT wants file offsets, lengths and buffers aligned to the logical block size; 4 KiB
// covers every common device.
constexpr std::uint64_t kDirectIoAlignment = 4096;

using SteadyTime = std::chrono::steady_clock;

double secondsSince(SteadyTime::time_point start) {
  return std::chrono::duration<double>(SteadyTime::now() - start).count();
}

// Closes a file descriptor on scope exit.
class FileHandle {
 public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  ~FileHandle() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileHandle(FileHandle&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileHandle& operator=(FileHandle&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  FileHandle(const FileHandle&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

std::string errnoText(int err) {
  return std::strerror(err);
}

}  // namespace

bool isCancelled(const Error& error) {
  return error.code == ErrorCode::kFailedPrecondition &&
         error.message.rfind(kCancelledPrefix, 0) == 0;
}

struct Loader::Plan {
  struct Source {
    std::string path;
    FileHandle file;                    // file kinds
    FileHandle directFile;              // the same file opened with O_DIRECT, when used
    const std::byte* memory = nullptr;  // kMemory
    bool directCopy = false;            // memory copied to the device without staging
    std::uint64_t fileOffset = 0;       // first placed byte in the file
    std::uint64_t bytes = 0;            // placed bytes
    // What is read: [readOffset, readOffset + readBytes) of the file (of the memory), to
    // logical [logicalOffset, ...). With O_DIRECT both ends are widened to 4 KiB, so a few
    // bytes before and after the placed ones land in the model's blocks too.
    std::uint64_t readOffset = 0;
    std::uint64_t readBytes = 0;
    std::uint64_t logicalOffset = 0;
    std::uint64_t fileEnd() const { return fileOffset + bytes; }
    int readFd() const { return directFile.get() >= 0 ? directFile.get() : file.get(); }
    std::uint64_t fileSize = 0;  // at open; checked again at the end
    struct timespec modified {};
  };
  struct Chunk {
    std::uint32_t source = 0;
    std::uint64_t offset = 0;   // from the source's readOffset
    std::uint64_t bytes = 0;    // read
    std::uint64_t payload = 0;  // of which placed bytes (progress counts these)
  };
  std::vector<Source> sources;
  std::vector<Chunk> chunks;
  std::uint64_t totalBytes = 0;    // bytes to place
  std::uint64_t logicalBytes = 0;  // with alignment padding between sources
};

Result<void> LoadedModel::readBack(DeviceBackend& backend, std::uint64_t logicalOffset, void* dst,
                                   std::uint64_t bytes) const {
  if (logicalOffset > allocation.capacityBytes() ||
      bytes > allocation.capacityBytes() - logicalOffset) {
    return fail(Error::invalid("read back beyond the model's " +
                               std::to_string(allocation.capacityBytes()) + " bytes"));
  }
  auto* out = static_cast<std::byte*>(dst);
  for (const ArenaExtent& e : allocation.extents(logicalOffset, bytes)) {
    TESSERA_RETURN_IF_ERROR(backend.copyFromArena(e.arenaOffset, out, e.bytes));
    out += e.bytes;
  }
  return {};
}

Loader::Loader(BlockPool& pool, const LoaderOptions& options, std::vector<StagingBuffer> staging)
    : pool_(pool), options_(options), staging_(std::move(staging)) {}

Result<std::unique_ptr<Loader>> Loader::create(BlockPool& pool, const LoaderOptions& requested) {
  LoaderOptions options = requested;
  if (options.readerThreads == 0) {
    options.readerThreads =
        static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  }
  if (options.readerThreads < 1 || options.readerThreads > 64) {
    return fail(Error::invalid("loader reader threads must be 1..64, got " +
                               std::to_string(options.readerThreads)));
  }
  if (options.stagingPerReader < 1 || options.stagingPerReader > 8) {
    return fail(Error::invalid("staging buffers per reader must be 1..8, got " +
                               std::to_string(options.stagingPerReader)));
  }
  if (options.chunkBytes < 4096 || options.chunkBytes % 4096 != 0) {
    return fail(Error::invalid("loader chunk size must be a positive multiple of 4096, got " +
                               std::to_string(options.chunkBytes)));
  }
  if (options.sourceAlignment == 0 || (options.sourceAlignment & (options.sourceAlignment - 1))) {
    return fail(Error::invalid("source alignment must be a power of two"));
  }
  std::vector<StagingBuffer> staging;
  const int buffers = options.readerThreads * options.stagingPerReader;
  for (int i = 0; i < buffers; ++i) {
    auto buffer = pool.backend().allocateStaging(options.chunkBytes);
    if (!buffer) return fail(buffer.error());
    staging.push_back(std::move(*buffer));
  }
  return std::make_unique<Loader>(pool, options, std::move(staging));
}

Result<LoadedModel> Loader::load(const ModelSpec& spec, const LoadControl& control) {
  const std::string what = "load of " + spec.name + "@" + spec.version;
  if (spec.sources.empty()) return fail(Error::invalid(what + ": the model has no files"));

  // Validate and open everything before reserving a block.
  Plan plan;
  std::vector<PlacedSource> placedSources;
  for (const LoadSource& source : spec.sources) {
    Plan::Source s;
    s.path = source.path;
    PlacedSource placed;
    placed.path = source.path;
    if (source.kind == LoadSource::Kind::kMemory) {
      s.memory = source.memory.data();
      s.bytes = source.memory.size();
      s.directCopy = source.pinned || pool_.backend().isVirtual();
    } else {
      std::uint64_t expectedSize = 0;
      if (source.kind == LoadSource::Kind::kSafetensors) {
        auto header = profile::readSafetensors(source.path);
        if (!header) return fail(Error::invalid(what + ": " + header.error().message));
        s.fileOffset = header->dataOffset;
        s.bytes = header->dataBytes();
        expectedSize = header->fileSize;
        placed.tensors = std::move(header->tensors);
      }
      const int fd = ::open(source.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        return fail(
            Error::notFound(what + ": cannot open " + source.path + ": " + errnoText(errno)));
      }
      s.file = FileHandle(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        return fail(Error::invalid(what + ": " + source.path + " is not a regular file"));
      }
      s.fileSize = static_cast<std::uint64_t>(st.st_size);
      s.modified = st.st_mtim;
      if (source.kind == LoadSource::Kind::kFile) {
        s.bytes = s.fileSize;
      } else if (s.fileSize != expectedSize) {
        return fail(Error::invalid(what + ": " + source.path + " changed size after validation (" +
                                   std::to_string(expectedSize) + " then " +
                                   std::to_string(s.fileSize) + " bytes)"));
      }
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      if (options_.directIo) {
        // Not every file system takes O_DIRECT (tmpfs does not): then the page cache it is.
        const int direct = ::open(source.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (direct >= 0) s.directFile = FileHandle(direct);
      }
    }
    s.readOffset = s.fileOffset;
    s.readBytes = s.bytes;
    if (s.directFile.get() >= 0) {
      s.readOffset = s.fileOffset / kDirectIoAlignment * kDirectIoAlignment;
      s.readBytes =
          (s.fileEnd() + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment -
          s.readOffset;
    }
    const std::uint64_t align = s.directFile.get() >= 0
                                    ? std::max(options_.sourceAlignment, kDirectIoAlignment)
                                    : options_.sourceAlignment;
    s.logicalOffset = (plan.logicalBytes + align - 1) / align * align;
    plan.logicalBytes = s.logicalOffset + s.readBytes;
    plan.totalBytes += s.bytes;
    placed.logicalOffset = s.logicalOffset + (s.fileOffset - s.readOffset);
    placed.bytes = s.bytes;
    placed.fileOffset = s.fileOffset;
    const auto index = static_cast<std::uint32_t>(plan.sources.size());
    for (std::uint64_t off = 0; off < s.readBytes; off += options_.chunkBytes) {
      const std::uint64_t n = std::min(options_.chunkBytes, s.readBytes - off);
      // The placed bytes within [readOffset + off, + n).
      const std::uint64_t from = std::max(s.readOffset + off, s.fileOffset);
      const std::uint64_t to = std::min(s.readOffset + off + n, s.fileEnd());
      plan.chunks.push_back({index, off, n, to > from ? to - from : 0});
    }
    plan.sources.push_back(std::move(s));
    placedSources.push_back(std::move(placed));
  }

  // Wait for our turn (one load at a time), still honouring cancellation.
  {
    std::unique_lock lock(turnMutex_);
    while (busy_) {
      if (control.cancel != nullptr && control.cancel->cancelled()) {
        return fail(Error::precondition(kCancelledPrefix + what + " before it started"));
      }
      turnFree_.wait_for(lock, std::chrono::milliseconds(20));
    }
    busy_ = true;
  }
  struct TurnRelease {
    Loader* self;
    ~TurnRelease() {
      {
        std::lock_guard lock(self->turnMutex_);
        self->busy_ = false;
      }
      self->turnFree_.notify_all();
    }
  } turnRelease{this};

  auto blocks = pool_.allocate(plan.logicalBytes);
  if (!blocks) return fail(Error::exhausted(what + ": " + blocks.error().message));

  LoadedModel model;
  model.name = spec.name;
  model.version = spec.version;
  auto status = runPipeline(plan, control, *blocks, model.stats);
  if (!status) {
    blocks->release();  // every copy has finished: runPipeline waits for them
    if (isCancelled(status.error())) {
      const std::string rest = status.error().message.substr(std::strlen(kCancelledPrefix));
      return fail(Error::precondition(kCancelledPrefix + what + " " + rest));
    }
    return fail(Error{status.error().code, what + ": " + status.error().message});
  }
  // A file that changed while it was read may have given a mix of old and new bytes.
  for (const Plan::Source& s : plan.sources) {
    if (s.file.get() < 0) continue;
    struct stat st {};
    if (::fstat(s.file.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != s.fileSize ||
        st.st_mtim.tv_sec != s.modified.tv_sec || st.st_mtim.tv_nsec != s.modified.tv_nsec) {
      blocks->release();
      return fail(Error::invalid(what + ": " + s.path + " changed during the load (" +
                                 std::to_string(s.fileSize) + " bytes before, " +
                                 std::to_string(st.st_size) + " after)"));
    }
  }
  model.allocation = std::move(*blocks);
  model.sources = std::move(placedSources);
  return model;
}

namespace {

// Reads `bytes` at `offset`, of which at least the first `required` must exist (the rest may
// lie past the end of the file, as an O_DIRECT read rounded up to 4 KiB does), or says why not.
Result<void> readFully(int fd, const std::string& path, std::uint64_t offset, std::byte* out,
                       std::uint64_t bytes, std::uint64_t required, std::uint64_t fileSize) {
  std::uint64_t done = 0;
  while (done < required) {
    const ssize_t n = ::pread(fd, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Error::internal(path + ": read error at offset " + std::to_string(offset + done) +
                                  ": " + errnoText(errno)));
    }
    if (n == 0) {
      return fail(Error::invalid(path + ": short read at offset " + std::to_string(offset + done) +
                                 ": the file ends there but was " + std::to_string(fileSize) +
                                 " bytes when the load began (truncated during the load?)"));
    }
    done += static_cast<std::uint64_t>(n);
  }
  return {};
}

}  // namespace

Result<void> Loader::runPipeline(const Plan& plan, const LoadControl& control,
                                 BlockAllocation& blocks, LoadStats& stats) {
  DeviceBackend& backend = pool_.backend();
  const bool direct = options_.directReads && backend.hostAddress(0) != nullptr;
  const auto chunkCount = plan.chunks.size();
  const int readers = static_cast<int>(
      std::clamp<std::size_t>(chunkCount, 1, static_cast<std::size_t>(options_.readerThreads)));

  std::atomic<std::size_t> nextChunk{0};
  std::atomic<std::uint64_t> doneBytes{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards firstError, finished and the time sums
  std::condition_variable finishedChanged;
  std::optional<Error> firstError;
  int finished = 0;
  double readSeconds = 0, fenceSeconds = 0;

  auto setError = [&](Error e) {
    std::lock_guard lock(mutex);
    if (!firstError) firstError = std::move(e);
    stop.store(true);
  };

  auto reader = [&](int r) {
    const int stream = r % backend.streamCount();
    struct Slot {
      StagingBuffer* buffer = nullptr;
      std::optional<Fence> fence;
      std::uint64_t bytes = 0;
    };
    std::vector<Slot> slots(static_cast<std::size_t>(options_.stagingPerReader));
    for (std::size_t k = 0; k < slots.size(); ++k) {
      slots[k].buffer = &staging_[static_cast<std::size_t>(r) * slots.size() + k];
    }
    double myRead = 0, myFence = 0;
    auto retire = [&](Slot& slot) -> bool {
      if (!slot.fence) return true;
      const auto t0 = SteadyTime::now();
      auto waited = backend.waitFence(*slot.fence);
      myFence += secondsSince(t0);
      slot.fence.reset();
      if (!waited) {
        setError(waited.error());
        return false;
      }
      doneBytes.fetch_add(slot.bytes);
      return true;
    };

    std::size_t k = 0;
    while (!stop.load()) {
      if (control.cancel != nullptr && control.cancel->cancelled()) {
        setError(Error::precondition(std::string(kCancelledPrefix) + "stopped after " +
                                     std::to_string(doneBytes.load()) + " of " +
                                     std::to_string(plan.totalBytes) + " bytes"));
        break;
      }
      const std::size_t index = nextChunk.fetch_add(1);
      if (index >= chunkCount) break;
      Slot& slot = slots[k];
      k = (k + 1) % slots.size();
      if (!retire(slot)) break;

      const Plan::Chunk& chunk = plan.chunks[index];
      const Plan::Source& source = plan.sources[chunk.source];
      const std::byte* from = nullptr;
      if (source.memory != nullptr && direct) {
        // Host memory into a host-memory arena: the reader copies it itself, with no
        // hand-off to a stream's thread.
        const std::byte* at = source.memory + chunk.offset;
        for (const ArenaExtent& e :
             blocks.extents(source.logicalOffset + chunk.offset, chunk.bytes)) {
          std::memcpy(backend.hostAddress(e.arenaOffset), at, e.bytes);
          at += e.bytes;
        }
        doneBytes.fetch_add(chunk.payload);
        continue;
      }
      if (source.memory != nullptr) {
        if (source.directCopy) {
          from = source.memory + chunk.offset;
        } else {
          std::memcpy(slot.buffer->data(), source.memory + chunk.offset, chunk.bytes);
          from = slot.buffer->data();
        }
      } else if (direct) {
        const auto t0 = SteadyTime::now();
        std::uint64_t at = source.readOffset + chunk.offset;
        for (const ArenaExtent& e :
             blocks.extents(source.logicalOffset + chunk.offset, chunk.bytes)) {
          const std::uint64_t required =
              std::min(e.bytes, source.fileEnd() - std::min(at, source.fileEnd()));
          auto read =
              readFully(source.readFd(), source.path, at, backend.hostAddress(e.arenaOffset),
                        e.bytes, required, source.fileSize);
          if (!read) {
            setError(read.error());
            break;
          }
          at += e.bytes;
        }
        myRead += secondsSince(t0);
        if (stop.load()) break;
        doneBytes.fetch_add(chunk.payload);
        continue;
      } else {
        const auto t0 = SteadyTime::now();
        const std::uint64_t at = source.readOffset + chunk.offset;
        const std::uint64_t required =
            std::min(chunk.bytes, source.fileEnd() - std::min(at, source.fileEnd()));
        auto read = readFully(source.readFd(), source.path, at, slot.buffer->data(), chunk.bytes,
                              required, source.fileSize);
        myRead += secondsSince(t0);
        if (!read) {
          setError(read.error());
          break;
        }
        from = slot.buffer->data();
      }
      bool ok = true;
      for (const ArenaExtent& e :
           blocks.extents(source.logicalOffset + chunk.offset, chunk.bytes)) {
        auto copied = backend.copyToArenaAsync(stream, e.arenaOffset, from, e.bytes);
        if (!copied) {
          setError(Error::internal(source.path + ": copy of offset " +
                                   std::to_string(source.readOffset + chunk.offset) +
                                   " to the device: " + copied.error().message));
          ok = false;
          break;
        }
        from += e.bytes;
      }
      // Record the fence even after a failed enqueue, so the copies already enqueued from
      // this buffer are waited for before the blocks go back.
      auto fence = backend.recordFence(stream);
      if (!fence) {
        setError(fence.error());
        // Without a fence the only safe wait is for the whole backend.
        (void)backend.synchronizeAll();
        break;
      }
      slot.fence = *fence;
      slot.bytes = chunk.payload;
      if (!ok) break;
    }
    // Copies in flight read from our staging buffers: wait for them before leaving.
    for (Slot& slot : slots) retire(slot);
    std::lock_guard lock(mutex);
    readSeconds += myRead;
    fenceSeconds += myFence;
    ++finished;
    finishedChanged.notify_all();
  };

  const auto start = SteadyTime::now();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(readers));
  for (int r = 0; r < readers; ++r) threads.emplace_back(reader, r);
  {
    std::unique_lock lock(mutex);
    while (finished < readers) {
      finishedChanged.wait_for(lock,
                               std::chrono::milliseconds(std::max(1, control.progressIntervalMs)));
      if (control.progress && finished < readers) {
        lock.unlock();
        control.progress(doneBytes.load(), plan.totalBytes);
        lock.lock();
      }
    }
  }
  for (auto& t : threads) t.join();
  stats.seconds = secondsSince(start);
  stats.bytes = plan.totalBytes;
  stats.chunks = chunkCount;
  stats.directIoSources = static_cast<int>(
      std::count_if(plan.sources.begin(), plan.sources.end(),
                    [](const Plan::Source& src) { return src.directFile.get() >= 0; }));
  stats.readSeconds = readSeconds;
  stats.fenceWaitSeconds = fenceSeconds;
  if (firstError) return fail(std::move(*firstError));
  if (control.progress) control.progress(plan.totalBytes, plan.totalBytes);
  return {};
}

}  // namespace tessera::devpool
