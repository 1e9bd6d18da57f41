#pragma once
// The node model cache: weights staged from a model source to local disk, and hot models
// kept in host memory, each tier with a byte capacity.
//
// Layout under the cache directory:
//   models/<encoded name>/...          one folder per complete entry
//   models/<encoded name>/.tessera-entry.json   {"model", "bytes", "files": [{path, bytes}]}
//   staging/<encoded name>.<n>/        an entry being copied (removed on open)
// An entry appears under models/ only by rename() of a staged folder whose files were
// written, fsync'ed and checked against the source's sizes (and *.safetensors files against
// their own header, profile::readSafetensors), so a crash leaves either a whole
// entry or a staging folder that the next open() deletes.
//
// Eviction (both tiers): when room is needed, the unpinned entry with the largest
// (age since last use + 1 ms) x bytes goes first. Weighing age by size frees room with few
// evictions and keeps small, recently used models that are cheap to keep and costly to miss
// relative to their size; a pure LRU would throw out ten small hot models to fit one large
// cold one. A pinned entry (in use: a replica is loading or serving it) is never evicted;
// when pinned entries leave no room the request fails with kResourceExhausted, naming them.
//
// Threading: every method is safe from any thread. One mutex guards the index; file copies
// run outside it (a model being staged is reserved in the index meanwhile). Staging the same
// model twice at once makes the second caller wait for the first.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "agent/model_source.h"
#include "common/clock.h"
#include "common/result.h"

namespace tessera::agent {

struct ModelCacheOptions {
  std::string dir;
  std::int64_t diskCapacityBytes = 0;
  std::int64_t hostCapacityBytes = 0;  // 0: no host-memory tier
  double warnAtFraction = 0.9;
  std::int64_t minFreeDiskBytes = 0;  // warn (and refuse to stage) below this much free space
  // Called with each warning when it first appears (disk nearly full, filesystem low).
  std::function<void(const std::string&)> onWarning;
};

struct CacheEntry {
  std::string model;
  std::int64_t diskBytes = 0;
  std::int64_t hostBytes = 0;  // 0 when not held in host memory
  int pins = 0;
  Millis lastUseMs = 0;
};

struct CacheStatus {
  std::int64_t diskUsedBytes = 0;  // complete entries plus reservations of in-progress stages
  std::int64_t diskCapacityBytes = 0;
  std::int64_t hostUsedBytes = 0;
  std::int64_t hostCapacityBytes = 0;
  std::int64_t filesystemFreeBytes = -1;
  std::vector<std::string> warnings;
  std::vector<CacheEntry> entries;  // by model name
  std::int64_t evictions = 0;
};

// A model's files read into host memory. Shared: a reader keeps its copy alive after the
// cache drops it from the host tier.
struct HostModel {
  std::string model;
  std::map<std::string, std::vector<char>> files;  // by relative path
};

class ModelCache {
 public:
  // Opens (creating) the directory, deletes half-written staging folders and entries whose
  // files do not match their record, and rebuilds the index from what is left. Entries over
  // capacity (the capacity was lowered) are evicted.
  static Result<std::unique_ptr<ModelCache>> open(ModelCacheOptions options, const Clock& clock);
  ~ModelCache();

  // Makes sure `model` is on disk, copying it from the first source that has it. Returns the
  // entry. kNotFound when no source has it; kResourceExhausted when it cannot fit.
  Result<CacheEntry> stage(const std::string& model, std::span<ModelSource* const> sources);
  // Reads an on-disk entry into the host-memory tier (evicting colder host copies).
  Result<std::shared_ptr<const HostModel>> loadToHost(const std::string& model);
  // In use: a pinned entry is never evicted from either tier. pin() also counts as a use.
  Result<void> pin(const std::string& model);
  Result<void> unpin(const std::string& model);
  // Deletes an unpinned entry.
  Result<void> remove(const std::string& model);

  bool contains(const std::string& model) const;
  std::string pathOf(const std::string& model) const;  // the entry's folder
  std::vector<std::string> models() const;             // complete entries, sorted
  CacheStatus status() const;

 private:
  struct Entry;
  ModelCache(ModelCacheOptions options, const Clock& clock);
  Result<void> rebuild();
  Result<void> makeRoomOnDisk(std::int64_t bytes, const std::string& forModel);
  Result<void> makeRoomInHost(std::int64_t bytes, const std::string& forModel);
  Result<CacheEntry> copyIn(const std::string& model, ModelSource& source,
                            const std::vector<SourceFile>& files);
  void evictLocked(std::string model);
  void refreshWarningsLocked();
  std::int64_t diskUsedLocked() const;
  std::int64_t hostUsedLocked() const;
  CacheEntry viewLocked(const std::string& model) const;

  ModelCacheOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable staged_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // complete entries
  std::map<std::string, std::int64_t> staging_;            // model -> reserved bytes
  std::vector<std::string> warnings_;
  std::vector<std::string> warningKinds_;  // which warnings are showing (to log each once)
  std::int64_t evictions_ = 0;
  std::uint64_t stagingSeq_ = 0;
};

// The folder name of a model: letters, digits, '.', '_', '-' kept, every other byte %XX.
std::string encodeModelName(const std::string& model);

}  // namespace tessera::agent
