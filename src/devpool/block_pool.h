#pragma once
// The device memory pool: one arena, allocated once when the node agent starts, carved into
// fixed-size blocks. A model gets any free blocks (not a contiguous range) and addresses its
// bytes through its block table, so loading and unloading models of mixed sizes never
// fragments the pool: a model whose size fits the free total always gets its blocks.
//
// Threading: BlockPool is safe to use from any thread (one mutex, held only for the
// bookkeeping, never during a copy). A BlockAllocation is owned by one thread at a time and
// returns its blocks when destroyed; the pool must outlive every allocation it handed out.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "devpool/backend.h"

namespace tessera::devpool {

inline constexpr std::uint64_t kDefaultBlockBytes = 2ull << 20;

class BlockPool;

// A contiguous run of arena bytes: where part of a model's logical range lives.
struct ArenaExtent {
  std::uint64_t arenaOffset = 0;
  std::uint64_t bytes = 0;
};

// The blocks of one model. Logical byte b of the model lives in block blocks()[b / blockBytes]
// at offset b % blockBytes.
class BlockAllocation {
 public:
  BlockAllocation() = default;
  ~BlockAllocation();
  BlockAllocation(BlockAllocation&& other) noexcept;
  BlockAllocation& operator=(BlockAllocation&& other) noexcept;
  BlockAllocation(const BlockAllocation&) = delete;
  BlockAllocation& operator=(const BlockAllocation&) = delete;

  bool empty() const { return blocks_.empty(); }
  const std::vector<std::uint32_t>& blocks() const { return blocks_; }
  std::uint64_t id() const { return id_; }
  std::uint64_t blockBytes() const { return blockBytes_; }
  std::uint64_t capacityBytes() const { return blocks_.size() * blockBytes_; }

  // The arena runs holding logical bytes [logicalOffset, logicalOffset + bytes), adjacent
  // blocks merged into one run. The range must lie within capacityBytes().
  std::vector<ArenaExtent> extents(std::uint64_t logicalOffset, std::uint64_t bytes) const;

  // Gives the blocks back to the pool now (the destructor does the same).
  void release();

 private:
  friend class BlockPool;
  BlockAllocation(BlockPool* pool, std::uint64_t id, std::uint64_t blockBytes,
                  std::vector<std::uint32_t> blocks)
      : pool_(pool), id_(id), blockBytes_(blockBytes), blocks_(std::move(blocks)) {}

  BlockPool* pool_ = nullptr;
  std::uint64_t id_ = 0;
  std::uint64_t blockBytes_ = 0;
  std::vector<std::uint32_t> blocks_;
};

struct BlockPoolStats {
  std::uint64_t blockBytes = 0;
  std::uint64_t totalBlocks = 0;
  std::uint64_t freeBlocks = 0;
  std::uint64_t allocations = 0;  // live ones
  std::uint64_t totalBytes() const { return totalBlocks * blockBytes; }
  std::uint64_t freeBytes() const { return freeBlocks * blockBytes; }
  // The largest model that can be loaded now: with blocks, simply the free total.
  std::uint64_t largestFitBytes() const { return freeBytes(); }
};

struct BlockPoolOptions {
  std::uint64_t arenaBytes = 0;  // rounded down to whole blocks; at least one block
  std::uint64_t blockBytes = kDefaultBlockBytes;
};

class BlockPool {
 public:
  // Allocates the backend's arena (once per backend) and carves it into blocks.
  static Result<std::unique_ptr<BlockPool>> create(DeviceBackend& backend,
                                                   const BlockPoolOptions& options);

  DeviceBackend& backend() const { return backend_; }
  std::uint64_t blockBytes() const { return blockBytes_; }
  std::uint64_t blocksFor(std::uint64_t bytes) const {
    return (bytes + blockBytes_ - 1) / blockBytes_;
  }

  // Enough blocks for `bytes` (at least one), or kResourceExhausted naming the shortfall.
  Result<BlockAllocation> allocate(std::uint64_t bytes);

  BlockPoolStats stats() const;
  // Every block is either free exactly once or owned by exactly one live allocation, and the
  // counts agree. An error describes the first broken invariant.
  Result<void> checkInvariants() const;

  BlockPool(DeviceBackend& backend, std::uint64_t blockBytes, std::uint64_t blockCount);

 private:
  friend class BlockAllocation;
  void free(std::uint64_t id, const std::vector<std::uint32_t>& blocks);

  DeviceBackend& backend_;
  const std::uint64_t blockBytes_;
  mutable std::mutex mutex_;
  // Free blocks as a stack; popped from the back. Freed blocks are pushed in descending order
  // so that a model reloaded after an unload gets its runs back in ascending order.
  std::vector<std::uint32_t> free_;
  std::vector<std::uint64_t> owner_;  // per block: the allocation id, 0 when free
  std::uint64_t nextId_ = 1;
  std::uint64_t liveAllocations_ = 0;
};

}  // namespace tessera::devpool
