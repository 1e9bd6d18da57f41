#pragma once
// The kubelet device plugin (API v1beta1; docs/device-plugin.md). It serves the DevicePlugin
// gRPC service on <directory>/tessera-<resource>.sock, registers with kubelet on
// <directory>/kubelet.sock, advertises each GPU as `slotsPerGpu` slot devices and hands every
// container the GPUs the control plane booked for its pod:
//
//   GetPreferredAllocation(N)  picks the oldest pending booking of N GPUs, answers N free
//                              slots on exactly its GPUs and remembers slot set -> booking;
//                              without a pending booking, slots by NVLink/NUMA/load.
//   Allocate(IDs)              the booking remembered for exactly those IDs (else the oldest
//                              pending one of that size): its GPUs' environment, and a
//                              confirmation to the control plane. No booking: an error,
//                              which fails the pod's admission in kubelet.
//
// A kubelet restart (kubelet.sock recreated, or our socket removed) is noticed by a watch
// thread, which serves again and registers again.
//
// Threading: every public method may be called from any thread. Internally, the gRPC
// handlers of GetPreferredAllocation and Allocate run one at a time (kubelet calls them under
// its own lock anyway); lock order: allocation mutex, then state mutex.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/bookings.h"
#include "deviceplugin/inventory.h"

namespace grpc {
class Server;
}

namespace tessera::deviceplugin {

inline constexpr std::string_view kApiVersion = "v1beta1";
inline constexpr std::string_view kDefaultDirectory = "/var/lib/kubelet/device-plugins";
inline constexpr std::string_view kKubeletSocket = "kubelet.sock";
inline constexpr std::string_view kHealthy = "Healthy";
inline constexpr std::string_view kUnhealthy = "Unhealthy";

struct PluginConfig {
  // "tessera.io/gpus" (shared slots) or "nvidia.com/gpu" (whole GPUs, slotsPerGpu 1). Only
  // bookings of pods that asked for this resource are handed out by this plugin.
  std::string resourceName = "tessera.io/gpus";
  int slotsPerGpu = 4;  // pods that may share one GPU, as kubelet counts them
  std::string directory = std::string(kDefaultDirectory);
  std::string nodeName;  // for messages
  EnvOptions env;
  // How often the watch thread looks for a kubelet restart and retries a failed
  // registration or confirmation.
  std::chrono::milliseconds watchInterval{1000};
  std::chrono::milliseconds registerTimeout{5000};
  // Kubelet's PodResources socket (kPodResourcesSocket in a cluster); empty: not read. The
  // watch thread lists it to learn which pod holds the devices each booking was handed for,
  // and corrects the books when twins swapped (docs/device-plugin.md).
  std::string podResourcesSocket;
  // Diagnostics (registration, restarts, refused allocations); nullptr: silent.
  std::function<void(const std::string&)> log;
};

class DevicePlugin {
 public:
  // `bookings` is borrowed and must outlive the plugin.
  DevicePlugin(PluginConfig config, BookingSource& bookings, Inventory inventory = {});
  ~DevicePlugin();
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Serves the socket and starts the watch thread, which registers with kubelet (at once
  // when kubelet.sock exists, else as soon as it appears). Errors: the socket cannot be
  // served.
  Result<void> start();
  void stop();

  // Replaces the GPU inventory (discovery's latest view); ListAndWatch streams the new device
  // list when anything kubelet sees changed.
  void setInventory(Inventory inventory);
  // Marks one GPU healthy or not; its slots follow in ListAndWatch. Error: unknown GPU.
  Result<void> setGpuHealth(std::string_view gpuId, bool healthy);
  Inventory inventory() const;

  std::string socketPath() const;
  std::string endpoint() const;  // the socket's file name, as registered
  // Successful registrations with kubelet so far (one per kubelet start).
  int registrations() const { return registrations_.load(); }
  // Confirmations sent because kubelet's PodResources showed a pod holding the devices handed
  // out for another (twins that swapped), and accepted by the control plane.
  int corrections() const { return corrections_.load(); }
  // Reads PodResources once and corrects what it shows (the watch thread does this every
  // watchInterval). Errors: the socket did not answer.
  Result<void> checkPodResources();

  class Service;  // the gRPC service (plugin.cc)

 private:
  friend class Service;
  Result<void> serve();
  void shutdownServer();
  Result<void> registerWithKubelet();
  void watch();
  void say(const std::string& message) const;

  // The booking for a container: the remembered one for exactly these IDs, else the
  // oldest pending one of that size. Called under allocMu_.
  Result<std::vector<Booking>> pendingBookings();
  void retryConfirmations();

  PluginConfig config_;
  BookingSource& bookings_;

  mutable std::mutex mu_;  // inventory, generation, server state
  std::condition_variable changed_;
  Inventory inventory_;
  std::uint64_t generation_ = 1;   // bumped when the advertised device list changes
  std::uint64_t serverEpoch_ = 0;  // bumped when the server stops: streams end
  bool stopping_ = false;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string servedId_;   // identity of our socket file when served (inode, ctime)
  std::string kubeletId_;  // identity of kubelet.sock when we registered; empty: not yet

  std::mutex allocMu_;  // GetPreferredAllocation, Allocate, and the state below
  std::map<std::string, std::string> remembered_;  // sorted slot IDs -> replica
  std::vector<Confirmation> unconfirmed_;          // handed out, confirmation to retry
  // Handed out, by sorted slot IDs: the replica the books give those devices to, its GPUs,
  // and when (PodResources should show them within a moment; entries it never shows expire).
  struct HandedOut {
    std::string replica;
    std::vector<std::string> gpuIds;
    std::chrono::steady_clock::time_point at;
    std::string refusedFor;  // a pod whose correction the control plane refused (not retried)
  };
  std::map<std::string, HandedOut> handedOut_;
  std::atomic<int> corrections_{0};

  std::atomic<int> registrations_{0};
  std::thread watcher_;
  std::condition_variable wake_;
};

}  // namespace tessera::deviceplugin
