#include "deviceplugin/allocation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace tessera::deviceplugin {
namespace {

constexpr std::string_view kSlotPrefix = "tessera-gpu";

const GpuDevice* findGpu(const Inventory& inventory, std::string_view id) {
  for (const GpuDevice& g : inventory.gpus) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// Per GPU id: its available slots (kubelet's order) and its inventory entry.
struct Candidate {
  std::string gpu;
  const GpuDevice* device = nullptr;  // nullptr: kubelet offers a GPU we no longer list
  std::vector<std::string> slots;
  int inUse = 0;  // slots kubelet does not offer: allocated to running containers
};

}  // namespace

std::string slotId(std::string_view gpuId, int slot) {
  return std::string(kSlotPrefix) + std::string(gpuId) + "-" + std::to_string(slot);
}

std::optional<std::string> gpuOfSlot(std::string_view deviceId) {
  if (!deviceId.starts_with(kSlotPrefix)) return std::nullopt;
  deviceId.remove_prefix(kSlotPrefix.size());
  const auto dash = deviceId.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == deviceId.size()) {
    return std::nullopt;
  }
  return std::string(deviceId.substr(0, dash));
}

std::vector<std::string> preferSlots(const Inventory& inventory, int slotsPerGpu,
                                     const std::vector<std::string>& available,
                                     const std::vector<std::string>& mustInclude, int size,
                                     const std::vector<std::string>* onlyGpus) {
  std::vector<std::string> chosen;
  std::set<std::string> chosenSet, usedGpus;
  auto take = [&](const std::string& id) {
    if (!chosenSet.insert(id).second) return;
    chosen.push_back(id);
    if (auto g = gpuOfSlot(id)) usedGpus.insert(*g);
  };
  for (const std::string& id : mustInclude) {
    if (static_cast<int>(chosen.size()) < size) take(id);
  }

  std::vector<Candidate> cands;
  std::map<std::string, std::size_t> byGpu;
  for (const std::string& id : available) {
    if (chosenSet.contains(id)) continue;
    const auto gpu = gpuOfSlot(id);
    const std::string key = gpu.value_or(id);
    auto [it, fresh] = byGpu.emplace(key, cands.size());
    if (fresh) cands.push_back({key, gpu ? findGpu(inventory, *gpu) : nullptr, {}, 0});
    cands[it->second].slots.push_back(id);
  }
  for (Candidate& c : cands) {
    c.inUse = std::max(0, slotsPerGpu - static_cast<int>(c.slots.size()));
  }
  auto need = [&] { return size - static_cast<int>(chosen.size()); };
  auto firstFree = [&](const Candidate& c) -> const std::string* {
    for (const std::string& s : c.slots) {
      if (!chosenSet.contains(s)) return &s;
    }
    return nullptr;
  };

  if (onlyGpus != nullptr) {
    // A booking: one slot on each of its GPUs, so that kubelet's count per GPU matches.
    for (const std::string& g : *onlyGpus) {
      if (need() <= 0) break;
      if (usedGpus.contains(g)) continue;
      const auto it = byGpu.find(g);
      if (it == byGpu.end()) continue;
      if (const std::string* s = firstFree(cands[it->second])) take(*s);
    }
  } else if (need() > 0) {
    // Topology: try each free GPU as the anchor of the set and keep the best set by
    // (GPU pairs without a shared NVLink group, NUMA nodes spanned, slots in use, index).
    auto group = [](const GpuDevice* d) { return d != nullptr ? d->nvlinkGroup : -1; };
    auto numa = [](const GpuDevice* d) { return d != nullptr ? d->numaNode : -1; };
    std::vector<const GpuDevice*> base;
    for (const std::string& g : usedGpus) base.push_back(findGpu(inventory, g));
    std::vector<std::size_t> free;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (!usedGpus.contains(cands[i].gpu)) free.push_back(i);
    }
    using Score = std::tuple<int, int, int, int>;
    std::optional<Score> best;
    std::vector<std::size_t> bestSet;
    for (const std::size_t anchor : free) {
      const GpuDevice* a = cands[anchor].device;
      std::vector<std::size_t> order = free;
      std::erase(order, anchor);
      auto rank = [&](std::size_t i) {
        const GpuDevice* d = cands[i].device;
        const bool sameLink = group(a) >= 0 && group(d) == group(a);
        const bool sameNuma = numa(a) >= 0 && numa(d) == numa(a);
        return std::tuple(sameLink ? 0 : 1, sameNuma ? 0 : 1, cands[i].inUse,
                          d != nullptr ? d->index : 1 << 20);
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t x, std::size_t y) { return rank(x) < rank(y); });
      std::vector<std::size_t> set = {anchor};
      for (std::size_t i = 0; i < order.size() && static_cast<int>(set.size()) < need(); ++i) {
        set.push_back(order[i]);
      }
      std::vector<const GpuDevice*> all = base;
      int load = 0, firstIndex = 1 << 20;
      for (std::size_t i : set) {
        all.push_back(cands[i].device);
        load += cands[i].inUse;
        if (cands[i].device != nullptr) firstIndex = std::min(firstIndex, cands[i].device->index);
      }
      int unlinked = 0;
      std::set<int> numas;
      for (std::size_t x = 0; x < all.size(); ++x) {
        numas.insert(numa(all[x]));
        for (std::size_t y = x + 1; y < all.size(); ++y) {
          if (group(all[x]) < 0 || group(all[x]) != group(all[y])) ++unlinked;
        }
      }
      const Score score{unlinked, static_cast<int>(numas.size()), load, firstIndex};
      if (!best || score < *best) {
        best = score;
        bestSet = std::move(set);
      }
    }
    for (std::size_t i : bestSet) {
      if (need() <= 0) break;
      if (const std::string* s = firstFree(cands[i])) take(*s);
    }
  }
  // Not enough distinct GPUs (or the booking's GPUs are full in kubelet's view): any slot.
  for (const std::string& id : available) {
    if (need() <= 0) break;
    const auto g = gpuOfSlot(id);
    if (g && usedGpus.contains(*g)) continue;
    take(id);
  }
  for (const std::string& id : available) {
    if (need() <= 0) break;
    take(id);
  }
  return chosen;
}

Result<ContainerSpec> containerSpec(const Inventory& inventory, const Booking& booking,
                                    const EnvOptions& options) {
  const bool mig = booking.mode == "mig";
  const bool exclusive = booking.mode == "exclusive";
  if (!mig && !exclusive && booking.mode != "shared") {
    return fail(Error::invalid("booking " + booking.replica + ": unknown sharing mode \"" +
                               booking.mode + "\""));
  }
  ContainerSpec spec;
  std::vector<std::string> visible;
  std::vector<std::string> nodes = inventory.controlDeviceNodes;
  std::int64_t limitMib = -1;
  double fraction = 1.0;
  std::int32_t computeMilli = 1000;
  bool allMps = true;
  std::vector<std::string> pinned;
  for (std::size_t i = 0; i < booking.gpus.size(); ++i) {
    const BookedGpu& b = booking.gpus[i];
    const GpuDevice* g = findGpu(inventory, b.gpuId);
    if (g == nullptr) {
      return fail(Error::notFound("booking " + booking.replica + ": GPU " + b.gpuId +
                                  " is not on this node"));
    }
    if (!g->healthy) {
      return fail(
          Error::precondition("booking " + booking.replica + ": GPU " + b.gpuId + " is unhealthy"));
    }
    for (const std::string& n : g->deviceNodes) nodes.push_back(n);
    if (mig) {
      const MigDevice* inst = nullptr;
      for (const MigDevice& m : g->migDevices) {
        if (m.profile == b.migProfile && (b.migStart < 0 || m.startSlot == b.migStart)) {
          inst = &m;
          break;
        }
      }
      if (inst == nullptr) {
        return fail(Error::notFound("booking " + booking.replica + ": GPU " + b.gpuId +
                                    " has no MIG instance " + b.migProfile + " at slice " +
                                    std::to_string(b.migStart) + " (not created yet?)"));
      }
      visible.push_back(inst->uuid);
      for (const std::string& n : inst->deviceNodes) nodes.push_back(n);
    } else {
      visible.push_back(!g->uuid.empty() ? g->uuid : std::to_string(g->index));
    }
    limitMib = limitMib < 0 ? b.memoryMib : std::min(limitMib, b.memoryMib);
    // A MIG container sees only its slice: its whole memory is its own.
    if (g->memoryMib > 0 && !mig) {
      fraction = std::min(fraction, static_cast<double>(b.memoryMib) / g->memoryMib);
    }
    computeMilli = std::min(computeMilli, b.computeMilli);
    allMps = allMps && g->mps;
    pinned.push_back(std::to_string(i) + "=" + std::to_string(b.memoryMib) + "M");
  }
  // NVIDIA_VISIBLE_DEVICES is what the NVIDIA container runtime reads to expose devices;
  // CUDA_VISIBLE_DEVICES with the same UUIDs selects them also where no such runtime runs
  // (UUIDs do not depend on the order devices are enumerated in the container).
  spec.envs["NVIDIA_VISIBLE_DEVICES"] = joined(visible);
  spec.envs["CUDA_VISIBLE_DEVICES"] = joined(visible);
  spec.envs["TESSERA_REPLICA_ID"] = booking.replica;
  spec.envs["TESSERA_SHARING_MODE"] = booking.mode;
  if (!exclusive) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", std::floor(fraction * 1000 + 1e-9) / 1000);
    spec.envs["TESSERA_GPU_MEMORY_LIMIT_MIB"] = std::to_string(limitMib);
    spec.envs["TESSERA_GPU_MEMORY_FRACTION"] = buf;
    spec.envs["TESSERA_GPU_COMPUTE_MILLI"] = std::to_string(computeMilli);
  }
  if (booking.mode == "shared" && allMps) {
    const int percent = std::clamp((computeMilli + 9) / 10, 1, 100);
    spec.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(percent);
    spec.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = joined(pinned);
    spec.envs["CUDA_MPS_PIPE_DIRECTORY"] = options.mpsPipeDirectory;
    spec.mounts.push_back({options.mpsPipeDirectory, options.mpsPipeDirectory, false});
  }
  std::set<std::string> seen;
  for (const std::string& n : nodes) {
    if (seen.insert(n).second) spec.devices.push_back({n, n, "rw"});
  }
  return spec;
}

}  // namespace tessera::deviceplugin
