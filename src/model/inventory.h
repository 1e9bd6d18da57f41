#pragma once
// Inventory value types: what a node and its GPUs are (static facts), as declared in a
// cluster file, reported by a node agent or read from a Kubernetes Node.
// Live usage and allocations are not here: sched::ClusterState keeps those.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::model {

// A MIG instance that exists on a card (created by an operator or by Tessera).
struct MigInstanceSpec {
  std::string profile;  // e.g. "1g.10gb"
  int startSlot = 0;    // first memory slice
};

struct GpuSpec {
  std::string id;    // unique within the node, e.g. "0"
  std::string uuid;  // NVML UUID if known
  std::string type;  // GpuCatalog key
  // Capacity. 0 / unset values are taken from the catalogue type at load time.
  std::int64_t memoryMib = 0;
  std::int32_t computeMilli = 1000;  // whole card = 1000 thousandths
  double memoryBandwidthGBps = 0;
  int smCount = 0;
  // Topology. -1 = unknown / none. GPUs with the same nvlinkGroup are fully NVLink-connected.
  int numaNode = -1;
  int nvlinkGroup = -1;
  int pcieSwitch = -1;
  // Sharing.
  bool migEnabled = false;
  std::vector<MigInstanceSpec> migInstances;  // pre-existing instances
  int timeSlicingReplicas = 0;                // >0: at most this many replicas share the card
  bool healthy = true;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute
};

struct Toleration {
  std::string key;           // empty + operator Exists = tolerate everything
  std::string op = "Equal";  // Equal | Exists
  std::string value;
  std::string effect;  // empty = every effect
  bool tolerates(const Taint& taint) const;
};

struct NodeSpec {
  std::string name;
  std::int64_t cpuMilli = 0;
  std::int64_t hostMemoryMib = 0;
  std::vector<GpuSpec> gpus;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  bool healthy = true;
  bool cordoned = false;
  // Tie-break order among equally scored nodes (lower wins); defaults to insertion order.
  std::optional<std::int64_t> rank;
  // Models whose weights are already in this node's local cache (disk or host memory).
  std::vector<std::string> cachedModels;
};

}  // namespace tessera::model
