#include "devpool/block_pool.h"

#include <algorithm>
#include <limits>

namespace tessera::devpool {

BlockAllocation::~BlockAllocation() {
  release();
}

BlockAllocation::BlockAllocation(BlockAllocation&& other) noexcept
    : pool_(other.pool_),
      id_(other.id_),
      blockBytes_(other.blockBytes_),
      blocks_(std::move(other.blocks_)) {
  other.pool_ = nullptr;
  other.blocks_.clear();
}

BlockAllocation& BlockAllocation::operator=(BlockAllocation&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    id_ = other.id_;
    blockBytes_ = other.blockBytes_;
    blocks_ = std::move(other.blocks_);
    other.pool_ = nullptr;
    other.blocks_.clear();
  }
  return *this;
}

void BlockAllocation::release() {
  if (pool_ != nullptr && !blocks_.empty()) pool_->free(id_, blocks_);
  pool_ = nullptr;
  blocks_.clear();
}

std::vector<ArenaExtent> BlockAllocation::extents(std::uint64_t logicalOffset,
                                                  std::uint64_t bytes) const {
  std::vector<ArenaExtent> out;
  std::uint64_t pos = logicalOffset;
  const std::uint64_t end = logicalOffset + bytes;
  while (pos < end) {
    const std::uint64_t block = pos / blockBytes_;
    const std::uint64_t within = pos % blockBytes_;
    const std::uint64_t take = std::min(blockBytes_ - within, end - pos);
    const std::uint64_t arena =
        static_cast<std::uint64_t>(blocks_.at(block)) * blockBytes_ + within;
    if (!out.empty() && out.back().arenaOffset + out.back().bytes == arena) {
      out.back().bytes += take;
    } else {
      out.push_back({arena, take});
    }
    pos += take;
  }
  return out;
}

BlockPool::BlockPool(DeviceBackend& backend, std::uint64_t blockBytes, std::uint64_t blockCount)
    : backend_(backend), blockBytes_(blockBytes), owner_(blockCount, 0) {
  free_.reserve(blockCount);
  for (std::uint64_t i = blockCount; i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
}

Result<std::unique_ptr<BlockPool>> BlockPool::create(DeviceBackend& backend,
                                                     const BlockPoolOptions& options) {
  if (options.blockBytes == 0 || options.blockBytes % 4096 != 0) {
    return fail(Error::invalid("block size must be a positive multiple of 4096 bytes, got " +
                               std::to_string(options.blockBytes)));
  }
  const std::uint64_t blocks = options.arenaBytes / options.blockBytes;
  if (blocks == 0) {
    return fail(Error::invalid("arena of " + std::to_string(options.arenaBytes) +
                               " bytes holds no block of " + std::to_string(options.blockBytes)));
  }
  if (blocks > std::numeric_limits<std::uint32_t>::max()) {
    return fail(Error::invalid("arena holds more than 2^32 blocks; use larger blocks"));
  }
  TESSERA_RETURN_IF_ERROR(backend.allocateArena(blocks * options.blockBytes));
  return std::make_unique<BlockPool>(backend, options.blockBytes, blocks);
}

Result<BlockAllocation> BlockPool::allocate(std::uint64_t bytes) {
  const std::uint64_t need = std::max<std::uint64_t>(1, blocksFor(bytes));
  std::lock_guard lock(mutex_);
  if (need > free_.size()) {
    return fail(Error::exhausted(
        "device pool: " + std::to_string(bytes) + " bytes need " + std::to_string(need) +
        " blocks of " + std::to_string(blockBytes_) + " bytes, " + std::to_string(free_.size()) +
        " of " + std::to_string(owner_.size()) + " are free"));
  }
  const std::uint64_t id = nextId_++;
  std::vector<std::uint32_t> blocks(free_.end() - static_cast<std::ptrdiff_t>(need), free_.end());
  std::reverse(blocks.begin(), blocks.end());
  free_.resize(free_.size() - need);
  for (std::uint32_t b : blocks) owner_[b] = id;
  ++liveAllocations_;
  return BlockAllocation(this, id, blockBytes_, std::move(blocks));
}

void BlockPool::free(std::uint64_t id, const std::vector<std::uint32_t>& blocks) {
  std::lock_guard lock(mutex_);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    // A block not owned by `id` here would be a bug in BlockAllocation; checkInvariants finds
    // the resulting double listing, so only the owner is cleared here.
    if (owner_[*it] == id) owner_[*it] = 0;
    free_.push_back(*it);
  }
  --liveAllocations_;
}

BlockPoolStats BlockPool::stats() const {
  std::lock_guard lock(mutex_);
  return {blockBytes_, owner_.size(), free_.size(), liveAllocations_};
}

Result<void> BlockPool::checkInvariants() const {
  std::lock_guard lock(mutex_);
  std::vector<bool> listed(owner_.size(), false);
  for (std::uint32_t b : free_) {
    if (b >= owner_.size()) {
      return fail(Error::internal("free list holds block " + std::to_string(b) +
                                  " beyond the pool's " + std::to_string(owner_.size())));
    }
    if (listed[b]) return fail(Error::internal("block " + std::to_string(b) + " is free twice"));
    if (owner_[b] != 0) {
      return fail(Error::internal("block " + std::to_string(b) + " is free and owned by " +
                                  std::to_string(owner_[b])));
    }
    listed[b] = true;
  }
  std::vector<std::uint64_t> owners;
  for (std::size_t b = 0; b < owner_.size(); ++b) {
    if (!listed[b] && owner_[b] == 0) {
      return fail(Error::internal("block " + std::to_string(b) + " is neither free nor owned"));
    }
    if (owner_[b] != 0) owners.push_back(owner_[b]);
  }
  std::sort(owners.begin(), owners.end());
  const auto distinct =
      static_cast<std::uint64_t>(std::unique(owners.begin(), owners.end()) - owners.begin());
  if (distinct != liveAllocations_) {
    return fail(Error::internal(std::to_string(liveAllocations_) + " live allocations counted, " +
                                std::to_string(distinct) + " own blocks"));
  }
  return {};
}

}  // namespace tessera::devpool
