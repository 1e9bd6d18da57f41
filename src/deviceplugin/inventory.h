#pragma once
// What the device plugin knows about the node's GPUs. GPU discovery (src/agent) fills an
// Inventory and hands it to DevicePlugin::setInventory; the plugin keeps no other source of
// truth about the hardware. Plain values, no behaviour.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::deviceplugin {

// A MIG instance that exists on a card (NVML's GPU instance + compute instance).
struct MigDevice {
  std::string uuid;     // "MIG-..." as NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES take it
  std::string profile;  // e.g. "1g.10gb"
  int startSlot = 0;    // first memory slice (NVML placement start)
  // Host device nodes the instance needs besides its parent's (/dev/nvidia-caps/nvidia-capN).
  std::vector<std::string> deviceNodes;
};

struct GpuDevice {
  // The GPU's id as registered with the control plane (the node's gpus[].id, e.g. "0"):
  // bookings name GPUs by it.
  std::string id;
  int index = 0;     // NVML index / minor number
  std::string uuid;  // "GPU-..."; empty for a virtual GPU (tests, simulations)
  std::string type;  // catalogue name, e.g. "A100-80GB"
  std::string computeCapability;  // CUDA's "major.minor.0" as NVML reports it; empty: unknown
  std::int64_t memoryMib = 0;
  int numaNode = -1;     // -1: unknown
  int nvlinkGroup = -1;  // GPUs with the same group are fully NVLink-connected; -1: none
  bool healthy = true;
  // An MPS control daemon serves this card: shared bookings run as MPS clients with limits.
  bool mps = false;
  // In MIG mode: only its MIG instances (migDevices) can run work, the card as a whole cannot.
  bool migEnabled = false;
  std::vector<MigDevice> migDevices;
  // Host device nodes the card needs in a container (e.g. /dev/nvidia0); none when virtual.
  std::vector<std::string> deviceNodes;
};

struct Inventory {
  std::vector<GpuDevice> gpus;
  // Node-wide device nodes every GPU container needs (/dev/nvidiactl, /dev/nvidia-uvm,
  // /dev/nvidia-uvm-tools); none on a node without a driver.
  std::vector<std::string> controlDeviceNodes;
};

}  // namespace tessera::deviceplugin
