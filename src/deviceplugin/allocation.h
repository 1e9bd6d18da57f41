#pragma once
// The device plugin's decisions, apart from gRPC: which slot devices to prefer, and what a
// container gets for a booking (environment, device nodes, mounts). Pure functions over
// values, so they are tested without sockets.
//
// Devices. The plugin advertises each GPU as `slotsPerGpu` interchangeable slot devices
// ("tessera-gpu<id>-<slot>"), so that kubelet admits several pods sharing one card; for the
// whole-GPU resource slotsPerGpu is 1. A container asking N devices needs N distinct GPUs.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "deviceplugin/bookings.h"
#include "deviceplugin/inventory.h"

namespace tessera::deviceplugin {

std::string slotId(std::string_view gpuId, int slot);
// The GPU id of a slot device ID; nullopt if it is not one of ours.
std::optional<std::string> gpuOfSlot(std::string_view deviceId);

// N slots on distinct GPUs from `available`, `mustInclude` first. With `onlyGpus`, slots on
// those GPUs (in that order) and, where kubelet offers none there, on others. Without, GPUs
// that share an NVLink group and a NUMA node with each other (and with the must-include
// ones) first, then the least loaded (fewest slots in use); ties by GPU index. When fewer
// distinct GPUs than N are available, several slots of one GPU fill the rest.
std::vector<std::string> preferSlots(const Inventory& inventory, int slotsPerGpu,
                                     const std::vector<std::string>& available,
                                     const std::vector<std::string>& mustInclude, int size,
                                     const std::vector<std::string>* onlyGpus = nullptr);

struct ContainerMount {
  std::string containerPath, hostPath;
  bool readOnly = false;
};
struct ContainerDevice {
  std::string containerPath, hostPath, permissions;
};
struct ContainerSpec {
  std::map<std::string, std::string> envs;
  std::vector<ContainerMount> mounts;
  std::vector<ContainerDevice> devices;
};

struct EnvOptions {
  // Host directory of the MPS control daemon's pipes; mounted at the same path.
  std::string mpsPipeDirectory = "/tmp/nvidia-mps";
};

// What a container gets for `booking` on this inventory:
//  - every mode: NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (GPU UUIDs, MIG UUIDs for a
//    MIG slice, the index for a virtual GPU without UUID), TESSERA_REPLICA_ID, and the device
//    nodes of the GPUs plus the node-wide control nodes;
//  - shared and MIG: TESSERA_GPU_MEMORY_LIMIT_MIB (per GPU) and TESSERA_GPU_MEMORY_FRACTION
//    (of the smallest card), TESSERA_GPU_COMPUTE_MILLI;
//  - shared on MPS cards: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
//    ("0=<N>M,1=<N>M" by container-visible ordinal), CUDA_MPS_PIPE_DIRECTORY and its mount.
// Errors: a booked GPU the inventory does not have, an unhealthy one, a MIG slice without a
// matching instance.
Result<ContainerSpec> containerSpec(const Inventory& inventory, const Booking& booking,
                                    const EnvOptions& options);

}  // namespace tessera::deviceplugin
