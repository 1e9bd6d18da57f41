#include "devpool/registry.h"

#include <chrono>

namespace tessera::devpool {

namespace internal {

// One version of a model. Fields other than the lease count are guarded by the registry's
// mutex; `model` is set once, before the version becomes visible to acquire().
struct ResidentVersion {
  std::string version;
  VersionState state = VersionState::kLoading;
  std::string message;
  CancelToken cancel;
  std::atomic<std::uint64_t> doneBytes{0}, totalBytes{0};
  std::unique_ptr<LoadedModel> model;

  std::mutex leaseMutex;
  std::condition_variable leasesChanged;
  std::int64_t leases = 0;  // guarded by leaseMutex

  std::int64_t leaseCount() {
    std::lock_guard lock(leaseMutex);
    return leases;
  }
};

}  // namespace internal

using internal::ResidentVersion;

const char* versionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading:
      return "loading";
    case VersionState::kReady:
      return "ready";
    case VersionState::kDraining:
      return "draining";
    case VersionState::kUnloading:
      return "unloading";
    case VersionState::kFailed:
      return "failed";
  }
  return "unknown";
}

ModelLease::~ModelLease() {
  release();
}

ModelLease& ModelLease::operator=(ModelLease&& other) noexcept {
  if (this != &other) {
    release();
    version_ = std::move(other.version_);
  }
  return *this;
}

const std::string& ModelLease::version() const {
  return version_->version;
}
const LoadedModel& ModelLease::model() const {
  return *version_->model;
}

void ModelLease::release() {
  if (version_ == nullptr) return;
  {
    std::lock_guard lock(version_->leaseMutex);
    --version_->leases;
  }
  version_->leasesChanged.notify_all();
  version_.reset();
}

namespace {

VersionStatus versionStatus(ResidentVersion& v) {
  VersionStatus s;
  s.version = v.version;
  s.state = v.state;
  s.message = v.message;
  s.doneBytes = v.doneBytes.load();
  s.totalBytes = v.totalBytes.load();
  s.leases = v.leaseCount();
  if (v.model) s.loadBytesPerSecond = v.model->stats.bytesPerSecond();
  return s;
}

}  // namespace

void ModelRegistry::transition(const std::string& name, ResidentVersion& v, VersionState state) {
  v.state = state;
  if (listener_) listener_(name, v.version, state);
}

void ModelRegistry::setTransitionListener(TransitionListener listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

Result<SwitchResult> ModelRegistry::loadVersion(const ModelSpec& spec, const LoadControl& control,
                                                const SwitchOptions& options) {
  if (spec.name.empty()) return fail(Error::invalid("model name is empty"));
  if (spec.version.empty())
    return fail(Error::invalid("model " + spec.name + ": version is empty"));
  auto v = std::make_shared<ResidentVersion>();
  v->version = spec.version;
  {
    std::lock_guard lock(mutex_);
    Entry& entry = models_[spec.name];
    if (entry.loading) {
      return fail(Error::precondition("model " + spec.name + " is already loading version " +
                                      entry.loading->version));
    }
    if (entry.serving && entry.serving->version == spec.version) {
      return fail(
          Error::exists("model " + spec.name + " version " + spec.version + " is already serving"));
    }
    entry.loading = v;
    transition(spec.name, *v, VersionState::kLoading);
  }

  LoadControl inner;
  inner.cancel = &v->cancel;
  inner.progressIntervalMs = control.progressIntervalMs;
  inner.progress = [&](std::uint64_t done, std::uint64_t total) {
    v->doneBytes.store(done);
    v->totalBytes.store(total);
    if (control.cancel != nullptr && control.cancel->cancelled()) v->cancel.cancel();
    if (control.progress) control.progress(done, total);
  };
  if (control.cancel != nullptr && control.cancel->cancelled()) v->cancel.cancel();
  auto loaded = loader_.load(spec, inner);

  std::shared_ptr<ResidentVersion> old;
  SwitchResult result;
  {
    std::lock_guard lock(mutex_);
    Entry& entry = models_[spec.name];
    entry.loading.reset();
    if (!loaded) {
      v->message = loaded.error().message;
      transition(spec.name, *v, VersionState::kFailed);
      entry.lastFailure = versionStatus(*v);  // kept for status(), even with nothing resident
      return fail(loaded.error());
    }
    result.load = loaded->stats;
    v->model = std::make_unique<LoadedModel>(std::move(*loaded));
    transition(spec.name, *v, VersionState::kReady);
    old = std::move(entry.serving);
    entry.serving = v;  // the flip: acquire() sees the new version from here on
    if (old) {
      transition(spec.name, *old, VersionState::kDraining);
      entry.retiring.push_back(old);
      result.previousVersion = old->version;
    }
  }
  result.servingVersion = spec.version;
  if (old) drainAndUnload(spec.name, old, options, result);
  return result;
}

void ModelRegistry::drainAndUnload(const std::string& name,
                                   const std::shared_ptr<ResidentVersion>& old,
                                   const SwitchOptions& options, SwitchResult& result) {
  {
    std::unique_lock lock(old->leaseMutex);
    const bool drained = old->leasesChanged.wait_for(
        lock, std::chrono::milliseconds(std::max(0, options.drainTimeoutMs)),
        [&] { return old->leases == 0; });
    result.drainTimedOut = !drained;
    result.leasesLeft = old->leases;
  }
  std::unique_ptr<LoadedModel> freed;
  {
    std::lock_guard lock(mutex_);
    transition(name, *old, VersionState::kUnloading);
    auto it = models_.find(name);
    if (it != models_.end()) {
      auto& retiring = it->second.retiring;
      std::erase(retiring, old);
      if (!it->second.serving && !it->second.loading && retiring.empty() &&
          !it->second.lastFailure) {
        models_.erase(it);
      }
    }
    // With leases left (a drain timeout) the blocks stay with the version until the last
    // lease ends; otherwise nobody can reach the model any more and it is freed here.
    if (old->leaseCount() == 0) freed = std::move(old->model);
  }
  freed.reset();  // returns the blocks, outside the registry's lock
}

Result<void> ModelRegistry::cancelLoading(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second.loading) {
    return fail(Error::notFound("model " + name + " has no version loading"));
  }
  it->second.loading->cancel.cancel();
  return {};
}

Result<SwitchResult> ModelRegistry::unload(const std::string& name, const SwitchOptions& options) {
  std::shared_ptr<ResidentVersion> old;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.serving) {
      return fail(Error::notFound("model " + name + " has no serving version"));
    }
    old = std::move(it->second.serving);
    transition(name, *old, VersionState::kDraining);
    it->second.retiring.push_back(old);
  }
  SwitchResult result;
  result.previousVersion = old->version;
  drainAndUnload(name, old, options, result);
  return result;
}

Result<ModelLease> ModelRegistry::acquire(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second.serving) {
    return fail(Error::notFound("model " + name + " has no serving version"));
  }
  const auto& v = it->second.serving;
  {
    std::lock_guard leaseLock(v->leaseMutex);
    ++v->leases;
  }
  return ModelLease(v);
}

ModelStatus ModelRegistry::statusOf(const std::string& name, const Entry& entry) const {
  ModelStatus s;
  s.name = name;
  if (entry.serving) s.serving = versionStatus(*entry.serving);
  if (entry.loading) s.loading = versionStatus(*entry.loading);
  for (const auto& r : entry.retiring) s.retiring.push_back(versionStatus(*r));
  s.lastFailure = entry.lastFailure;
  return s;
}

std::optional<ModelStatus> ModelRegistry::status(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  return statusOf(name, it->second);
}

std::vector<ModelStatus> ModelRegistry::list() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelStatus> out;
  for (const auto& [name, entry] : models_) out.push_back(statusOf(name, entry));
  return out;
}

}  // namespace tessera::devpool
