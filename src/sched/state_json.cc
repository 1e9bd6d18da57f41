#include "sched/state_json.h"

namespace tessera::sched {

using nlohmann::json;

std::string migProfileName(const ClusterState& state, const GpuAssignment& a) {
  if (a.migProfile < 0) return {};
  const GpuRecord& g = state.gpu(a.gpu);
  if (g.typeIndex < 0) return {};
  const model::GpuType& type = state.catalog().at(g.typeIndex);
  const auto index = static_cast<std::size_t>(a.migProfile);
  return index < type.migProfiles.size() ? type.migProfiles[index].name : std::string{};
}

std::string gpuTypeName(const ClusterState& state, const GpuRecord& g) {
  return g.typeIndex >= 0 ? state.catalog().at(g.typeIndex).name : g.spec.type;
}

json placementJson(const ClusterState& state, const Placement& p) {
  // What the books charge the replica now (the reservation while it is active, then the
  // observed use or the estimate; a MIG slice or an exclusive card whole): the figure the
  // GPUs' chargedMib adds up. A placement not (or no longer) in the books is charged what it
  // reserves.
  const std::optional<ReplicaId> id = state.findReplica(p.replicaId);
  const ReplicaRecord* rec = id ? &state.replica(*id) : nullptr;
  json gpus = json::array();
  std::int64_t reserved = 0;
  std::int64_t charged = 0;
  for (std::size_t slot = 0; slot < p.gpus.size(); ++slot) {
    const GpuAssignment& a = p.gpus[slot];
    const std::string mig = migProfileName(state, a);
    const std::int64_t charge =
        rec != nullptr && slot < rec->chargeMib.size() ? rec->chargeMib[slot] : a.reservedMib;
    reserved += a.reservedMib;
    charged += charge;
    gpus.push_back(
        {{"id", state.gpu(a.gpu).spec.id},
         {"chargedMib", charge},
         {"reservedMib", a.reservedMib},
         {"estimateMib", a.estimateMib},
         {"computeMilli", a.computeMilli},
         {"bandwidthGBps", a.bandwidthGBps},
         {"migProfile", mig.empty() ? json(nullptr) : json(mig)},
         {"migStart", mig.empty() ? json(nullptr) : json(static_cast<int>(a.migStart))}});
  }
  const std::string node = p.node >= 0 ? state.node(p.node).spec.name : std::string("-");
  return {{"replica", p.replicaId},
          {"model", p.modelName},
          {"deployment", p.deployment},
          {"priority", p.priority},
          {"node", node},
          {"mode", model::sharingModeName(p.mode)},
          {"gpus", std::move(gpus)},
          {"memoryChargedMib", charged},
          {"memoryReservedMib", reserved},
          {"cpuMilli", p.cpuMilli},
          {"hostMemoryMib", p.hostMemoryMib}};
}

json breakdownJson(const std::vector<ScoreTerm>& terms) {
  json out = json::array();
  for (const ScoreTerm& t : terms) {
    out.push_back({{"plugin", t.plugin}, {"weight", t.weight}, {"score", t.score}});
  }
  return out;
}

json rejectionsJson(const std::vector<Rejection>& rejections) {
  json out = json::array();
  for (const Rejection& r : rejections) {
    out.push_back({{"node", r.node}, {"gpu", r.gpu}, {"plugin", r.plugin}, {"reason", r.reason}});
  }
  return out;
}

json evictionJson(const ClusterState& state, const EvictionPlan& plan) {
  auto orNull = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"feasible", plan.feasible},
          {"node", orNull(plan.node)},
          {"victims", plan.victims},
          {"placement", plan.placement ? placementJson(state, *plan.placement) : json(nullptr)},
          {"growNode", orNull(plan.growNode)},
          {"addCpuMilli", plan.addCpuMilli},
          {"addHostMemoryMib", plan.addHostMemoryMib},
          {"addGpus", plan.gpusToAdd},
          {"addGpuType", orNull(plan.gpuTypeToAdd)},
          {"likeNode", orNull(plan.likeNode)},
          {"reason", plan.reason}};
}

json gpuJson(const ClusterState& state, const GpuRecord& g) {
  json replicas = json::array();
  for (ReplicaId rid : g.replicas) replicas.push_back(state.replica(rid).placement.replicaId);
  return {{"node", state.node(g.node).spec.name},
          {"id", g.spec.id},
          {"uuid", g.spec.uuid},
          {"type", gpuTypeName(state, g)},
          {"healthy", g.spec.healthy},
          {"migEnabled", g.spec.migEnabled},
          {"exclusive", g.exclusive},
          {"memoryMib", g.spec.memoryMib},
          {"chargedMib", g.chargedMib},
          {"foreignMib", g.foreignMib},
          {"freeMib", g.freeMemoryMib()},
          {"computeMilli", g.spec.computeMilli},
          {"bookedComputeMilli", g.bookedComputeMilli},
          // Topology as registered; null when unknown (-1).
          {"numaNode", g.spec.numaNode >= 0 ? json(g.spec.numaNode) : json(nullptr)},
          {"nvlinkGroup", g.spec.nvlinkGroup >= 0 ? json(g.spec.nvlinkGroup) : json(nullptr)},
          {"pcieSwitch", g.spec.pcieSwitch >= 0 ? json(g.spec.pcieSwitch) : json(nullptr)},
          {"utilization", g.hasTelemetry ? json(g.utilizationMilli / 1000.0) : json(nullptr)},
          {"usedMib", g.hasTelemetry ? json(g.telemetryUsedMib) : json(nullptr)},
          {"replicas", std::move(replicas)}};
}

}  // namespace tessera::sched
