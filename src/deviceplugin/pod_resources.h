#pragma once
// A client of kubelet's PodResources API (v1, proto/podresources.proto): which pod holds
// which device IDs. The device plugin API never says which pod a container belongs to; this
// does, after kubelet admitted it.

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"

namespace tessera::deviceplugin {

inline constexpr const char* kPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

struct ContainerDeviceIds {
  std::string pod;        // "<namespace>/<name>", as the extender names a pod's replica
  std::string container;  // the container's name
  std::string resource;   // the extended resource, e.g. "tessera.io/gpus"
  std::vector<std::string> deviceIds;
};

// List on kubelet's socket: one entry per container and resource that holds devices.
// Errors (kInternal, naming the socket and gRPC's status): kubelet did not answer within
// `timeout` (the socket is missing or not mounted, or kubelet is restarting), or refused.
Result<std::vector<ContainerDeviceIds>> listPodDevices(
    const std::string& socketPath, std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace tessera::deviceplugin
