#include <algorithm>

#include "sched/plugin.h"
#include "sim/serving_loop_internal.h"

namespace tessera::sim::loop {
namespace internal {

Result<void> Cluster::setUp() {
  for (const NodeGroup& g : o_.groups) {
    const model::GpuType* type = state.catalog().find(g.gpuType);
    if (type == nullptr) return fail(Error::invalid("unknown GPU type '" + g.gpuType + "'"));
    for (int n = 0; n < g.nodes; ++n) {
      model::NodeSpec node;
      node.name = g.namePrefix + "-" + std::to_string(n);
      node.cpuMilli = g.cpuMilliPerNode;
      node.hostMemoryMib = g.hostMemoryMibPerNode;
      node.cachedModels = g.cachedModels;
      for (int i = 0; i < g.gpusPerNode; ++i) {
        model::GpuSpec gpu;
        gpu.id = std::to_string(i);
        gpu.type = type->name;
        gpu.nvlinkGroup = type->nvlinkGBps ? 0 : -1;  // an L40S box has no NVLink
        gpu.numaNode = i * 2 / std::max(1, g.gpusPerNode);
        node.gpus.push_back(std::move(gpu));
      }
      if (auto ok = state.apply(sched::NodeAdded{node}); !ok) {
        return fail(Error::invalid("node " + node.name + ": " + ok.error().message));
      }
      nodeSpecs_.push_back(std::move(node));
    }
  }
  models_.resize(nodeSpecs_.size());
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  sched::Profile profile = sched::defaultProfile();
  if (!o_.modelAffinity) {
    std::erase_if(profile.scores, [](const auto& s) { return s.name == "ModelAffinity"; });
  }
  auto plugins = sched::buildPlugins(profile, registry);
  if (!plugins) return fail(plugins.error());
  engine = std::make_unique<sched::PlacementEngine>(std::move(*plugins), engineOptions());
  return {};
}

void fleetSample(Cluster& c, Micros now, int periodSeconds, bool record) {
  FleetSample f;
  f.timeS = static_cast<double>(now - c.o_.measuredFromUs) / 1e6;
  double used = 0, held = 0, compute = c.releasedComputeUs, capacity = 0;
  c.releasedComputeUs = 0;
  for (auto& [gpu, tenants] : c.onGpu) {
    if (tenants.empty()) continue;
    ++f.gpusInUse;
    capacity += static_cast<double>(c.state.gpu(gpu).spec.memoryMib);
    for (const auto& [dep, replica] : tenants) {
      const DeploymentRun::Usage u = c.runs[static_cast<std::size_t>(dep)]->sample(replica, now);
      used += u.usedMib;
      held += u.heldMib;
      compute += u.computeUs;
      ++f.replicas;
    }
  }
  if (f.gpusInUse > 0) {
    f.memoryUsed = used / capacity;
    f.memoryAllocated = held / capacity;
    f.compute = compute / (static_cast<double>(periodSeconds) * 1e6 * f.gpusInUse);
  }
  if (record) c.samples.push_back(f);
}

}  // namespace internal

using namespace internal;

Result<LoopResult> runLoop(const model::GpuCatalog& catalog, const ClusterOptions& options,
                           std::vector<DeploymentSetup> setups) {
  Cluster cluster(catalog, options);
  TESSERA_RETURN_IF_ERROR(cluster.setUp());
  std::vector<std::unique_ptr<DeploymentRun>> runs;
  for (std::size_t i = 0; i < setups.size(); ++i) {
    if (setups[i].trace == nullptr || setups[i].controller == nullptr) {
      return fail(Error::invalid("deployment " + setups[i].name + ": no trace or controller"));
    }
    runs.push_back(
        std::make_unique<DeploymentRun>(cluster, static_cast<int>(i), std::move(setups[i])));
    cluster.runs.push_back(runs.back().get());
  }
  if (!runs.empty()) {
    cluster.lowestPriority = runs.front()->priority();
    for (const auto& run : runs) {
      cluster.lowestPriority = std::min(cluster.lowestPriority, run->priority());
    }
  }
  Micros horizon = 0;
  for (auto& run : runs) {
    TESSERA_RETURN_IF_ERROR(run->start());
    horizon = std::max(horizon, run->horizonUs());
  }
  if (options.fleetSampleSeconds > 0) {
    cluster.push(options.measuredFromUs, EventType::kFleetSample, -1);
  }
  bool measuring = false;
  while (!cluster.events.empty()) {
    const Event e = cluster.events.top();
    if (e.atUs > horizon) break;
    cluster.events.pop();
    if (!measuring && e.atUs >= options.measuredFromUs) {
      cluster.measuringStarts();
      measuring = true;
    }
    if (e.type == EventType::kFleetSample) {
      fleetSample(cluster, e.atUs, options.fleetSampleSeconds, e.atUs > options.measuredFromUs);
      const Micros next = e.atUs + Micros{options.fleetSampleSeconds} * kUsPerSecond;
      if (next <= horizon) cluster.push(next, EventType::kFleetSample, -1);
    } else {
      DeploymentRun& run = *runs[static_cast<std::size_t>(e.deployment)];
      if (run.ownsEventAt(e.atUs)) TESSERA_RETURN_IF_ERROR(run.handle(e));
    }
    const Micros now = e.atUs;
    if (!cluster.toKick.empty() && (cluster.events.empty() || cluster.events.top().atUs > now)) {
      for (const auto& [dep, replica] : cluster.toKick) {
        DeploymentRun& run = *runs[static_cast<std::size_t>(dep)];
        if (run.replicaAlive(replica)) run.kick(replica, now);
      }
      cluster.toKick.clear();
    }
  }
  LoopResult out;
  for (auto& run : runs) out.deployments.push_back(run->finish());
  out.samples = std::move(cluster.samples);
  out.evictions = cluster.evictions;
  cluster.chargeOpenGpus(horizon);
  for (const auto& [type, us] : cluster.gpuUsByType) out.gpuHoursByType[type] = us / 3.6e9;
  out.peakGpusInUse = cluster.peakGpusInUse;
  return out;
}

}  // namespace tessera::sim::loop
