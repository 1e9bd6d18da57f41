#pragma once
// The event loop behind every serving simulation (sim/serving_run.h: one deployment;
// sim/fleet.h: many on one fleet). Internal to the sim module.
//
// One Cluster: a sched::ClusterState of node groups, one placement engine, one virtual clock
// and one event queue. Each deployment replays its own trace against its own replicas, router
// and controller; deployments meet only in the cluster: the GPUs they compete for, the node
// caches (a model's weights in a node's host memory or on its disk serve every deployment of
// that model) and, for a higher-priority deployment that finds no room, eviction of
// lower-priority replicas (sched::planEviction).
//
// Shared GPUs, two interference models (docs/fleet-simulator.md, "Interference"):
//   partitioned  (MPS with an active-thread limit, Tessera's shares) a replica on share f runs
//                at f of the GPU's FLOP/s and bandwidth whatever its neighbours do;
//   time-sliced  (NVIDIA time-slicing) a replica runs at the whole GPU's speed alone; an
//                iteration that starts while k neighbours on the same GPU have work takes
//                (k + 1) x (1 + timeSliceOverhead) as long (round-robin plus context switches).
//
// Threading: a loop owns everything it builds; run loops of different policies on different
// threads freely (traces, options and the catalogue are only read).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "scale/reconcile.h"
#include "sim/serving_model.h"
#include "sim/serving_policy.h"
#include "sim/serving_run.h"
#include "sim/serving_trace.h"

namespace tessera::sim::loop {

struct NodeGroup {
  std::string namePrefix = "node";  // nodes are <prefix>-0, <prefix>-1, ...
  std::string gpuType = "H100-80GB";
  int nodes = 1;
  int gpusPerNode = 8;
  std::int64_t cpuMilliPerNode = 192'000;
  std::int64_t hostMemoryMibPerNode = 2 * 1024 * 1024;
  std::vector<std::string> cachedModels;  // on every node's disk at t = 0
};

struct ClusterOptions {
  std::vector<NodeGroup> groups;
  // The default placement profile; false drops its ModelAffinity score (plain bin packing).
  bool modelAffinity = true;
  // Every this many seconds of the measured window the loop records the fleet's GPUs in use,
  // memory and compute (FleetSample); 0: not at all (single-deployment runs).
  int fleetSampleSeconds = 0;
  Micros measuredFromUs = 0;  // where fleet samples start
};

enum class Interference : std::uint8_t { kPartitioned, kTimeSliced };

struct DeploymentSetup {
  std::string name;                     // replica ids are <name>-<n>
  std::string deploymentKey;            // the placement requests' deployment (anti-affinity)
  const ServingTrace* trace = nullptr;  // with its lead-in, on the loop's time line
  std::size_t firstCounted = 0;         // requests before this index are the lead-in's
  Micros measuredFromUs = 0;
  Micros horizonUs = 0;     // where it ends; 0: its trace's last arrival + options.tailSeconds
  ServingOptions options;   // as the world runs (model error applied); fleet.gpuType is its type
  ReplicaPerf perf;         // one whole GPU (the SLO's unloaded prefill)
  ReplicaPerf replicaPerf;  // a replica on `share`
  double share = 1;
  std::optional<scale::ShareRule> shareRule;  // new replicas' shares (none: `share`)
  ServingController* controller = nullptr;
  int replicaLimit = 1;   // the most replicas the reconciler asks for
  int priority = 0;       // evicts strictly lower priorities when nothing fits
  bool nodeCache = true;  // false: every cold start reads from the remote store
  Interference interference = Interference::kPartitioned;
  double timeSliceOverhead = 0.1;
};

// The fleet at one instant, over the GPUs holding at least one replica.
struct FleetSample {
  double timeS = 0;  // since the measured window began
  int gpusInUse = 0;
  int replicas = 0;
  double memoryUsed = 0;       // weights + overhead + KV reserved by running requests / card
  double memoryAllocated = 0;  // what the engines hold / card
  double compute = 0;          // tensor activity over the period before the sample
};

struct LoopResult {
  std::vector<ServingPolicyResult> deployments;  // in setup order
  std::vector<FleetSample> samples;
  int evictions = 0;
  // Hours each GPU type's cards held at least one replica within the measured window (a card
  // shared by four replicas counts once), and the most cards in use at once.
  std::map<std::string, double> gpuHoursByType;
  int peakGpusInUse = 0;
};

Result<LoopResult> runLoop(const model::GpuCatalog& catalog, const ClusterOptions& cluster,
                           std::vector<DeploymentSetup> deployments);

}  // namespace tessera::sim::loop
