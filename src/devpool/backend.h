#pragma once
// Where the device memory pool lives. A DeviceBackend owns one arena (allocated once, at
// start, never resized), pinned host staging buffers, and a few copy streams: copies enqueued
// on one stream complete in order, copies on different streams may run at the same time, and a
// fence recorded on a stream is reached once everything enqueued on it before is done.
//
// Two implementations, chosen at run time (never by #ifdef):
//   - host: the arena is plain host memory and a stream is a worker thread running memcpy.
//     Used on machines without a GPU and in tests; the loader's pipeline has the same shape
//     as on a GPU (staging buffer → async copy → fence).
//   - cuda: libcudart loaded with dlopen at run time (no CUDA headers, no link-time
//     dependency); the arena is one cudaMalloc, staging is cudaHostAlloc'd (pinned) memory,
//     streams are CUDA streams and fences CUDA events.
//
// Threading: allocateArena happens once, before the backend is shared; after it, every method
// is safe to call from any thread. Copies on one stream may be
// enqueued from several threads; their order is then the order of the enqueue calls. A
// backend must outlive its staging buffers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tessera::devpool {

class DeviceBackend;

// A pinned (page-locked where the backend has such a thing) host buffer, freed on destruction.
class StagingBuffer {
 public:
  StagingBuffer() = default;
  StagingBuffer(DeviceBackend* owner, std::byte* data, std::uint64_t bytes)
      : owner_(owner), data_(data), bytes_(bytes) {}
  ~StagingBuffer();
  StagingBuffer(StagingBuffer&& other) noexcept;
  StagingBuffer& operator=(StagingBuffer&& other) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void release();
  DeviceBackend* owner_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// A point in one stream's sequence of copies.
struct Fence {
  int stream = 0;
  std::uint64_t sequence = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual std::string_view name() const = 0;
  // True when the "device" is host memory standing in for one (the host backend).
  virtual bool isVirtual() const = 0;
  virtual int streamCount() const = 0;
  // A line describing the device (model, memory) for logs and benchmark reports.
  virtual std::string describe() const = 0;

  // Allocates the arena; once per backend (a second call is an error).
  virtual Result<void> allocateArena(std::uint64_t bytes) = 0;
  virtual std::uint64_t arenaBytes() const = 0;

  virtual Result<StagingBuffer> allocateStaging(std::uint64_t bytes) = 0;

  // Enqueues a copy of `bytes` from host memory at `src` to the arena at `arenaOffset` on
  // `stream`. `src` must stay valid and unchanged until a fence recorded after it is reached.
  // Fastest from a staging buffer; any host memory works.
  virtual Result<void> copyToArenaAsync(int stream, std::uint64_t arenaOffset, const void* src,
                                        std::uint64_t bytes) = 0;
  // A fence after everything enqueued on `stream` so far.
  virtual Result<Fence> recordFence(int stream) = 0;
  // Blocks until the fence is reached. An error means a copy before it failed.
  virtual Result<void> waitFence(const Fence& fence) = 0;
  // Blocks until every stream is idle.
  virtual Result<void> synchronizeAll() = 0;

  // Where arena byte `arenaOffset` is in this process's memory when the arena is host memory
  // (the host backend), so that a file can be read straight into it; nullptr otherwise.
  virtual std::byte* hostAddress(std::uint64_t /*arenaOffset*/) { return nullptr; }

  // Copies arena bytes back to host memory, synchronously (verification and diagnostics).
  virtual Result<void> copyFromArena(std::uint64_t arenaOffset, void* dst, std::uint64_t bytes) = 0;

 protected:
  friend class StagingBuffer;
  virtual void freeStaging(std::byte* data, std::uint64_t bytes) = 0;
};

struct HostBackendOptions {
  int streams = 2;
};
std::unique_ptr<DeviceBackend> makeHostBackend(const HostBackendOptions& options = {});

struct CudaBackendOptions {
  int device = 0;
  int streams = 4;
  // Names tried with dlopen, in order; the first that loads is used. Empty: the defaults
  // (libcudart.so, libcudart.so.13, .so.12, .so.11.0, then the same under /usr/local/cuda).
  std::vector<std::string> libraryNames;
};
// Loads the CUDA runtime and checks that the device exists. Without the library: an error
// saying so ("libcudart.so not found: ..."); without a GPU: the runtime's own error.
Result<std::unique_ptr<DeviceBackend>> makeCudaBackend(const CudaBackendOptions& options = {});

// "host" or "cuda" (the names `tessera` flags and benchmark options take).
Result<std::unique_ptr<DeviceBackend>> makeBackend(std::string_view name, int streams = 0);

}  // namespace tessera::devpool
