#pragma once
// What the DRA driver publishes (docs/dra.md): the node's GPUs as one ResourceSlice pool of
// resource.k8s.io/v1, named after the node. Plain functions over values.
//
// Devices. A GPU without MIG is one device "gpu-<index>" that several claims may share
// (allowMultipleAllocations) by consumable capacity:
//   memory   bytes of the card (quantity "81920Mi"), requested in whole MiB (what the engine
//            books, so kube-scheduler's sum is Tessera's); a claim that asks none takes the
//            whole card;
//   compute  thousandths of the card's compute (1000), in whole thousandths; a claim that
//            asks none takes 0 (compute is a soft share, as the engine books it).
// A GPU in MIG mode is published as its MIG instances only, one exclusive device each,
// "gpu-<index>-mig-<profile>-<start>" (profile with every character outside [a-z0-9] as
// '-'), with its memory slice as `memory`: publishing the parent too would let two claims
// take the same silicon. Attributes use the names NVIDIA's driver uses where they mean the
// same (type, uuid, productName, architecture, cudaComputeCapability, parentUUID, profile,
// index) plus Tessera's numaNode, nvlinkGroup and, on a MIG device, migStart (its first
// memory slice: CEL cannot see device names, and a claim pins one instance by parentUUID,
// profile and migStart); attributes without a domain are the
// driver's. An unhealthy GPU (and its MIG instances) carries the NoSchedule taint
// "gpu.tessera.io/unhealthy".
//
// Slices. At most 64 devices per slice (the API's limit for devices with taints); a pool of
// more is split over several slices "<node>-gpu.tessera.io-<i>", each with the pool's
// generation and resourceSliceCount.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/inventory.h"
#include "k8s/dra_claims.h"

namespace tessera::model {
class GpuCatalog;
}

namespace tessera::dra {

inline constexpr std::string_view kDriverName = k8s::kDraDriverName;
inline constexpr std::string_view kUnhealthyTaint = "gpu.tessera.io/unhealthy";
inline constexpr std::size_t kMaxDevicesPerSlice = 64;
inline constexpr std::int64_t kMemoryStepMib = 1;
inline constexpr std::int64_t kComputeMilli = k8s::kDraComputeMilli;
inline constexpr std::int64_t kComputeStep = 1;

std::string gpuDeviceName(const deviceplugin::GpuDevice& gpu);
std::string migDeviceName(const deviceplugin::GpuDevice& gpu, const deviceplugin::MigDevice& mig);

struct SliceOptions {
  std::string driver = std::string(kDriverName);
  std::string nodeName;
  std::int64_t generation = 1;
  // For productName's and architecture's figures; nullptr: the GPU's type name only.
  const model::GpuCatalog* catalog = nullptr;
};

// The devices the pool holds, in publishing order (GPU index, then MIG start).
std::vector<nlohmann::json> sliceDevices(const deviceplugin::Inventory& inventory,
                                         const SliceOptions& options);
// The pool's ResourceSlice objects (apiVersion, kind, metadata.name, spec), at least one (an
// empty slice for a node without GPUs, so the pool exists and says so).
std::vector<nlohmann::json> resourceSlices(const deviceplugin::Inventory& inventory,
                                           const SliceOptions& options);
std::string sliceName(std::string_view nodeName, std::string_view driver, std::size_t index);

// Each published device's health, in publishing order (what the driver streams to kubelet,
// dra/driver.h): a device is unhealthy exactly when its slice entry carries kUnhealthyTaint.
struct DeviceHealth {
  std::string device;  // the published name
  bool healthy = true;
  std::string message;  // why, for an unhealthy device
  bool operator==(const DeviceHealth&) const = default;
};
std::vector<DeviceHealth> deviceHealth(const deviceplugin::Inventory& inventory);

// A published device name resolved on the inventory: the GPU, and the MIG instance for a MIG
// device. nullopt: no such device here.
struct DeviceRef {
  const deviceplugin::GpuDevice* gpu = nullptr;
  const deviceplugin::MigDevice* mig = nullptr;
};
std::optional<DeviceRef> findDevice(const deviceplugin::Inventory& inventory,
                                    std::string_view deviceName);

}  // namespace tessera::dra
