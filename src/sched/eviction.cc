// Eviction planning: what to unload so that a request fits, or what capacity to add.

#include <algorithm>
#include <limits>
#include <tuple>

#include "sched/engine.h"

namespace tessera::sched {
namespace {

// Puts replicas back on a scratch state after a what-if. A replica placed anew starts a
// fresh reservation, so it is booked at exactly what it was charged in the original: its
// reservation would under-count usage telemetry showed above it, and over-count a lapsed
// one. Only the node being examined is touched.
bool restore(ClusterState& scratch, const ClusterState& original, std::span<const ReplicaId> ids) {
  bool all = true;
  for (ReplicaId id : ids) {
    const ReplicaRecord& rec = original.replica(id);
    Placement again = rec.placement;
    for (std::size_t slot = 0; slot < again.gpus.size(); ++slot) {
      again.gpus[slot].reservedMib = rec.chargeMib[slot];
    }
    if (!scratch.apply(ReplicaPlaced{std::move(again)})) {
      all = false;
      continue;
    }
    if (rec.phase == ReplicaPhase::kLoaded) (void)scratch.apply(ReplicaLoaded{rec.placement.replicaId});
  }
  return all;
}

void evict(ClusterState& scratch, const ClusterState& original, ReplicaId id) {
  (void)scratch.apply(ReplicaUnloaded{original.replica(id).placement.replicaId});
}

// The GPU type to buy when nothing fits: the one the request names, else the smallest type
// already in the fleet that holds the request, else the smallest catalogued type that does.
std::string typeToAdd(const ClusterState& state, const model::PlacementRequest& request,
                      std::int64_t needMib) {
  const auto& cat = state.catalog();
  auto holds = [&](const model::GpuType& t) { return t.memoryMib && *t.memoryMib >= needMib; };
  for (const auto& name : request.gpuTypes) {
    if (const auto* t = cat.find(name); t != nullptr && (holds(*t) || !t->memoryMib)) {
      return t->name;
    }
  }
  if (!request.gpuTypes.empty()) return request.gpuTypes.front();
  const model::GpuType* best = nullptr;
  for (const auto& g : state.gpus()) {
    if (state.node(g.node).removed) continue;
    const auto& t = cat.at(g.typeIndex);
    if (holds(t) && (best == nullptr || *t.memoryMib < *best->memoryMib)) best = &t;
  }
  if (best == nullptr) {
    for (int i = 0; i < cat.size(); ++i) {
      const auto& t = cat.at(i);
      if (!t.opaque && holds(t) && (best == nullptr || *t.memoryMib < *best->memoryMib)) best = &t;
    }
  }
  return best != nullptr ? best->name : std::string();
}

}  // namespace

EvictionPlan planEviction(PlacementEngine& engine, const ClusterState& state,
                          const model::PlacementRequest& request) {
  EvictionPlan plan;
  DecideOptions quiet;
  quiet.explainFailures = false;
  Decision direct = engine.decide(state, request, quiet);
  if (direct.placement) {
    plan.feasible = true;
    plan.node = state.node(direct.placement->node).spec.name;
    plan.placement = std::move(direct.placement);
    plan.reason = "fits without eviction";
    return plan;
  }
  if (direct.requestRefused) {
    plan.reason = direct.summary;
    return plan;
  }

  const int priority = request.model.priority;
  ClusterState scratch(state);
  using Cost = std::tuple<int, std::size_t, std::int64_t, std::int64_t>;  // max prio, count, MiB, rank
  std::optional<Cost> bestCost;
  for (NodeId n = 0; n < static_cast<NodeId>(state.nodes().size()); ++n) {
    const NodeRecord& node = state.node(n);
    if (node.removed) continue;
    std::vector<ReplicaId> victims;
    for (ReplicaId r : node.replicas) {
      if (state.replica(r).placement.priority < priority) victims.push_back(r);
    }
    if (victims.empty()) continue;
    // Lowest priority first, then least recently used, then by id for determinism.
    std::sort(victims.begin(), victims.end(), [&](ReplicaId a, ReplicaId b) {
      const auto& ra = state.replica(a);
      const auto& rb = state.replica(b);
      return std::tie(ra.placement.priority, ra.lastActiveMs, ra.placement.replicaId) <
             std::tie(rb.placement.priority, rb.lastActiveMs, rb.placement.replicaId);
    });
    DecideOptions here = quiet;
    here.onlyNode = n;
    auto fits = [&]() { return engine.decide(scratch, request, here).placement.has_value(); };

    // Greedy prefix in eviction order until the request fits.
    std::vector<ReplicaId> chosen;
    bool ok = false;
    for (ReplicaId v : victims) {
      evict(scratch, state, v);
      chosen.push_back(v);
      if (fits()) {
        ok = true;
        break;
      }
    }
    if (!ok) {
      restore(scratch, state, chosen);
      continue;
    }
    // Drop victims the request does not need gone, most valuable first.
    for (std::size_t i = chosen.size(); i-- > 0;) {
      const ReplicaId v = chosen[i];
      // A victim that cannot even be put back (its fresh reservation no longer fits) stays.
      if (!restore(scratch, state, std::span<const ReplicaId>(&v, 1))) continue;
      if (fits()) {
        chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        evict(scratch, state, v);
      }
    }
    Decision d = engine.decide(scratch, request, here);
    int maxPriority = std::numeric_limits<int>::min();
    std::int64_t freedMib = 0;
    for (ReplicaId v : chosen) {
      const auto& rec = state.replica(v);
      maxPriority = std::max(maxPriority, rec.placement.priority);
      for (const auto& a : rec.placement.gpus) freedMib += a.reservedMib;
    }
    const Cost cost{maxPriority, chosen.size(), freedMib, node.rank};
    if (d.placement && (!bestCost || cost < *bestCost)) {
      bestCost = cost;
      plan.feasible = true;
      plan.node = node.spec.name;
      plan.victims.clear();
      for (ReplicaId v : chosen) plan.victims.push_back(state.replica(v).placement.replicaId);
      plan.placement = std::move(d.placement);
    }
    restore(scratch, state, chosen);
  }
  if (plan.feasible) {
    plan.reason = "fits on " + plan.node + " after unloading " + std::to_string(plan.victims.size()) +
                  " lower-priority replica(s)";
    return plan;
  }
  const Needs needs = deriveNeeds(request, engine.options());
  plan.gpusToAdd = std::max(needs.gpuCount, 1);
  plan.gpuTypeToAdd = typeToAdd(state, request, needs.memoryMib);
  plan.reason = direct.summary + "; does not fit even after eviction: add " +
                std::to_string(plan.gpusToAdd) + " GPU" + (plan.gpusToAdd == 1 ? "" : "s") +
                (plan.gpuTypeToAdd.empty() ? "" : " of type " + plan.gpuTypeToAdd) +
                (needs.gpuCount > 1 ? " on one node" : "") +
                (request.model.nvlinkRequired ? ", NVLink-connected" : "");
  return plan;
}

}  // namespace tessera::sched
