#include "api/codec.h"

namespace tessera::api {

using nlohmann::json;

json nodeDocument(const model::NodeSpec& n, std::int64_t rank) {
  json taints = json::array();
  for (const model::Taint& t : n.taints) {
    taints.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
  }
  json gpus = json::array();
  for (const model::GpuSpec& g : n.gpus) {
    json gj = {{"id", g.id},
               {"type", g.type},
               {"computeMilli", g.computeMilli},
               {"numaNode", g.numaNode},
               {"nvlinkGroup", g.nvlinkGroup},
               {"pcieSwitch", g.pcieSwitch},
               {"migEnabled", g.migEnabled},
               {"timeSlicingReplicas", g.timeSlicingReplicas},
               {"healthy", g.healthy}};
    // Unset capacity figures stay unset: the catalogue fills them in again on load.
    if (!g.uuid.empty()) gj["uuid"] = g.uuid;
    if (g.memoryMib > 0) gj["memoryMib"] = g.memoryMib;
    if (g.memoryBandwidthGBps > 0) gj["memoryBandwidthGBps"] = g.memoryBandwidthGBps;
    if (g.smCount > 0) gj["smCount"] = g.smCount;
    if (!g.migInstances.empty()) {
      json mig = json::array();
      for (const auto& m : g.migInstances) {
        mig.push_back({{"profile", m.profile}, {"startSlot", m.startSlot}});
      }
      gj["migInstances"] = std::move(mig);
    }
    gpus.push_back(std::move(gj));
  }
  return {{"name", n.name},
          {"cpuMilli", n.cpuMilli},
          {"hostMemoryMib", n.hostMemoryMib},
          {"labels", n.labels},
          {"taints", std::move(taints)},
          {"healthy", n.healthy},
          {"cordoned", n.cordoned},
          {"rank", rank},
          {"cachedModels", n.cachedModels},
          {"gpus", std::move(gpus)}};
}

json modelDocument(const model::ModelProfile& m) {
  json sharing = json::array();
  for (model::SharingMode mode :
       {model::SharingMode::kExclusive, model::SharingMode::kShared, model::SharingMode::kMig}) {
    if (model::allows(m.sharing, mode)) sharing.push_back(model::sharingModeName(mode));
  }
  json out = {{"name", m.name},
              {"weightsMib", m.weightsMib},
              {"kvCacheMib", m.kvCacheMib},
              {"overheadMib", m.overheadMib},
              {"computeMilli", m.computeMilli},
              {"memoryBandwidthGBps", m.memoryBandwidthGBps},
              {"gpusPerReplica", m.gpusPerReplica},
              {"nvlinkRequired", m.nvlinkRequired},
              {"numaAligned", m.numaAligned},
              {"priority", m.priority},
              {"sharing", std::move(sharing)},
              {"cpuMilli", m.cpuMilli},
              {"hostMemoryMib", m.hostMemoryMib}};
  if (!m.migProfile.empty()) out["migProfile"] = m.migProfile;
  return out;
}

json deploymentDocument(const DeploymentSpec& d) {
  json out = {{"name", d.name}, {"model", d.model}};
  if (d.version) out["version"] = *d.version;
  if (d.placedByGiven) out["placedBy"] = d.placedByKubernetes ? "kubernetes" : "tessera";
  if (d.minReplicas) out["minReplicas"] = *d.minReplicas;
  if (d.maxReplicas) out["maxReplicas"] = *d.maxReplicas;
  if (d.priority) out["priority"] = *d.priority;
  if (d.sloTtftMs) out["sloTtftMs"] = *d.sloTtftMs;
  if (d.autoscaling) {
    const DeploymentSpec::Autoscaling& a = *d.autoscaling;
    json scaling = json::object();
    if (a.recommender) scaling["recommender"] = *a.recommender;
    if (a.args) {
      json args = json::object();
      for (const auto& [key, value] : *a.args) args[key] = value;
      scaling["args"] = std::move(args);
    }
    if (a.warmReplicas) scaling["warmReplicas"] = *a.warmReplicas;
    if (a.syncPeriodSeconds) scaling["syncPeriodSeconds"] = *a.syncPeriodSeconds;
    if (a.scaleUpStabilizationSeconds) {
      scaling["scaleUpStabilizationSeconds"] = *a.scaleUpStabilizationSeconds;
    }
    if (a.scaleDownStabilizationSeconds) {
      scaling["scaleDownStabilizationSeconds"] = *a.scaleDownStabilizationSeconds;
    }
    if (a.scaleDownPolicies) {
      json policies = json::array();
      for (const scale::ScalingPolicy& p : *a.scaleDownPolicies) {
        policies.push_back({{"type", scale::policyTypeName(p.type)},
                            {"value", p.value},
                            {"periodSeconds", p.periodSeconds}});
      }
      scaling["scaleDownPolicies"] = std::move(policies);
    }
    out["autoscaling"] = std::move(scaling);
  }
  return out;
}

json replicaDocument(const sched::ClusterState& state, const sched::Placement& p, bool loaded) {
  json gpus = json::array();
  for (const sched::GpuAssignment& a : p.gpus) {
    gpus.push_back({{"gpu", state.gpu(a.gpu).spec.id},
                    {"estimateMib", a.estimateMib},
                    {"reservedMib", a.reservedMib},
                    {"computeMilli", a.computeMilli},
                    {"bandwidthGBps", a.bandwidthGBps},
                    {"migProfile", a.migProfile},
                    {"migStart", a.migStart}});
  }
  return {{"placement",
           {{"replicaId", p.replicaId},
            {"deployment", p.deployment},
            {"model", p.modelName},
            {"priority", p.priority},
            {"mode", model::sharingModeName(p.mode)},
            {"node", state.node(p.node).spec.name},
            {"gpus", std::move(gpus)},
            {"cpuMilli", p.cpuMilli},
            {"hostMemoryMib", p.hostMemoryMib}}},
          {"loaded", loaded}};
}

Result<StoredReplica> readReplicaDocument(const sched::ClusterState& state, const json& doc) {
  try {
    StoredReplica out;
    const json& p = doc.at("placement");
    sched::Placement& pl = out.placement;
    pl.replicaId = p.at("replicaId").get<std::string>();
    pl.deployment = p.at("deployment").get<std::string>();
    pl.modelName = p.at("model").get<std::string>();
    pl.priority = p.at("priority").get<int>();
    const std::string mode = p.at("mode").get<std::string>();
    if (mode == "exclusive") {
      pl.mode = model::SharingMode::kExclusive;
    } else if (mode == "shared") {
      pl.mode = model::SharingMode::kShared;
    } else if (mode == "mig") {
      pl.mode = model::SharingMode::kMig;
    } else {
      return fail(Error::invalid("placement.mode: unknown sharing mode \"" + mode + "\""));
    }
    const std::string node = p.at("node").get<std::string>();
    const auto nodeId = state.findNode(node);
    if (!nodeId) return fail(Error::invalid("placement.node: no node \"" + node + "\""));
    pl.node = *nodeId;
    for (const json& g : p.at("gpus")) {
      sched::GpuAssignment a;
      const std::string id = g.at("gpu").get<std::string>();
      const auto gid = state.findGpu(node, id);
      if (!gid) return fail(Error::invalid("placement.gpus: node " + node + " has no GPU " + id));
      a.gpu = *gid;
      a.estimateMib = g.at("estimateMib").get<std::int64_t>();
      a.reservedMib = g.at("reservedMib").get<std::int64_t>();
      a.computeMilli = g.at("computeMilli").get<std::int32_t>();
      a.bandwidthGBps = g.at("bandwidthGBps").get<double>();
      a.migProfile = g.at("migProfile").get<std::int16_t>();
      a.migStart = g.at("migStart").get<std::int8_t>();
      pl.gpus.push_back(a);
    }
    pl.cpuMilli = p.at("cpuMilli").get<std::int64_t>();
    pl.hostMemoryMib = p.at("hostMemoryMib").get<std::int64_t>();
    out.loaded = doc.at("loaded").get<bool>();
    if (const auto at = doc.find("placedAtUnixMs"); at != doc.end()) {
      out.placedAtUnixMs = at->get<Millis>();
    }
    return out;
  } catch (const json::exception& e) {
    return fail(Error::invalid(std::string("replica document: ") + e.what()));
  }
}

}  // namespace tessera::api
