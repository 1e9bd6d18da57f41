#pragma once
// The load pipeline: places a model's files in the device pool. Blocks are reserved first;
// then several reader threads each take the next chunk of the model, read it (pread) into one
// of their pinned staging buffers and enqueue its copy into the model's blocks on their own
// stream, so that while one buffer's copy runs the reader fills the next: reads and copies
// are in flight together. A staging buffer is reused only once the fence recorded after its
// copy has been reached.
//
// Safetensors files are validated (profile::readSafetensors) before a byte is read and only
// their data section is placed; the tensor table comes back with the placement. Any error —
// a bad header, a file shorter than its header says, a file that changes size during the load,
// a failed copy, cancellation — waits for the copies in flight, gives every block back and
// returns an error naming the file and the offset.
//
// Threading: a Loader is safe to use from several threads; loads through one Loader run one at
// a time (the staging buffers are shared, and one load already saturates the disk or the bus),
// and a load waiting its turn still honours its cancel token. The progress callback runs on
// the thread that called load(), never concurrently with itself.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "devpool/block_pool.h"
#include "profile/safetensors.h"

namespace tessera::devpool {

// One thing to place: a safetensors file (its data section), a whole file of any format, or
// bytes already in host memory (a node's host cache tier).
struct LoadSource {
  enum class Kind { kSafetensors, kFile, kMemory };
  Kind kind = Kind::kFile;
  std::string path;                   // file kinds; the label of a memory source
  std::span<const std::byte> memory;  // kMemory: must stay valid for the whole load
  // kMemory: the bytes are pinned (or the backend is host memory), so they are copied to the
  // device directly rather than through a staging buffer.
  bool pinned = false;

  static LoadSource safetensors(std::string path) {
    return {Kind::kSafetensors, std::move(path), {}, false};
  }
  static LoadSource file(std::string path) { return {Kind::kFile, std::move(path), {}, false}; }
  static LoadSource hostMemory(std::string label, std::span<const std::byte> bytes,
                               bool pinned = false) {
    return {Kind::kMemory, std::move(label), bytes, pinned};
  }
};

struct ModelSpec {
  std::string name;
  std::string version;
  std::vector<LoadSource> sources;
};

// Where one source's bytes landed, in the model's logical address space.
struct PlacedSource {
  std::string path;
  // Where the placed bytes start: a multiple of LoaderOptions::sourceAlignment, except with
  // O_DIRECT, where the bytes keep their file offset's position within 4 KiB.
  std::uint64_t logicalOffset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t fileOffset = 0;  // where the placed bytes start in the file (the data section)
  std::vector<profile::TensorInfo> tensors;  // safetensors sources; offsets relative to the data
};

struct LoadStats {
  std::uint64_t bytes = 0;
  double seconds = 0;  // from the first read to the last copy done (block reservation excluded)
  double bytesPerSecond() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
  double readSeconds = 0;       // summed over the reader threads
  double fenceWaitSeconds = 0;  // summed over the reader threads: waiting for copies
  std::uint64_t chunks = 0;
  int directIoSources = 0;  // files read with O_DIRECT
};

// A model resident in the pool. Destroying it (or releasing its allocation) frees its blocks.
struct LoadedModel {
  std::string name;
  std::string version;
  BlockAllocation allocation;
  std::vector<PlacedSource> sources;
  LoadStats stats;

  // Copies logical bytes back from the device (verification, diagnostics).
  Result<void> readBack(DeviceBackend& backend, std::uint64_t logicalOffset, void* dst,
                        std::uint64_t bytes) const;
};

// Set from any thread; the load stops at the next chunk boundary and fails with "cancelled".
class CancelToken {
 public:
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

using ProgressFn = std::function<void(std::uint64_t doneBytes, std::uint64_t totalBytes)>;

struct LoadControl {
  const CancelToken* cancel = nullptr;
  ProgressFn progress;
  int progressIntervalMs = 50;
};

struct LoaderOptions {
  // 0: one per hardware thread, at most 4 (more readers than cores slow a cold read down:
  // measured in docs/benchmarks.md).
  int readerThreads = 0;
  std::uint64_t chunkBytes = 16ull << 20;
  int stagingPerReader = 2;              // 2: one being read while the other is copied
  std::uint64_t sourceAlignment = 4096;  // each source starts at a multiple of this (logical)
  // When the arena is host memory (DeviceBackend::hostAddress), read file chunks straight into
  // their blocks instead of through a staging buffer (one copy fewer), and copy host-memory
  // sources on the reader threads. The device analogue would be GPUDirect Storage, which the
  // CUDA backend does not use.
  bool directReads = true;
  // Read files with O_DIRECT (DMA into the blocks or the staging buffer, past the page cache),
  // falling back to buffered reads where the file system refuses it. Helps a cold load when
  // the CPU, not the disk, is the limit; a file already in the page cache is read from the
  // disk again.
  bool directIo = false;
};

// True for the error a cancelled load returns.
bool isCancelled(const Error& error);

class Loader {
 public:
  // Allocates the staging buffers (readerThreads × stagingPerReader × chunkBytes, pinned).
  static Result<std::unique_ptr<Loader>> create(BlockPool& pool, const LoaderOptions& options = {});

  // Reserves blocks and places every source. See the header comment for the failure contract.
  Result<LoadedModel> load(const ModelSpec& spec, const LoadControl& control = {});

  BlockPool& pool() const { return pool_; }
  const LoaderOptions& options() const { return options_; }

  Loader(BlockPool& pool, const LoaderOptions& options, std::vector<StagingBuffer> staging);

 private:
  struct Plan;
  Result<void> runPipeline(const Plan& plan, const LoadControl& control, BlockAllocation& blocks,
                           LoadStats& stats);

  BlockPool& pool_;
  const LoaderOptions options_;
  std::vector<StagingBuffer> staging_;  // readerThreads × stagingPerReader

  std::mutex turnMutex_;  // one load at a time
  std::condition_variable turnFree_;
  bool busy_ = false;
};

}  // namespace tessera::devpool
