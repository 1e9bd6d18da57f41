#pragma once
// The node side of Tessera's DRA driver (docs/dra.md): what kubelet talks to.
//
//  - Registration: serves kubelet's plugin registration API on
//    <registryDir>/<driver>-reg.sock. Kubelet's plugin watcher finds the socket, calls GetInfo
//    (type DRAPlugin, the driver name, the endpoint <pluginDir>/<driver>/dra.sock, services
//    "v1.DRAPlugin"), then NotifyRegistrationStatus.
//  - DRAPlugin v1 on the endpoint: NodePrepareResources reads each claim from the API server
//    (ClaimSource), resolves its allocation on the node's inventory and writes its CDI spec
//    (dra/prepare.h), answering the CDI ids and share ids; NodeUnprepareResources removes the
//    spec. Both are idempotent (kubelet retries), and a failure is that claim's error in the
//    answer, not a failed call.
//  - DRAResourceHealth (v1, and v1alpha1 as the 1.34 to 1.36 kubelets call it) on the same
//    endpoint: NodeWatchResources streams every published device's health (dra/slices.h
//    deviceHealth) at once, again on every change, and at least every healthResendInterval;
//    each entry is stamped with the time of the agent's last GPU sample (setInventory), so a
//    stalled agent reads as unknown to kubelet after healthTimeout. A stream ends when kubelet
//    cancels it or the driver stops or serves its sockets again.
//  - A kubelet restart: a restarted kubelet scans the registry again and calls GetInfo on the
//    socket that is there; a kubelet (or an operator) that removed the sockets is noticed by
//    the watch thread, which serves both again so that the plugin watcher registers it anew.
//
// Threading: every public method may be called from any thread; gRPC handlers run on gRPC's
// threads and take mu_ only to read the inventory.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/inventory.h"
#include "dra/prepare.h"
#include "dra/slices.h"

namespace grpc {
class Server;
}

namespace tessera::k8s {
class KubeClient;
}

namespace tessera::dra {

inline constexpr std::string_view kDefaultRegistryDir = "/var/lib/kubelet/plugins_registry";
inline constexpr std::string_view kDefaultPluginDir = "/var/lib/kubelet/plugins";
inline constexpr std::string_view kDefaultCdiDir = "/var/run/cdi";
inline constexpr std::string_view kPluginType = "DRAPlugin";
inline constexpr std::string_view kDraService = "v1.DRAPlugin";
inline constexpr std::string_view kHealthService = "v1.DRAResourceHealth";
inline constexpr std::string_view kHealthServiceV1alpha1 = "v1alpha1.DRAResourceHealth";

// Where ResourceClaims are read from.
// Threading: implementations must allow calls from several threads.
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // The claim object; nullopt when the API server has none of that name.
  virtual Result<std::optional<nlohmann::json>> claim(const std::string& ns,
                                                      const std::string& name) = 0;
};
// GET /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name} through `client`
// (borrowed; it must outlive the source).
std::unique_ptr<ClaimSource> apiServerClaims(k8s::KubeClient& client);

struct DriverConfig {
  std::string driver = std::string(kDriverName);
  std::string nodeName;
  std::string registryDir = std::string(kDefaultRegistryDir);
  std::string pluginDir = std::string(kDefaultPluginDir);
  std::string cdiDir = std::string(kDefaultCdiDir);
  deviceplugin::EnvOptions env;
  std::chrono::milliseconds watchInterval{1000};  // socket check
  // The health stream: the whole device list again at least this often, and the timeout
  // kubelet is told (a status it has not heard renewed within it reads as unknown).
  std::chrono::milliseconds healthResendInterval{10'000};
  std::chrono::seconds healthTimeout{30};
  std::function<void(const std::string&)> log;    // nullptr: silent
};

class Driver {
 public:
  // `claims` is borrowed and must outlive the driver.
  Driver(DriverConfig config, ClaimSource& claims, deviceplugin::Inventory inventory = {});
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Serves the DRAPlugin endpoint, then the registration socket, and starts the watch thread.
  // Errors: a directory or socket that cannot be created or served.
  Result<void> start();
  void stop();

  // The agent's latest view of the GPUs (every sample, changed or not: its time stamps the
  // health stream's entries).
  void setInventory(deviceplugin::Inventory inventory);
  deviceplugin::Inventory inventory() const;

  std::string registrationSocket() const;
  std::string pluginSocket() const;  // the endpoint GetInfo names
  // NotifyRegistrationStatus calls that said registered, and the last refusal's error.
  int registrations() const { return registrations_.load(); }
  std::string lastRegistrationError() const;
  // Times the sockets were served (1 after start; +1 per restart the watch thread noticed).
  int serves() const { return serves_.load(); }
  // Health streams kubelet holds open now, and the timeout they tell kubelet.
  int healthStreams() const { return healthStreams_.load(); }
  std::chrono::seconds healthTimeout() const { return config_.healthTimeout; }

  // What the gRPC handlers do, callable directly.
  Result<PreparedClaim> prepare(const ClaimRef& claim);
  Result<void> unprepare(const ClaimRef& claim);

  class Services;  // the gRPC services (driver.cc)

 private:
  friend class Services;
  Result<void> serve();
  void shutdownServers();
  void watch();
  void say(const std::string& message) const;

  DriverConfig config_;
  ClaimSource& claims_;
  mutable std::mutex mu_;  // inventory, servers, registration error, stop flag
  deviceplugin::Inventory inventory_;
  std::int64_t observedAtSec_ = 0;  // Unix seconds of the last setInventory (or construction)
  std::uint64_t inventoryVersion_ = 0;  // +1 per setInventory: health streams look again
  std::condition_variable healthWake_;
  std::atomic<int> healthStreams_{0};
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> pluginServer_, registrationServer_;
  std::string pluginId_, registrationId_;  // identities of the sockets as served
  std::string lastRegistrationError_;
  bool stopping_ = false;
  std::atomic<int> registrations_{0};
  std::atomic<int> serves_{0};
  std::condition_variable wake_;
  std::thread watcher_;
};

}  // namespace tessera::dra
