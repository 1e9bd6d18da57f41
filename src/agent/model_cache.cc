#include "agent/model_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "profile/safetensors.h"

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRecord = ".tessera-entry.json";

std::string bytesText(std::int64_t bytes) {
  char buffer[64];
  if (bytes >= (std::int64_t{1} << 30)) {
    std::snprintf(buffer, sizeof buffer, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (1 << 20)) {
    std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= (1 << 10)) {
    std::snprintf(buffer, sizeof buffer, "%.1f KiB", static_cast<double>(bytes) / (1 << 10));
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld bytes", static_cast<long long>(bytes));
  }
  return buffer;
}

Result<void> fsyncPath(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return fail(Error::internal("open " + path.string() + ": " + std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) return fail(Error::internal("fsync " + path.string() + ": " + std::strerror(saved)));
  return {};
}

std::int64_t filesystemFree(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return -1;
  return static_cast<std::int64_t>(st.f_bavail) * static_cast<std::int64_t>(st.f_frsize);
}

// Reads an entry's record and checks its files; empty when the entry is broken.
std::optional<std::pair<std::string, std::int64_t>> readRecord(const fs::path& folder) {
  std::ifstream in(folder / kRecord);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const json record = json::parse(text.str(), nullptr, false);
  if (!record.is_object() || !record.contains("model") || !record["model"].is_string() ||
      !record.contains("files") || !record["files"].is_array()) {
    return std::nullopt;
  }
  std::int64_t total = 0;
  for (const json& f : record["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_integer()) {
      return std::nullopt;
    }
    const std::string path = f["path"].get<std::string>();
    if (!checkRelativePath(path)) return std::nullopt;
    std::error_code ec;
    const auto size = fs::file_size(folder / path, ec);
    if (ec || static_cast<std::int64_t>(size) != f["bytes"].get<std::int64_t>())
      return std::nullopt;
    total += static_cast<std::int64_t>(size);
  }
  return std::pair{record["model"].get<std::string>(), total};
}

}  // namespace

struct ModelCache::Entry {
  std::string model;
  std::int64_t diskBytes = 0;
  std::int64_t hostBytes = 0;  // reserved or held in host memory
  std::shared_ptr<const HostModel> host;
  bool hostLoading = false;
  int pins = 0;
  Millis lastUseMs = 0;
};

std::string encodeModelName(const std::string& model) {
  std::string out;
  for (unsigned char c : model) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  // "." and ".." are not folder names one can own.
  if (out == "." || out == "..") out = "%2E" + out.substr(1);
  return out;
}

ModelCache::ModelCache(ModelCacheOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

ModelCache::~ModelCache() = default;

Result<std::unique_ptr<ModelCache>> ModelCache::open(ModelCacheOptions options,
                                                     const Clock& clock) {
  if (options.dir.empty()) return fail(Error::invalid("cache.dir: must not be empty"));
  if (options.diskCapacityBytes <= 0)
    return fail(Error::invalid("cache.diskCapacity: must be > 0"));
  if (options.hostCapacityBytes < 0)
    return fail(Error::invalid("cache.hostMemoryCapacity: must be >= 0"));
  std::unique_ptr<ModelCache> cache(new ModelCache(std::move(options), clock));
  TESSERA_RETURN_IF_ERROR(cache->rebuild());
  return cache;
}

Result<void> ModelCache::rebuild() {
  const fs::path root(options_.dir);
  std::error_code ec;
  for (const char* sub : {"models", "staging"}) {
    fs::create_directories(root / sub, ec);
    if (ec) {
      return fail(Error::invalid("cache.dir: cannot create " + (root / sub).string() + ": " +
                                 ec.message()));
    }
  }
  // Whatever was being copied when the agent stopped is incomplete by construction.
  for (const auto& e : fs::directory_iterator(root / "staging", ec)) fs::remove_all(e.path(), ec);
  std::vector<std::tuple<fs::file_time_type, std::string, std::int64_t>> found;
  for (const auto& e : fs::directory_iterator(root / "models", ec)) {
    if (!e.is_directory()) continue;
    const auto record = readRecord(e.path());
    if (!record || encodeModelName(record->first) != e.path().filename().string()) {
      if (options_.onWarning) {
        options_.onWarning("cache: removed " + e.path().string() +
                           " (incomplete or altered since it was staged)");
      }
      fs::remove_all(e.path(), ec);
      continue;
    }
    found.emplace_back(fs::last_write_time(e.path() / kRecord, ec), record->first, record->second);
  }
  std::sort(found.begin(), found.end());
  std::lock_guard lock(mu_);
  const Millis now = clock_.nowMs();
  for (std::size_t i = 0; i < found.size(); ++i) {
    auto entry = std::make_unique<Entry>();
    entry->model = std::get<1>(found[i]);
    entry->diskBytes = std::get<2>(found[i]);
    // Older records count as less recently used; the clock is monotonic, not wall time.
    entry->lastUseMs = now - static_cast<Millis>(found.size() - i);
    entries_.emplace(entry->model, std::move(entry));
  }
  // The capacity may have been lowered since: evict down to it.
  while (diskUsedLocked() > options_.diskCapacityBytes) {
    const Entry* victim = nullptr;
    for (const auto& [name, e] : entries_) {
      if (victim == nullptr || e->lastUseMs < victim->lastUseMs) victim = e.get();
    }
    evictLocked(victim->model);
  }
  refreshWarningsLocked();
  return {};
}

std::int64_t ModelCache::diskUsedLocked() const {
  std::int64_t used = 0;
  for (const auto& [name, e] : entries_) used += e->diskBytes;
  for (const auto& [name, bytes] : staging_) used += bytes;
  return used;
}

std::int64_t ModelCache::hostUsedLocked() const {
  std::int64_t used = 0;
  for (const auto& [name, e] : entries_) used += e->hostBytes;
  return used;
}

CacheEntry ModelCache::viewLocked(const std::string& model) const {
  const Entry& e = *entries_.at(model);
  return CacheEntry{e.model, e.diskBytes, e.host ? e.hostBytes : 0, e.pins, e.lastUseMs};
}

void ModelCache::evictLocked(std::string model) {
  const auto it = entries_.find(model);
  if (it == entries_.end()) return;
  std::error_code ec;
  fs::remove_all(fs::path(options_.dir) / "models" / encodeModelName(model), ec);
  entries_.erase(it);
  ++evictions_;
}

Result<void> ModelCache::makeRoomOnDisk(std::int64_t bytes, const std::string& forModel) {
  if (bytes > options_.diskCapacityBytes) {
    return fail(Error::exhausted("cache: " + forModel + " needs " + bytesText(bytes) +
                                 ", more than the whole disk capacity (" +
                                 bytesText(options_.diskCapacityBytes) + ")"));
  }
  const Millis now = clock_.nowMs();
  while (diskUsedLocked() + bytes > options_.diskCapacityBytes) {
    Entry* victim = nullptr;
    long double victimScore = -1;
    for (const auto& [name, e] : entries_) {
      if (e->pins > 0 || e->hostLoading) continue;
      const long double score =
          static_cast<long double>(std::max<Millis>(now - e->lastUseMs, 0) + 1) * e->diskBytes;
      if (score > victimScore) {
        victim = e.get();
        victimScore = score;
      }
    }
    if (victim == nullptr) {
      std::string held;
      for (const auto& [name, e] : entries_) {
        held += (held.empty() ? "" : ", ") + name + " (" + bytesText(e->diskBytes) + ", in use)";
      }
      for (const auto& [name, reserved] : staging_) {
        if (name != forModel) held += (held.empty() ? "" : ", ") + name + " (being staged)";
      }
      return fail(Error::exhausted("cache: no room for " + forModel + " (" + bytesText(bytes) +
                                   "): " + bytesText(diskUsedLocked()) + " of " +
                                   bytesText(options_.diskCapacityBytes) +
                                   " is held by entries that cannot be evicted: " + held));
    }
    evictLocked(victim->model);
  }
  return {};
}

Result<void> ModelCache::makeRoomInHost(std::int64_t bytes, const std::string& forModel) {
  if (bytes > options_.hostCapacityBytes) {
    return fail(Error::exhausted("cache: " + forModel + " needs " + bytesText(bytes) +
                                 " of host memory, more than the host tier's capacity (" +
                                 bytesText(options_.hostCapacityBytes) + ")"));
  }
  const Millis now = clock_.nowMs();
  while (hostUsedLocked() + bytes > options_.hostCapacityBytes) {
    Entry* victim = nullptr;
    long double victimScore = -1;
    for (const auto& [name, e] : entries_) {
      if (!e->host || e->pins > 0) continue;
      const long double score =
          static_cast<long double>(std::max<Millis>(now - e->lastUseMs, 0) + 1) * e->hostBytes;
      if (score > victimScore) {
        victim = e.get();
        victimScore = score;
      }
    }
    if (victim == nullptr) {
      return fail(Error::exhausted("cache: no host memory for " + forModel + " (" +
                                   bytesText(bytes) + "): " + bytesText(hostUsedLocked()) + " of " +
                                   bytesText(options_.hostCapacityBytes) +
                                   " is held by models in use or being loaded"));
    }
    victim->host.reset();
    victim->hostBytes = 0;
    ++evictions_;
  }
  return {};
}

Result<CacheEntry> ModelCache::stage(const std::string& model,
                                     std::span<ModelSource* const> sources) {
  TESSERA_RETURN_IF_ERROR(checkModelName(model));
  {
    std::unique_lock lock(mu_);
    for (;;) {
      if (const auto it = entries_.find(model); it != entries_.end()) {
        it->second->lastUseMs = clock_.nowMs();
        return viewLocked(model);
      }
      if (!staging_.contains(model)) break;
      staged_.wait(lock);
    }
    staging_[model] = 0;  // others wait for this stage to end
  }
  // From here on the reservation must be released on every path.
  auto release = [&](auto result) {
    std::lock_guard lock(mu_);
    staging_.erase(model);
    refreshWarningsLocked();
    staged_.notify_all();
    return result;
  };
  ModelSource* chosen = nullptr;
  std::vector<SourceFile> files;
  std::string tried;
  for (ModelSource* s : sources) {
    auto listed = s->list(model);
    if (listed) {
      chosen = s;
      files = std::move(*listed);
      break;
    }
    tried += (tried.empty() ? "" : "; ") + listed.error().message;
  }
  if (chosen == nullptr) {
    return release(Result<CacheEntry>(
        fail(Error::notFound("cache: no model source has " + model +
                             (tried.empty() ? " (no sources configured)" : ": " + tried)))));
  }
  std::int64_t total = 0;
  for (const SourceFile& f : files) total += f.bytes;
  {
    std::lock_guard lock(mu_);
    staging_[model] = 0;
    if (auto room = makeRoomOnDisk(total, model); !room) {
      staging_.erase(model);
      refreshWarningsLocked();
      staged_.notify_all();
      return fail(room.error());
    }
    staging_[model] = total;
  }
  const std::int64_t free = filesystemFree(options_.dir);
  if (free >= 0 && free - total < options_.minFreeDiskBytes) {
    return release(Result<CacheEntry>(fail(Error::exhausted(
        "cache: staging " + model + " (" + bytesText(total) + ") would leave " +
        bytesText(std::max<std::int64_t>(free - total, 0)) + " free on the filesystem of " +
        options_.dir + ", under cache.minFreeDisk (" + bytesText(options_.minFreeDiskBytes) +
        ")"))));
  }
  auto copied = copyIn(model, *chosen, files);
  std::lock_guard lock(mu_);
  staging_.erase(model);
  if (copied) {
    auto entry = std::make_unique<Entry>();
    entry->model = model;
    entry->diskBytes = total;
    entry->lastUseMs = clock_.nowMs();
    entries_.emplace(model, std::move(entry));
  }
  refreshWarningsLocked();
  staged_.notify_all();
  if (!copied) return fail(copied.error());
  return viewLocked(model);
}

Result<CacheEntry> ModelCache::copyIn(const std::string& model, ModelSource& source,
                                      const std::vector<SourceFile>& files) {
  const fs::path root(options_.dir);
  std::uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    seq = ++stagingSeq_;
  }
  const fs::path tmp = root / "staging" / (encodeModelName(model) + "." + std::to_string(seq));
  std::error_code ec;
  auto abandon = [&](Error e) -> Result<CacheEntry> {
    fs::remove_all(tmp, ec);
    return fail(std::move(e));
  };
  fs::create_directories(tmp, ec);
  if (ec)
    return abandon(Error::internal("cache: cannot create " + tmp.string() + ": " + ec.message()));
  json record{{"model", model}, {"source", source.name()}, {"files", json::array()}};
  for (const SourceFile& f : files) {
    if (auto ok = checkRelativePath(f.path); !ok) return abandon(ok.error());
    const fs::path target = tmp / f.path;
    fs::create_directories(target.parent_path(), ec);
    const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      return abandon(
          Error::internal("cache: cannot create " + target.string() + ": " + std::strerror(errno)));
    }
    auto written = source.fetch(model, f, fd);
    const int synced = written ? ::fsync(fd) : 0;
    ::close(fd);
    if (!written) return abandon(written.error());
    if (synced != 0) {
      return abandon(
          Error::internal("cache: fsync " + target.string() + ": " + std::strerror(errno)));
    }
    if (*written != f.bytes || static_cast<std::int64_t>(fs::file_size(target, ec)) != f.bytes) {
      return abandon(Error::internal("cache: " + model + "/" + f.path + " from source " +
                                     source.name() + ": expected " + std::to_string(f.bytes) +
                                     " bytes, got " + std::to_string(*written) +
                                     " (the source changed while it was copied?)"));
    }
    // A safetensors file must also hold a consistent header (dtypes, shapes and byte ranges
    // inside the file): a truncated or damaged shard is refused here, not at load time.
    if (f.path.ends_with(".safetensors")) {
      if (auto header = profile::readSafetensors(target.string()); !header) {
        return abandon(
            Error::invalid("cache: " + model + "/" + f.path + " from source " + source.name() +
                           " is not a valid safetensors file: " + header.error().message));
      }
    }
    record["files"].push_back({{"path", f.path}, {"bytes", f.bytes}});
  }
  {
    std::ofstream out(tmp / kRecord);
    out << record.dump(1);
    if (!out.flush())
      return abandon(Error::internal("cache: cannot write " + (tmp / kRecord).string()));
  }
  if (auto ok = fsyncPath(tmp / kRecord, false); !ok) return abandon(ok.error());
  if (auto ok = fsyncPath(tmp, true); !ok) return abandon(ok.error());
  const fs::path final = root / "models" / encodeModelName(model);
  fs::remove_all(final, ec);  // a leftover the index did not own
  fs::rename(tmp, final, ec);
  if (ec)
    return abandon(Error::internal("cache: rename to " + final.string() + ": " + ec.message()));
  if (auto ok = fsyncPath(root / "models", true); !ok) return fail(ok.error());
  return CacheEntry{model, 0, 0, 0, 0};
}

Result<std::shared_ptr<const HostModel>> ModelCache::loadToHost(const std::string& model) {
  std::int64_t bytes = 0;
  {
    std::unique_lock lock(mu_);
    if (options_.hostCapacityBytes == 0) {
      return fail(
          Error::precondition("cache: no host-memory tier (cache.hostMemoryCapacity is 0)"));
    }
    for (;;) {
      const auto it = entries_.find(model);
      if (it == entries_.end()) {
        return fail(Error::notFound("cache: " + model + " is not on disk (stage it first)"));
      }
      Entry& e = *it->second;
      e.lastUseMs = clock_.nowMs();
      if (e.host) return e.host;
      if (!e.hostLoading) break;
      staged_.wait(lock);
    }
    Entry& e = *entries_.at(model);
    TESSERA_RETURN_IF_ERROR(makeRoomInHost(e.diskBytes, model));
    e.hostLoading = true;  // keeps it on disk and reserves its host bytes while it is read
    e.hostBytes = bytes = e.diskBytes;
  }
  auto host = std::make_shared<HostModel>();
  host->model = model;
  const fs::path folder = fs::path(options_.dir) / "models" / encodeModelName(model);
  std::optional<Error> failed;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file() || it->path().filename() == kRecord) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::vector<char> data(static_cast<std::size_t>(it->file_size()));
    if (!in.read(data.data(), static_cast<std::streamsize>(data.size()))) {
      failed = Error::internal("cache: cannot read " + it->path().string());
      break;
    }
    host->files.emplace(fs::relative(it->path(), folder).generic_string(), std::move(data));
  }
  if (ec && !failed)
    failed = Error::internal("cache: reading " + folder.string() + ": " + ec.message());
  std::lock_guard lock(mu_);
  Entry& e = *entries_.at(model);
  e.hostLoading = false;
  staged_.notify_all();
  if (failed) {
    e.hostBytes = 0;
    return fail(*failed);
  }
  e.host = std::move(host);
  e.hostBytes = bytes;
  return e.host;
}

Result<void> ModelCache::pin(const std::string& model) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(model);
  if (it == entries_.end())
    return fail(Error::notFound("cache: " + model + " is not in the cache"));
  ++it->second->pins;
  it->second->lastUseMs = clock_.nowMs();
  return {};
}

Result<void> ModelCache::unpin(const std::string& model) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(model);
  if (it == entries_.end())
    return fail(Error::notFound("cache: " + model + " is not in the cache"));
  if (it->second->pins == 0) return fail(Error::precondition("cache: " + model + " is not pinned"));
  --it->second->pins;
  it->second->lastUseMs = clock_.nowMs();
  return {};
}

Result<void> ModelCache::remove(const std::string& model) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(model);
  if (it == entries_.end())
    return fail(Error::notFound("cache: " + model + " is not in the cache"));
  if (it->second->pins > 0 || it->second->hostLoading) {
    return fail(Error::precondition("cache: " + model + " is in use"));
  }
  evictLocked(model);
  refreshWarningsLocked();
  return {};
}

bool ModelCache::contains(const std::string& model) const {
  std::lock_guard lock(mu_);
  return entries_.contains(model);
}

std::string ModelCache::pathOf(const std::string& model) const {
  return (fs::path(options_.dir) / "models" / encodeModelName(model)).string();
}

std::vector<std::string> ModelCache::models() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

CacheStatus ModelCache::status() const {
  std::lock_guard lock(mu_);
  CacheStatus s;
  s.diskUsedBytes = diskUsedLocked();
  s.diskCapacityBytes = options_.diskCapacityBytes;
  s.hostUsedBytes = hostUsedLocked();
  s.hostCapacityBytes = options_.hostCapacityBytes;
  s.filesystemFreeBytes = filesystemFree(options_.dir);
  s.warnings = warnings_;
  s.evictions = evictions_;
  for (const auto& [name, e] : entries_) s.entries.push_back(viewLocked(name));
  return s;
}

void ModelCache::refreshWarningsLocked() {
  std::vector<std::pair<std::string, std::string>> now;  // kind, text
  const std::int64_t used = diskUsedLocked();
  if (static_cast<long double>(used) >
      options_.warnAtFraction * static_cast<long double>(options_.diskCapacityBytes)) {
    now.emplace_back("disk-fraction",
                     "cache: " + bytesText(used) + " of " + bytesText(options_.diskCapacityBytes) +
                         " used, above cache.warnAtFraction (" +
                         std::to_string(static_cast<int>(options_.warnAtFraction * 100 + 0.5)) +
                         " %)");
  }
  const std::int64_t free = filesystemFree(options_.dir);
  if (free >= 0 && free < options_.minFreeDiskBytes) {
    now.emplace_back("filesystem-low", "cache: the filesystem of " + options_.dir + " has " +
                                           bytesText(free) + " free, under cache.minFreeDisk (" +
                                           bytesText(options_.minFreeDiskBytes) + ")");
  }
  std::vector<std::string> texts, kinds;
  for (const auto& [kind, text] : now) {
    const bool seen =
        std::find(warningKinds_.begin(), warningKinds_.end(), kind) != warningKinds_.end();
    if (!seen && options_.onWarning) options_.onWarning(text);
    texts.push_back(text);
    kinds.push_back(kind);
  }
  warningKinds_ = std::move(kinds);
  warnings_ = std::move(texts);
}

}  // namespace tessera::agent
