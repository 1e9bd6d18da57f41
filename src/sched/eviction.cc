// Eviction planning: what to unload so that a request fits, or what capacity to add.

#include <algorithm>
#include <map>
#include <optional>
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
    if (!scratch.apply(replicaPlaced(scratch, again, scratch.clock().nowMs()))) {
      all = false;
      continue;
    }
    // Placed just above: marking it loaded cannot fail.
    if (rec.phase == ReplicaPhase::kLoaded) (void)scratch.apply(ReplicaLoaded{rec.placement.replicaId});
  }
  return all;
}

// Callers evict only replicas present on the scratch copy, so the unload cannot fail.
void evict(ClusterState& scratch, const ClusterState& original, ReplicaId id) {
  (void)scratch.apply(ReplicaUnloaded{original.replica(id).placement.replicaId});
}

std::string cores(std::int64_t milli) {
  std::string text = std::to_string(milli / 1000);
  if (const std::int64_t frac = milli % 1000; frac != 0) {
    std::string digits = std::to_string(1000 + frac).substr(1);
    while (digits.back() == '0') digits.pop_back();
    text += "." + digits;
  }
  return text;
}

std::string mib(std::int64_t value) {
  if (value % 1024 == 0) return std::to_string(value / 1024) + " GiB";
  return std::to_string(value) + " MiB";
}

// The node's spec as NodeUpdated wants it: the record keeps its GPUs apart.
model::NodeSpec specOf(const ClusterState& state, NodeId id) {
  const NodeRecord& node = state.node(id);
  model::NodeSpec spec = node.spec;
  spec.gpus.clear();
  for (GpuId g : node.gpuIds) spec.gpus.push_back(state.gpu(g).spec);
  spec.rank = node.rank;
  return spec;
}

// Every remedy is tried on a scratch copy before it is offered: advice the engine would
// still refuse is false advice. First the cheap one, when GPUs are free but a node's CPU or
// host memory is the binding resource: grow (or free) that on one node.
bool adviseHostResources(PlacementEngine& engine, ClusterState& scratch,
                         const model::PlacementRequest& request, const Needs& needs,
                         EvictionPlan& plan) {
  using Shortfall = std::tuple<int, std::int64_t, std::int64_t, std::int64_t>;
  std::optional<Shortfall> best;
  DecideOptions quiet;
  quiet.explainFailures = false;
  quiet.diagnoseFailures = false;
  for (NodeId n = 0; n < static_cast<NodeId>(scratch.nodes().size()); ++n) {
    const NodeRecord& node = scratch.node(n);
    if (node.removed) continue;
    const std::int64_t cpu = std::max<std::int64_t>(0, needs.cpuMilli - node.freeCpuMilli());
    const std::int64_t mem =
        std::max<std::int64_t>(0, needs.hostMemoryMib - node.freeHostMemoryMib());
    if (cpu == 0 && mem == 0) continue;
    const Shortfall cost{(cpu > 0) + (mem > 0), cpu, mem, node.rank};
    if (best && !(cost < *best)) continue;
    const model::NodeSpec original = specOf(scratch, n);
    model::NodeSpec grown = original;
    grown.cpuMilli += cpu;
    grown.hostMemoryMib += mem;
    if (!scratch.apply(NodeUpdated{grown})) continue;
    DecideOptions here = quiet;
    here.onlyNode = n;
    const bool fits = engine.decide(scratch, request, here).placement.has_value();
    (void)scratch.apply(NodeUpdated{original});  // the same spec it held a moment ago
    if (!fits) continue;
    best = cost;
    plan.growNode = node.spec.name;
    plan.addCpuMilli = cpu;
    plan.addHostMemoryMib = mem;
  }
  if (!best) return false;
  std::string what;
  if (plan.addCpuMilli > 0) what = cores(plan.addCpuMilli) + " CPU";
  if (plan.addHostMemoryMib > 0) {
    what += (what.empty() ? "" : " and ") + mib(plan.addHostMemoryMib) + " host memory";
  }
  plan.capacity = "the GPUs are there, the host is short: free or add " + what + " on node " +
                  plan.growNode;
  return true;
}

// GPU types worth offering, in order: those the request names, else the fleet's own types,
// then the catalogue's, smallest memory first. A type that cannot hold one GPU's share, or
// without NVLink for a replica that needs it, is never offered.
std::vector<int> typesToTry(const ClusterState& state, const model::PlacementRequest& request,
                            const Needs& needs) {
  const auto& cat = state.catalog();
  const bool needLink = request.model.nvlinkRequired && needs.gpuCount > 1;
  auto usable = [&](int t) {
    const model::GpuType& type = cat.at(t);
    if (type.opaque || (type.memoryMib && *type.memoryMib < needs.memoryMib)) return false;
    return !needLink || type.nvlinkGBps.has_value();
  };
  std::vector<int> out;
  auto add = [&](int t) {
    if (t >= 0 && usable(t) && std::find(out.begin(), out.end(), t) == out.end()) {
      out.push_back(t);
    }
  };
  for (const std::string& name : request.gpuTypes) add(cat.indexOf(name));
  if (!request.gpuTypes.empty()) return out;
  auto bySize = [&](std::vector<int> types) {
    std::stable_sort(types.begin(), types.end(), [&](int a, int b) {
      return cat.at(a).memoryMib.value_or(0) < cat.at(b).memoryMib.value_or(0);
    });
    for (int t : types) add(t);
  };
  std::vector<int> fleet;
  for (const GpuRecord& g : state.gpus()) {
    if (g.node >= 0 && !state.node(g.node).removed) fleet.push_back(g.typeIndex);
  }
  bySize(std::move(fleet));
  std::vector<int> all(static_cast<std::size_t>(cat.size()));
  for (int t = 0; t < cat.size(); ++t) all[static_cast<std::size_t>(t)] = t;
  bySize(std::move(all));
  return out;
}

// Then a new node: the request's GPUs of the first type that works, with the request's CPU
// and host memory, labelled and tainted like an existing node (so selectors and tolerations
// are met as they are today) or bare.
bool adviseNewNode(PlacementEngine& engine, ClusterState& scratch,
                   const model::PlacementRequest& request, const Needs& needs,
                   EvictionPlan& plan) {
  struct Template {
    std::string like;  // empty: a bare node
    std::map<std::string, std::string> labels;
    std::vector<model::Taint> taints;
  };
  std::vector<Template> templates;
  auto sameAs = [](const Template& t, const model::NodeSpec& spec) {
    if (t.labels != spec.labels || t.taints.size() != spec.taints.size()) return false;
    for (std::size_t i = 0; i < spec.taints.size(); ++i) {
      const auto& a = t.taints[i];
      const auto& b = spec.taints[i];
      if (a.key != b.key || a.value != b.value || a.effect != b.effect) return false;
    }
    return true;
  };
  constexpr std::size_t kMaxTemplates = 16;
  std::int64_t lastRank = 0;
  for (const NodeRecord& node : scratch.nodes()) {
    if (node.removed) continue;
    lastRank = std::max(lastRank, node.rank);
    if (templates.size() == kMaxTemplates) continue;
    if (std::none_of(templates.begin(), templates.end(),
                     [&](const Template& t) { return sameAs(t, node.spec); })) {
      templates.push_back({node.spec.name, node.spec.labels, node.spec.taints});
    }
  }
  templates.push_back({});

  std::string name = "tessera-advice-node";
  while (scratch.findNode(name)) name += "-x";
  DecideOptions quiet;
  quiet.explainFailures = false;
  std::string lastRefusal;
  const int count = needs.gpuCount;
  for (int t : typesToTry(scratch, request, needs)) {
    const model::GpuType& type = scratch.catalog().at(t);
    for (const Template& tpl : templates) {
      model::NodeSpec spec;
      spec.name = name;
      spec.cpuMilli = needs.cpuMilli;
      spec.hostMemoryMib = needs.hostMemoryMib;
      spec.labels = tpl.labels;
      spec.taints = tpl.taints;
      spec.rank = lastRank + 1;
      const bool migOnly = request.model.sharing ==
                           static_cast<model::SharingModes>(model::SharingMode::kMig);
      for (int i = 0; i < count; ++i) {
        model::GpuSpec gpu;
        gpu.id = std::to_string(i);
        gpu.type = type.name;
        gpu.numaNode = 0;
        gpu.nvlinkGroup = type.nvlinkGBps ? 0 : -1;
        gpu.migEnabled = migOnly && type.migCapable();
        spec.gpus.push_back(std::move(gpu));
      }
      if (!scratch.apply(NodeAdded{spec})) continue;
      DecideOptions here = quiet;
      here.onlyNode = scratch.findNode(name);
      const Decision d = engine.decide(scratch, request, here);
      (void)scratch.apply(NodeRemoved{name, /*force=*/true});
      if (!d.placement) {
        if (lastRefusal.empty()) lastRefusal = d.summary;
        continue;
      }
      plan.gpusToAdd = count;
      plan.gpuTypeToAdd = count > 0 ? type.name : "";
      plan.likeNode = tpl.like;
      std::string what = count == 0 ? "a node"
                                    : "a node with " + std::to_string(count) + " x " + type.name;
      if (count > 1 && request.model.nvlinkRequired) what += ", NVLink-connected";
      if (needs.cpuMilli > 0 || needs.hostMemoryMib > 0) {
        what += ", " + cores(needs.cpuMilli) + " CPU and " + mib(needs.hostMemoryMib) +
                " host memory free";
      }
      if (!tpl.like.empty() && !tpl.taints.empty()) {
        what += ", with the labels and taints of " + tpl.like;
      } else if (!tpl.like.empty() && !tpl.labels.empty()) {
        what += ", labelled like " + tpl.like;
      }
      plan.capacity = "add " + what;
      return true;
    }
    if (count == 0) break;  // without GPUs, the type does not matter
  }
  plan.capacity = "no added capacity of a known type would take it";
  if (!lastRefusal.empty()) plan.capacity += " (a new node is refused too: " + lastRefusal + ")";
  return false;
}

}  // namespace

EvictionPlan planEviction(PlacementEngine& engine, const ClusterState& state,
                          const model::PlacementRequest& request,
                          std::span<const std::string> keep) {
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
    plan.requestRefused = true;
    plan.reason = direct.summary;
    return plan;
  }

  const int priority = request.model.priority;
  // Copied when the first node with candidate victims is tried: a request that no replica
  // is below (the common refusal: everything at its priority or above) copies nothing.
  std::optional<ClusterState> scratchCopy;
  using Cost = std::tuple<int, std::size_t, std::int64_t, std::int64_t>;  // max prio, count, MiB, rank
  std::optional<Cost> bestCost;
  for (NodeId n = 0; n < static_cast<NodeId>(state.nodes().size()); ++n) {
    const NodeRecord& node = state.node(n);
    if (node.removed) continue;
    std::vector<ReplicaId> victims;
    for (ReplicaId r : node.replicas) {
      const Placement& p = state.replica(r).placement;
      if (p.priority < priority && std::find(keep.begin(), keep.end(), p.replicaId) == keep.end()) {
        victims.push_back(r);
      }
    }
    if (victims.empty()) continue;
    if (!scratchCopy) scratchCopy.emplace(state);
    ClusterState& scratch = *scratchCopy;
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
  // The capacity what-ifs run on a fresh copy of `state`, not on the eviction search's: the
  // victims it put back are booked at their charge with fresh reservations, which is not
  // always what `state` books (telemetry above a lapsed reservation, say), and advice tried
  // on a state that books less than the real one can be false.
  ClusterState whatIf(state);
  const Needs needs = deriveNeeds(request, engine.options());
  if (!adviseHostResources(engine, whatIf, request, needs, plan)) {
    adviseNewNode(engine, whatIf, request, needs, plan);
  }
  plan.reason = direct.summary + "; does not fit even after eviction: " + plan.capacity;
  return plan;
}

}  // namespace tessera::sched
