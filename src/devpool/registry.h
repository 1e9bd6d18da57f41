#pragma once
// Resident models and their lifecycle. Per model name there is at most one serving version
// and at most one loading version; a version moves
//
//   loading ──► ready ──► draining ──► unloading ──► (gone)
//      └──────► failed
//
// A hot switch loads the new version while the old one keeps serving, then flips the serving
// pointer atomically (an acquire sees the old or the new version, never neither), then drains
// the old one (waits for its leases to end, up to a timeout) and unloads it. A request holds a
// ModelLease on the version it uses; the version's blocks stay allocated while any lease on it
// lives, even past a drain timeout, so memory is never freed under a reader.
//
// Threading: every method is safe from any thread. loadVersion and unload block the calling
// thread for the load and the drain. Lock order: the registry's mutex, then a version's
// mutex; a lease's release takes only its version's mutex. The transition listener runs under
// the registry's mutex and must not call back into the registry. Leases may outlive the
// registry (each holds its version alive); the Loader and its pool must outlive both.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "devpool/loader.h"

namespace tessera::devpool {

enum class VersionState { kLoading, kReady, kDraining, kUnloading, kFailed };
const char* versionStateName(VersionState state);

struct VersionStatus {
  std::string version;
  VersionState state = VersionState::kLoading;
  std::string message;                          // why it failed
  std::uint64_t doneBytes = 0, totalBytes = 0;  // load progress
  std::int64_t leases = 0;
  double loadBytesPerSecond = 0;  // once loaded
};

struct ModelStatus {
  std::string name;
  std::optional<VersionStatus> serving;
  std::optional<VersionStatus> loading;
  std::vector<VersionStatus> retiring;  // draining or unloading
  std::optional<VersionStatus> lastFailure;
};

namespace internal {
struct ResidentVersion;
}

// A hold on one version of a model: its weights stay resident while the lease lives.
// Move-only; owned by one thread at a time.
class ModelLease {
 public:
  ModelLease() = default;
  ~ModelLease();
  ModelLease(ModelLease&& other) noexcept = default;
  ModelLease& operator=(ModelLease&& other) noexcept;
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;

  explicit operator bool() const { return version_ != nullptr; }
  const std::string& version() const;
  const LoadedModel& model() const;
  void release();

 private:
  friend class ModelRegistry;
  explicit ModelLease(std::shared_ptr<internal::ResidentVersion> version)
      : version_(std::move(version)) {}
  std::shared_ptr<internal::ResidentVersion> version_;
};

struct SwitchOptions {
  int drainTimeoutMs = 30'000;
};

struct SwitchResult {
  std::string servingVersion;   // empty after unload
  std::string previousVersion;  // empty when nothing served before
  bool drainTimedOut = false;   // the previous version still had leases at the timeout
  std::int64_t leasesLeft = 0;  // leases on it then; its blocks go when the last one ends
  LoadStats load;               // the new version's load (loadVersion)
};

// name, version, new state: for logs, metrics and tests.
using TransitionListener =
    std::function<void(const std::string& name, const std::string& version, VersionState state)>;

class ModelRegistry {
 public:
  explicit ModelRegistry(Loader& loader) : loader_(loader) {}

  // Loads spec.version of spec.name and makes it the serving version; a version already
  // serving keeps serving until then, and is drained and unloaded afterwards (a hot switch).
  // Fails with kFailedPrecondition when the model already has a loading version, kAlreadyExists
  // when spec.version is the one serving; a failed or cancelled load leaves the serving
  // version as it was.
  Result<SwitchResult> loadVersion(const ModelSpec& spec, const LoadControl& control = {},
                                   const SwitchOptions& options = {});
  // Stops the loading version of `name` (its loadVersion call returns a cancelled error).
  Result<void> cancelLoading(const std::string& name);
  // Drains and unloads the serving version; new acquires fail from the moment it is called.
  Result<SwitchResult> unload(const std::string& name, const SwitchOptions& options = {});

  // A lease on the serving version, or kNotFound when none serves.
  Result<ModelLease> acquire(const std::string& name);

  std::optional<ModelStatus> status(const std::string& name) const;
  std::vector<ModelStatus> list() const;

  void setTransitionListener(TransitionListener listener);

 private:
  struct Entry {
    std::shared_ptr<internal::ResidentVersion> serving, loading;
    std::vector<std::shared_ptr<internal::ResidentVersion>> retiring;
    std::optional<VersionStatus> lastFailure;
  };

  void transition(const std::string& name, internal::ResidentVersion& v, VersionState state);
  // Waits for the leases of `old` (draining) to end, then unloads it.
  void drainAndUnload(const std::string& name,
                      const std::shared_ptr<internal::ResidentVersion>& old,
                      const SwitchOptions& options, SwitchResult& result);
  ModelStatus statusOf(const std::string& name, const Entry& entry) const;

  Loader& loader_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> models_;
  TransitionListener listener_;
};

}  // namespace tessera::devpool
