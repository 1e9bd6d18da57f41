#include "agent/device_pool_host.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include <httplib.h>

#include "agent/admin_http.h"
#include "profile/safetensors.h"

namespace tessera::agent {

using admin::sendError;
using admin::sendJson;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// The files of a cache entry to place, in name order: its safetensors files when it has any
// (their data sections), else every file whole. The entry's own record is never loaded.
struct EntryFile {
  std::string path;
  bool safetensors = false;
  std::uint64_t bytes = 0;  // what the loader places (the data section of a safetensors file)
};

std::vector<EntryFile> entryFiles(const std::string& dir) {
  std::vector<EntryFile> all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    if (name == ".tessera-entry.json") continue;
    EntryFile f;
    f.path = it->path().string();
    f.safetensors = it->path().extension() == ".safetensors";
    f.bytes = static_cast<std::uint64_t>(it->file_size(ec));
    all.push_back(std::move(f));
  }
  std::sort(all.begin(), all.end(),
            [](const EntryFile& a, const EntryFile& b) { return a.path < b.path; });
  const bool anySafetensors =
      std::any_of(all.begin(), all.end(), [](const EntryFile& f) { return f.safetensors; });
  if (!anySafetensors) return all;
  std::vector<EntryFile> out;
  for (EntryFile& f : all) {
    if (!f.safetensors) continue;
    // A header that does not parse keeps the file's size here; the loader reports it.
    if (auto header = profile::readSafetensors(f.path); header) f.bytes = header->dataBytes();
    out.push_back(std::move(f));
  }
  return out;
}

// The model's logical size as the loader lays it out: each source at a 4 KiB boundary.
std::uint64_t layoutBytes(const std::vector<std::uint64_t>& sizes, std::uint64_t alignment) {
  std::uint64_t end = 0;
  for (std::uint64_t s : sizes) end = (end + alignment - 1) / alignment * alignment + s;
  return end;
}

std::string pinKey(const std::string& model, const std::string& version) {
  return model + "\n" + version;
}

}  // namespace

std::uint64_t defaultHostPoolBytes(std::uint64_t physicalBytes) {
  return std::min<std::uint64_t>(physicalBytes / 16, 512ull << 20);
}

std::uint64_t defaultCudaPoolBytes(std::uint64_t freeBytes) {
  return freeBytes / 10 * 9;
}

DevicePoolHost::DevicePoolHost(DevicePoolHostOptions options) : options_(std::move(options)) {}

DevicePoolHost::~DevicePoolHost() {
  stop();
}

void DevicePoolHost::say(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void DevicePoolHost::setAcceptingWork(std::function<bool()> accepting) {
  std::lock_guard lock(mu_);
  accepting_ = std::move(accepting);
}

Result<void> DevicePoolHost::start(const std::vector<AgentGpu>& gpus) {
  const DevicePoolConfig& c = options_.config;
  if (c.enabled.has_value() && !*c.enabled) {
    backendName_ = "off";
    say("device pool off (devicePool.enabled: false)");
    return {};
  }
  auto created = create(gpus);
  if (created) return {};
  // Whatever was made before the failure goes.
  registry_.reset();
  loader_.reset();
  pool_.reset();
  backend_.reset();
  if (!c.enabled.has_value()) {
    createError_ = created.error().message;
    backendName_ = "none";
    say("device pool not created (devicePool.enabled: auto; the agent runs without one): " +
        createError_);
    return {};
  }
  return fail(Error::precondition(
      created.error().message +
      " (set devicePool.size or devicePool.backend, or devicePool.enabled: auto or false)"));
}

Result<void> DevicePoolHost::create(const std::vector<AgentGpu>& gpus) {
  const DevicePoolConfig& c = options_.config;
  const bool virtualGpus =
      options_.gpuSource != "nvml" ||
      std::any_of(gpus.begin(), gpus.end(), [](const AgentGpu& g) { return g.isVirtual; });
  std::string backend = c.backend;
  if (backend == "auto") {
    if (virtualGpus) {
      backend = "host";
      backendReason_ = "auto: the node's GPUs are virtual (" + options_.gpuSource +
                       "), so the pool is host memory";
    } else {
      auto cuda = devpool::makeBackend("cuda");
      if (cuda) {
        backend_ = std::move(*cuda);
        backendReason_ = "auto: libcudart loaded and GPU 0 answered";
      } else {
        backend = "host";
        backendReason_ =
            "auto: CUDA is not usable (" + cuda.error().message + "), so the pool is host memory";
      }
    }
  } else {
    backendReason_ = "devicePool.backend: " + backend;
  }
  if (!backend_) {
    auto made = devpool::makeBackend(backend);
    if (!made) return fail(Error::precondition("device pool: " + made.error().message));
    backend_ = std::move(*made);
  }
  backendName_ = std::string(backend_->name());

  std::uint64_t size = static_cast<std::uint64_t>(c.sizeBytes);
  if (size == 0) {
    if (backendName_ == "cuda") {
      std::uint64_t freeBytes = 0;
      for (const AgentGpu& g : gpus) {
        if (!g.isVirtual && g.memoryMib > 0) {
          freeBytes = static_cast<std::uint64_t>(std::max<std::int64_t>(
                          g.memoryMib - std::max<std::int64_t>(g.usedMib, 0), 0))
                      << 20;
          break;
        }
      }
      if (freeBytes == 0) {
        // The CUDA backend describes itself with its free memory: "... (N MiB free) ...".
        static const std::regex kFree(R"(\((\d+) MiB free\))");
        std::smatch m;
        const std::string text = backend_->describe();
        if (std::regex_search(text, m, kFree)) freeBytes = std::stoull(m[1].str()) << 20;
      }
      if (freeBytes == 0) {
        return fail(Error::precondition(
            "device pool: the GPU's free memory is unknown; set devicePool.size"));
      }
      size = defaultCudaPoolBytes(freeBytes);
    } else {
      const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
      size = defaultHostPoolBytes(pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) *
                                                              static_cast<std::uint64_t>(page)
                                                        : 0);
    }
  }
  const std::uint64_t blockBytes = static_cast<std::uint64_t>(c.blockBytes);
  if (size < blockBytes) {
    return fail(Error::precondition("device pool: " + std::to_string(size) +
                                    " bytes is less than one block of " +
                                    std::to_string(blockBytes)));
  }
  auto pool = devpool::BlockPool::create(*backend_, {size, blockBytes});
  if (!pool) {
    return fail(Error::precondition("device pool: " + std::string(backendName_) + " arena of " +
                                    std::to_string(size) + " bytes: " + pool.error().message));
  }
  pool_ = std::move(*pool);
  devpool::LoaderOptions lo;
  lo.readerThreads = c.readerThreads;
  // Staging buffers are pinned memory: a small pool gets small chunks.
  lo.chunkBytes = std::clamp<std::uint64_t>(size / 16 / kMiB * kMiB, kMiB, 16 * kMiB);
  auto loader = devpool::Loader::create(*pool_, lo);
  if (!loader) {
    return fail(Error::precondition("device pool: loader: " + loader.error().message));
  }
  loader_ = std::move(*loader);
  registry_ = std::make_unique<devpool::ModelRegistry>(*loader_);
  registryWork_ = std::make_unique<RegistryWork>(*registry_);
  registryMemory_ = std::make_unique<RegistryDeviceMemory>(*registry_, options_.drainTimeoutMs);
  const devpool::BlockPoolStats st = pool_->stats();
  say("device pool: " + backendName_ + " (" + backendReason_ + "), " +
      std::to_string(st.totalBytes() >> 20) + " MiB in " + std::to_string(st.totalBlocks) +
      " blocks of " + std::to_string(st.blockBytes >> 10) + " KiB; " + backend_->describe());
  return {};
}

void DevicePoolHost::spawn(std::function<void()> fn) {
  // Under mu_ (the caller holds it). A finished worker has left mu_ for good: joining it here
  // only reaps its thread.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished->load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  workers_.push_back({std::thread([fn = std::move(fn), finished] {
                        fn();
                        finished->store(true);
                      }),
                      finished});
}

void DevicePoolHost::stop() {
  std::vector<Worker> workers;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    for (auto& [model, job] : jobs_) {
      if (job.cancel) job.cancel->cancel();
      if (registry_) (void)registry_->cancelLoading(model);
    }
    workers.swap(workers_);
  }
  for (Worker& w : workers) {
    if (w.thread.joinable()) w.thread.join();
  }
  std::map<std::string, std::string> pins;
  {
    std::lock_guard lock(mu_);
    pins.swap(pins_);
  }
  if (options_.cache != nullptr) {
    for (const auto& [key, entry] : pins) (void)options_.cache->unpin(entry);
  }
}

Result<json> DevicePoolHost::startLoad(const std::string& model, const std::string& version) {
  if (!registry_) {
    return fail(
        Error::precondition("this agent hosts no device pool" +
                            (createError_.empty() ? std::string() : " (" + createError_ + ")")));
  }
  std::function<bool()> accepting;
  bool stopped = false;
  {
    std::lock_guard lock(mu_);
    accepting = accepting_;
    stopped = stopped_;
  }
  if (stopped || (accepting && !accepting())) {
    return fail(Error::precondition("the node takes no new work (draining or stopping)"));
  }
  TESSERA_RETURN_IF_ERROR(checkModelName(model));
  const std::string label = version.empty() ? "default" : version;
  if (!version.empty()) {
    if (auto ok = checkModelName(model + "@" + version); !ok) {
      return fail(Error::invalid("version \"" + version + "\": letters, digits, '.', '_', '-'"));
    }
  }
  if (options_.cache == nullptr) return fail(Error::precondition("this agent has no model cache"));
  std::vector<std::string> candidates;
  if (!version.empty()) candidates.push_back(model + "@" + version);
  candidates.push_back(model);
  std::string entry;
  bool cached = false;
  std::vector<std::uint64_t> sizes;
  for (const std::string& c : candidates) {
    if (options_.cache->contains(c)) {
      entry = c;
      cached = true;
      for (const EntryFile& f : entryFiles(options_.cache->pathOf(c))) sizes.push_back(f.bytes);
      break;
    }
    for (ModelSource* s : options_.sources) {
      auto files = s->list(c);
      if (!files) continue;
      entry = c;
      for (const SourceFile& f : *files) {
        if (f.path.size() > 12 && f.path.ends_with(".safetensors"))
          sizes.push_back(static_cast<std::uint64_t>(f.bytes));
      }
      if (sizes.empty()) {
        for (const SourceFile& f : *files) sizes.push_back(static_cast<std::uint64_t>(f.bytes));
      }
      break;
    }
    if (!entry.empty()) break;
  }
  if (entry.empty()) {
    return fail(Error::notFound("model " + model + (version.empty() ? "" : " version " + version) +
                                " is neither in the node cache nor in any model source"));
  }
  const std::uint64_t needed =
      pool_->blocksFor(layoutBytes(sizes, loader_->options().sourceAlignment)) *
      pool_->blockBytes();
  const devpool::BlockPoolStats st = pool_->stats();
  std::lock_guard lock(mu_);
  if (jobs_.contains(model)) {
    return fail(Error::precondition("model " + model + " is already " + jobs_[model].phase +
                                    " (version " + jobs_[model].version + ")"));
  }
  if (auto s = registry_->status(model)) {
    if (s->loading) {
      return fail(Error::precondition("model " + model + " is already loading version " +
                                      s->loading->version));
    }
    if (s->serving && s->serving->version == label) {
      return fail(Error::exists("model " + model + " version " + label + " is already serving"));
    }
  }
  if (needed > st.freeBytes()) {
    return fail(Error::exhausted("device pool too small: model " + model + " version " + label +
                                 " needs " + std::to_string(needed) + " bytes, " +
                                 std::to_string(st.freeBytes()) + " free (of " +
                                 std::to_string(st.totalBytes()) + ")"));
  }
  Job job;
  job.version = label;
  job.entry = entry;
  job.phase = cached ? "loading" : "staging";
  job.startedMs = clock_.nowMs();
  job.cancel = std::make_shared<devpool::CancelToken>();
  jobs_[model] = job;
  failures_.erase(model);
  spawn([this, model, label, entry, cached, cancel = job.cancel] {
    runLoad(model, label, entry, cached, cancel);
  });
  return json{{"model", model},
              {"version", label},
              {"cacheEntry", entry},
              {"state", job.phase},
              {"neededBytes", needed}};
}

void DevicePoolHost::runLoad(std::string model, std::string version, std::string entry, bool staged,
                             std::shared_ptr<devpool::CancelToken> cancel) {
  auto failWith = [&](const std::string& message) {
    say("device pool: loading " + model + " version " + version + " failed: " + message);
    std::lock_guard lock(mu_);
    jobs_.erase(model);
    failures_[model] = version + "\n" + message;
  };
  if (!staged) {
    auto st = options_.cache->stage(entry, options_.sources);
    if (!st) return failWith("staging " + entry + ": " + st.error().message);
  }
  if (auto pinned = options_.cache->pin(entry); !pinned) {
    return failWith("pinning " + entry + ": " + pinned.error().message);
  }
  {
    std::lock_guard lock(mu_);
    pins_[pinKey(model, version)] = entry;
    jobs_[model].phase = "loading";
  }
  if (options_.beforeLoad) options_.beforeLoad(model);
  bool cancelled = false;
  {
    std::lock_guard lock(mu_);
    cancelled = cancel->cancelled();
    if (cancelled) {
      jobs_.erase(model);
      failures_[model] = version + "\ncancelled";
    }
  }
  if (cancelled) {
    unpinVersion(model, version);
    say("device pool: loading " + model + " version " + version + " cancelled");
    return;
  }
  devpool::ModelSpec spec;
  spec.name = model;
  spec.version = version;
  for (const EntryFile& f : entryFiles(options_.cache->pathOf(entry))) {
    spec.sources.push_back(f.safetensors ? devpool::LoadSource::safetensors(f.path)
                                         : devpool::LoadSource::file(f.path));
  }
  devpool::LoadControl control;
  control.cancel = cancel.get();
  devpool::SwitchOptions options;
  options.drainTimeoutMs = options_.drainTimeoutMs;
  say("device pool: loading " + model + " version " + version + " from cache entry " + entry);
  auto loaded = registry_->loadVersion(spec, control, options);
  if (!loaded) {
    unpinVersion(model, version);
    return failWith(loaded.error().message);
  }
  {
    std::lock_guard lock(mu_);
    jobs_.erase(model);
    lastBandwidth_[model] = loaded->load.bytesPerSecond() / 1e6;
  }
  if (!loaded->previousVersion.empty()) unpinVersion(model, loaded->previousVersion);
  say("device pool: " + model + " version " + version + " serving (" +
      std::to_string(loaded->load.bytes) + " bytes at " +
      std::to_string(static_cast<std::int64_t>(loaded->load.bytesPerSecond() / 1e6)) + " MB/s" +
      (loaded->previousVersion.empty() ? std::string()
                                       : ", replaced version " + loaded->previousVersion) +
      (loaded->drainTimedOut ? ", " + std::to_string(loaded->leasesLeft) +
                                   " lease(s) on the old version outlived the drain timeout"
                             : std::string()) +
      ")");
}

void DevicePoolHost::unpinVersion(const std::string& model, const std::string& version) {
  std::string entry;
  {
    std::lock_guard lock(mu_);
    const auto it = pins_.find(pinKey(model, version));
    if (it == pins_.end()) return;
    entry = it->second;
    pins_.erase(it);
  }
  if (options_.cache != nullptr) (void)options_.cache->unpin(entry);
}

Result<void> DevicePoolHost::cancel(const std::string& model) {
  if (!registry_) return fail(Error::precondition("this agent hosts no device pool"));
  bool found = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(model); it != jobs_.end() && it->second.phase != "unloading") {
      it->second.cancel->cancel();
      found = true;
    }
  }
  if (registry_->cancelLoading(model)) found = true;
  if (!found) return fail(Error::notFound("model " + model + " is not loading"));
  return {};
}

Result<void> DevicePoolHost::startUnload(const std::string& model) {
  if (!registry_) return fail(Error::precondition("this agent hosts no device pool"));
  const auto s = registry_->status(model);
  std::lock_guard lock(mu_);
  if (auto it = jobs_.find(model); it != jobs_.end()) {
    if (it->second.phase == "unloading") {
      return fail(Error::precondition("model " + model + " is already unloading"));
    }
    if (!s || !s->serving) {
      // Only a load in progress: unloading it means stopping it.
      it->second.cancel->cancel();
      (void)registry_->cancelLoading(model);
      return {};
    }
  }
  if (!s || !s->serving) return fail(Error::notFound("model " + model + " is not loaded"));
  if (stopped_) return fail(Error::precondition("the agent is stopping"));
  Job job;
  job.version = s->serving->version;
  job.phase = "unloading";
  job.startedMs = clock_.nowMs();
  job.cancel = std::make_shared<devpool::CancelToken>();
  // A load waiting behind it would race the unload: only one job per model.
  jobs_.emplace(model, job);
  spawn([this, model] { runUnload(model); });
  return {};
}

void DevicePoolHost::runUnload(std::string model) {
  devpool::SwitchOptions options;
  options.drainTimeoutMs = options_.drainTimeoutMs;
  auto unloaded = registry_->unload(model, options);
  {
    std::lock_guard lock(mu_);
    jobs_.erase(model);
  }
  if (!unloaded) {
    say("device pool: unloading " + model + " failed: " + unloaded.error().message);
    return;
  }
  unpinVersion(model, unloaded->previousVersion);
  say("device pool: unloaded " + model + " version " + unloaded->previousVersion +
      (unloaded->drainTimedOut ? " (" + std::to_string(unloaded->leasesLeft) +
                                     " lease(s) outlived the drain timeout; its blocks go with "
                                     "the last)"
                               : ""));
}

std::size_t DevicePoolHost::Work::inFlight() const {
  if (!host_.registryWork_) return 0;
  std::size_t n = host_.registryWork_->inFlight();
  std::vector<std::string> preparing;
  {
    std::lock_guard lock(host_.mu_);
    for (const auto& [model, job] : host_.jobs_) {
      if (job.phase == "staging") ++n;
      if (job.phase == "loading") preparing.push_back(model);
    }
  }
  // A load between its pin and the registry taking it over.
  for (const std::string& m : preparing) {
    const auto s = host_.registry_->status(m);
    if (!s || !s->loading) ++n;
  }
  return n;
}

Result<void> DevicePoolHost::Memory::releaseAll() {
  if (!host_.registryMemory_) return {};
  {
    std::lock_guard lock(host_.mu_);
    for (auto& [model, job] : host_.jobs_) {
      if (job.cancel) job.cancel->cancel();
    }
  }
  auto released = host_.registryMemory_->releaseAll();
  // Unloaded models no longer need their cache entries pinned.
  std::map<std::string, std::string> pins;
  {
    std::lock_guard lock(host_.mu_);
    for (auto it = host_.pins_.begin(); it != host_.pins_.end();) {
      const std::string model = it->first.substr(0, it->first.find('\n'));
      const auto s = host_.registry_->status(model);
      const std::string version = it->first.substr(it->first.find('\n') + 1);
      const bool resident = s && s->serving && s->serving->version == version;
      if (resident || host_.jobs_.contains(model)) {
        ++it;
      } else {
        pins.insert(*it);
        it = host_.pins_.erase(it);
      }
    }
  }
  if (host_.options_.cache != nullptr) {
    for (const auto& [key, entry] : pins) (void)host_.options_.cache->unpin(entry);
  }
  const devpool::BlockPoolStats st = host_.pool_->stats();
  if (!released) return fail(released.error());
  if (st.freeBlocks != st.totalBlocks) {
    return fail(Error::precondition(std::to_string(st.totalBlocks - st.freeBlocks) +
                                    " block(s) still held (leases outlived the drain)"));
  }
  return {};
}

json DevicePoolHost::models() const {
  json list = json::array();
  if (!registry_) return list;
  std::map<std::string, Job> jobs;
  std::map<std::string, std::string> failures;
  std::map<std::string, double> bandwidth;
  {
    std::lock_guard lock(mu_);
    jobs = jobs_;
    failures = failures_;
    bandwidth = lastBandwidth_;
  }
  const Millis now = clock_.nowMs();
  auto versionJson = [&](const std::string& model, const devpool::VersionStatus& v) {
    json e{{"version", v.version},
           {"state", devpool::versionStateName(v.state)},
           {"doneBytes", v.doneBytes},
           {"totalBytes", v.totalBytes},
           {"leases", v.leases},
           {"blocks", v.totalBytes > 0 ? pool_->blocksFor(v.totalBytes) : 0}};
    if (!v.message.empty()) e["message"] = v.message;
    double mbps = v.loadBytesPerSecond / 1e6;
    if (v.state == devpool::VersionState::kLoading) {
      const auto job = jobs.find(model);
      const Millis elapsed = job == jobs.end() ? 0 : now - job->second.startedMs;
      mbps =
          elapsed > 0 ? static_cast<double>(v.doneBytes) / 1e3 / static_cast<double>(elapsed) : 0;
    }
    e["bandwidthMBps"] = mbps;
    return e;
  };
  std::set<std::string> seen;
  for (const devpool::ModelStatus& m : registry_->list()) {
    seen.insert(m.name);
    json e{{"model", m.name}};
    std::string state = "unloaded";
    if (m.lastFailure) {
      e["lastFailure"] = versionJson(m.name, *m.lastFailure);
      state = "failed";
    }
    json retiring = json::array();
    for (const devpool::VersionStatus& v : m.retiring) retiring.push_back(versionJson(m.name, v));
    if (!retiring.empty()) {
      e["retiring"] = retiring;
      state = retiring.back()["state"];
    }
    if (m.serving) {
      e["serving"] = versionJson(m.name, *m.serving);
      state = e["serving"]["state"];
    }
    if (m.loading) {
      e["loading"] = versionJson(m.name, *m.loading);
      state = "loading";
    }
    if (const auto j = jobs.find(m.name); j != jobs.end()) {
      if (j->second.phase == "staging") state = "staging";
      // (A load whose version serves already is draining the old one: "retiring" shows it.)
      const bool serves = m.serving && m.serving->version == j->second.version;
      if (!m.loading && !serves && (j->second.phase == "staging" || j->second.phase == "loading")) {
        // Staging, or pinned and about to enter the registry.
        e["loading"] = {{"version", j->second.version},
                        {"state", j->second.phase},
                        {"cacheEntry", j->second.entry}};
        state = j->second.phase;
      }
      if (j->second.phase == "unloading" && state == "ready") state = "draining";
    }
    if (const auto f = failures.find(m.name); f != failures.end() && !m.lastFailure) {
      e["lastFailure"] = {{"version", f->second.substr(0, f->second.find('\n'))},
                          {"state", "failed"},
                          {"message", f->second.substr(f->second.find('\n') + 1)}};
      if (state == "unloaded") state = "failed";
    }
    if (const auto b = bandwidth.find(m.name); b != bandwidth.end()) e["lastLoadMBps"] = b->second;
    e["state"] = state;
    list.push_back(std::move(e));
  }
  for (const auto& [model, job] : jobs) {
    if (seen.contains(model)) continue;
    seen.insert(model);
    list.push_back(
        {{"model", model},
         {"state", job.phase},
         {"loading", {{"version", job.version}, {"state", job.phase}, {"cacheEntry", job.entry}}}});
  }
  for (const auto& [model, f] : failures) {
    if (seen.contains(model)) continue;
    list.push_back({{"model", model},
                    {"state", "failed"},
                    {"lastFailure",
                     {{"version", f.substr(0, f.find('\n'))},
                      {"state", "failed"},
                      {"message", f.substr(f.find('\n') + 1)}}}});
  }
  return list;
}

json DevicePoolHost::status() const {
  json s{{"enabled", registry_ != nullptr}, {"backend", backendName_}};
  if (!backendReason_.empty()) s["backendReason"] = backendReason_;
  if (!createError_.empty()) s["error"] = createError_;
  if (!pool_) return s;
  const devpool::BlockPoolStats st = pool_->stats();
  s["device"] = backend_->describe();
  s["capacityBytes"] = st.totalBytes();
  s["freeBytes"] = st.freeBytes();
  s["usedBytes"] = st.totalBytes() - st.freeBytes();
  s["blockBytes"] = st.blockBytes;
  s["blocks"] = st.totalBlocks;
  s["freeBlocks"] = st.freeBlocks;
  s["models"] = models();
  return s;
}

json DevicePoolHost::heartbeatFields() const {
  if (!pool_ || !registry_) return json::object();
  const devpool::BlockPoolStats st = pool_->stats();
  json resident = json::array();
  json loading = json::array();
  for (const devpool::ModelStatus& m : registry_->list()) {
    if (m.serving) {
      resident.push_back({{"model", m.name},
                          {"version", m.serving->version},
                          {"blocks", m.serving->totalBytes > 0 ? pool_->blocksFor(m.serving->totalBytes) : 0}});
    }
    if (m.loading) {
      loading.push_back({{"model", m.name},
                         {"version", m.loading->version},
                         {"doneBytes", m.loading->doneBytes},
                         {"totalBytes", m.loading->totalBytes}});
    }
  }
  return {{"devicePool",
           {{"blockBytes", st.blockBytes},
            {"blocks", st.totalBlocks},
            {"freeBlocks", st.freeBlocks},
            {"resident", std::move(resident)},
            {"loading", std::move(loading)}}}};
}

void DevicePoolHost::adminRoutes(httplib::Server& server) {
  using Req = httplib::Request;
  using Res = httplib::Response;
  server.Get("/models", [this](const Req&, Res& res) {
    json body = status();
    if (!body.contains("models")) body["models"] = json::array();
    sendJson(res, 200, body);
  });
  server.Post(R"(/models/(.+)/load)", [this](const Req& req, Res& res) {
    std::string version;
    if (!req.body.empty()) {
      const json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || (body.contains("version") && !body["version"].is_string())) {
        return sendError(res, Error::invalid("body: expected {\"version\": \"v2\"}"));
      }
      version = body.value("version", "");
    }
    auto started = startLoad(req.matches[1].str(), version);
    if (!started) return sendError(res, started.error());
    sendJson(res, 202, *started);
  });
  server.Post(R"(/models/(.+)/cancel)", [this](const Req& req, Res& res) {
    auto cancelled = cancel(req.matches[1].str());
    if (!cancelled) return sendError(res, cancelled.error());
    sendJson(res, 202, {{"model", req.matches[1].str()}, {"cancelled", true}});
  });
  server.Delete(R"(/models/(.+))", [this](const Req& req, Res& res) {
    auto unloading = startUnload(req.matches[1].str());
    if (!unloading) return sendError(res, unloading.error());
    sendJson(res, 202, {{"model", req.matches[1].str()}, {"state", "draining"}});
  });
}

}  // namespace tessera::agent
