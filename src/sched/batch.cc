// Batch planning: best-fit-decreasing over many requests at once.

#include <algorithm>
#include <unordered_map>

#include "sched/engine.h"

namespace tessera::sched {

std::string requestShapeKey(const model::PlacementRequest& r) {
  const auto& m = r.model;
  std::string key = m.name + '|' + std::to_string(m.memoryPerGpuMib()) + '|' +
                    std::to_string(m.weightsMib) + '|' +
                    std::to_string(m.computeMilli) + '|' + std::to_string(m.memoryBandwidthGBps) +
                    '|' + std::to_string(m.gpusPerReplica) + '|' + std::to_string(m.nvlinkRequired) +
                    std::to_string(m.numaAligned) + '|' + std::to_string(m.sharing) + '|' +
                    m.migProfile + '|' + std::to_string(m.cpuMilli) + '|' +
                    std::to_string(m.hostMemoryMib) + '|' + std::to_string(m.priority) + '|' +
                    r.deployment + '|';
  for (const auto& t : r.gpuTypes) key += t + ',';
  key += '|';
  for (const auto& [k, v] : r.nodeSelector) key += k + '=' + v + ',';
  key += '|';
  for (const auto& t : r.tolerations) key += t.key + t.op + t.value + t.effect + ',';
  return key;
}

BatchPlan planBatch(PlacementEngine& engine, ClusterState& state,
                    std::vector<model::PlacementRequest> requests, bool commit) {
  // Largest first, measured by what a request takes from the fleet: its GPUs x per-GPU
  // memory. Big replicas claim the big holes before small ones splinter them, and a gang of
  // GPUs (which needs them on one node, often in one NVLink group) goes before a replica of
  // fewer GPUs that would break the set up. Ties: more memory per GPU, more GPUs, higher
  // priority, then the id for a stable order.
  struct Keyed {
    std::int64_t total;
    std::int64_t memory;
    int gpus;
    int priority;
    std::size_t index;
  };
  std::vector<Keyed> order;
  order.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& m = requests[i].model;
    const std::int64_t perGpu = m.gpusPerReplica > 0 ? m.memoryPerGpuMib() : 0;
    order.push_back({perGpu * m.gpusPerReplica, perGpu, m.gpusPerReplica, m.priority, i});
  }
  std::stable_sort(order.begin(), order.end(), [&](const Keyed& a, const Keyed& b) {
    if (a.total != b.total) return a.total > b.total;
    if (a.memory != b.memory) return a.memory > b.memory;
    if (a.gpus != b.gpus) return a.gpus > b.gpus;
    if (a.priority != b.priority) return a.priority > b.priority;
    return requests[a.index].replicaId < requests[b.index].replicaId;
  });

  BatchPlan plan;
  // Without commit the plan is made on a scratch copy; the caller's state is untouched.
  std::optional<ClusterState> scratch;
  if (!commit) scratch.emplace(state);
  ClusterState& target = commit ? state : *scratch;
  std::unordered_map<std::string, std::string> failedShapes;
  DecideOptions opts;
  opts.explainFailures = false;  // counts per filter are enough for the summary
  // Placements only add load during a batch, so a shape that failed once fails again (filters
  // are monotone in load) and its verdict is reused instead of re-scanning the cluster.
  for (const Keyed& k : order) {
    const auto& request = requests[k.index];
    const std::string key = requestShapeKey(request);
    if (auto it = failedShapes.find(key); it != failedShapes.end()) {
      plan.unplaceable.push_back({request.replicaId, it->second});
      continue;
    }
    Decision d = engine.place(target, request, opts);
    if (d.placement) {
      plan.assignments.push_back(std::move(*d.placement));
    } else {
      plan.unplaceable.push_back({request.replicaId, d.summary});
      // Only "nothing fits" carries over to the same shape. A refused request (invalid, or
      // its replica id is already placed), or one the books refused although options
      // existed, says so about itself only.
      if (!d.requestRefused && d.feasibleOptions == 0) failedShapes.emplace(key, d.summary);
    }
  }
  return plan;
}

}  // namespace tessera::sched
