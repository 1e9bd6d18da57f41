#include "reference_scan.h"

#include <algorithm>
#include <map>
#include <utility>

#include "sched/mig_choice.h"

namespace tessera::bench {

using sched::ClusterState;
using sched::GpuId;
using sched::GpuRecord;
using sched::NodeId;
using sched::Option;

ReferenceScan::ReferenceScan(sched::PluginSet plugins, sched::EngineOptions options)
    : plugins_(std::move(plugins)), options_(options) {}

std::optional<Option> ReferenceScan::nodeOption(const sched::DecisionContext& ctx, NodeId node,
                                                const std::vector<GpuId>& passing) const {
  const ClusterState& st = ctx.state;
  const auto& model = ctx.request.model;
  const int k = ctx.needs.gpuCount;
  Option opt;
  opt.node = node;
  opt.gpuCount = static_cast<std::int8_t>(k);
  opt.mode = model::allows(model.sharing, model::SharingMode::kShared)
                 ? model::SharingMode::kShared
                 : model::SharingMode::kExclusive;
  // A k-GPU replica takes whole-card shares inside the tightest NVLink / NUMA domain that
  // holds k of the passing GPUs, best-fit GPUs first (the engine's rule).
  std::vector<GpuId> group;
  for (GpuId g : passing) {
    if (!st.gpu(g).spec.migEnabled) group.push_back(g);
  }
  auto order = [&](GpuId a, GpuId b) {
    const GpuRecord& ga = st.gpu(a);
    const GpuRecord& gb = st.gpu(b);
    if (options_.gpuTieBreak == sched::GpuTieBreak::kBestFit) {
      if (ga.freeMemoryMib() != gb.freeMemoryMib()) return ga.freeMemoryMib() < gb.freeMemoryMib();
      if (ga.freeComputeMilli() != gb.freeComputeMilli()) {
        return ga.freeComputeMilli() < gb.freeComputeMilli();
      }
    }
    return ga.indexInNode < gb.indexInNode;
  };
  std::stable_sort(group.begin(), group.end(), order);
  auto domainOf = [&](GpuId g) {
    const auto& s = st.gpu(g).spec;
    return std::pair<int, int>{model.nvlinkRequired ? s.nvlinkGroup : 0,
                               model.numaAligned ? s.numaNode : 0};
  };
  std::map<std::pair<int, int>, int> counts;
  for (GpuId g : group) {
    const auto d = domainOf(g);
    if ((model.nvlinkRequired && d.first < 0) || (model.numaAligned && d.second < 0)) continue;
    ++counts[d];
  }
  std::optional<std::pair<int, int>> best;
  int bestCount = 0;
  for (const auto& [d, c] : counts) {
    if (c >= k && (!best || c < bestCount)) {
      best = d;
      bestCount = c;
    }
  }
  if (!best) return std::nullopt;
  int taken = 0;
  for (GpuId g : group) {
    if (taken < k && domainOf(g) == *best) opt.gpus[static_cast<std::size_t>(taken++)] = g;
  }
  return opt;
}

std::optional<ReferenceScan::Choice> ReferenceScan::decide(const ClusterState& st,
                                                           const model::PlacementRequest& request) {
  const sched::Needs needs = sched::deriveNeeds(request, options_);
  if (needs.gpuCount <= 0) return std::nullopt;
  const sched::DecisionContext ctx{st, request, needs};
  for (const auto& f : plugins_.filters) f->prepare(ctx);

  // Filter: every live node, every GPU, every filter.
  std::vector<Option> options;
  std::vector<GpuId> passing;
  for (NodeId n = 0; n < static_cast<NodeId>(st.nodes().size()); ++n) {
    if (st.node(n).removed) continue;
    bool nodeOk = true;
    for (const auto& f : plugins_.filters) nodeOk = nodeOk && f->passNode(ctx, n);
    if (!nodeOk) continue;
    passing.clear();
    for (GpuId g : st.node(n).gpuIds) {
      bool gpuOk = true;
      for (const auto& f : plugins_.filters) gpuOk = gpuOk && f->passGpu(ctx, g);
      if (gpuOk) passing.push_back(g);
    }
    std::vector<Option> fromNode;
    if (needs.gpuCount == 1) {
      for (GpuId g : passing) {
        Option o;
        o.node = n;
        o.gpuCount = 1;
        o.gpus[0] = g;
        o.mode = model::allows(request.model.sharing, model::SharingMode::kShared)
                     ? model::SharingMode::kShared
                     : model::SharingMode::kExclusive;
        if (st.gpu(g).spec.migEnabled) {
          const auto choice = sched::chooseMigSlice(st, g, request, needs);
          if (!choice) continue;
          o.mode = model::SharingMode::kMig;
          o.migProfile = choice->profileIndex;
          o.migStart = choice->start;
          o.migCreates = choice->creates;
        }
        fromNode.push_back(o);
      }
    } else if (static_cast<int>(passing.size()) >= needs.gpuCount) {
      if (auto o = nodeOption(ctx, n, passing)) fromNode.push_back(*o);
    }
    for (const Option& o : fromNode) {
      bool ok = true;
      for (const auto& f : plugins_.filters) ok = ok && f->passOption(ctx, o);
      if (ok) options.push_back(o);
    }
  }
  if (options.empty()) return std::nullopt;

  // Score: every plugin over every option, normalised, weighted, summed.
  for (const auto& p : plugins_.scores) p->prepare(ctx);
  std::vector<std::int64_t> total(options.size(), 0);
  std::vector<std::vector<std::int64_t>> perPlugin(plugins_.scores.size());
  for (std::size_t p = 0; p < plugins_.scores.size(); ++p) {
    perPlugin[p].assign(options.size(), 0);
    plugins_.scores[p]->score(ctx, options, perPlugin[p]);
    plugins_.scores[p]->normalize(perPlugin[p]);
    for (std::size_t i = 0; i < options.size(); ++i)
      total[i] += plugins_.weights[p] * perPlugin[p][i];
  }

  // Choose: highest total; then lower node rank, lower node id, less left over (best fit),
  // lower first GPU index.
  auto key = [&](std::size_t i) {
    const Option& o = options[i];
    std::int64_t freeMib = 0, freeCompute = 0;
    if (options_.gpuTieBreak == sched::GpuTieBreak::kBestFit) {
      for (int j = 0; j < o.gpuCount; ++j) {
        const GpuRecord& g = st.gpu(o.gpus[static_cast<std::size_t>(j)]);
        freeMib += g.freeMemoryMib();
        freeCompute += g.freeComputeMilli();
      }
    }
    return std::make_tuple(-total[i], st.node(o.node).rank, o.node, freeMib, freeCompute,
                           st.gpu(o.gpus[0]).indexInNode);
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < options.size(); ++i) {
    if (key(i) < key(best)) best = i;
  }
  return Choice{sched::placementFor(st, request, needs, options[best]), total[best],
                static_cast<int>(options.size())};
}

sched::BatchPlan ReferenceScan::planBatch(const ClusterState& state,
                                          std::vector<model::PlacementRequest> requests) {
  std::stable_sort(requests.begin(), requests.end(),
                   [](const model::PlacementRequest& a, const model::PlacementRequest& b) {
                     auto key = [](const model::PlacementRequest& r) {
                       const auto& m = r.model;
                       return std::make_tuple(m.gpusPerReplica > 0 ? m.memoryPerGpuMib() : 0,
                                              m.gpusPerReplica, m.priority);
                     };
                     if (key(a) != key(b)) return key(a) > key(b);
                     return a.replicaId < b.replicaId;
                   });
  ClusterState scratch(state);
  sched::BatchPlan plan;
  for (const auto& request : requests) {
    auto choice = decide(scratch, request);
    if (choice &&
        scratch.apply(sched::replicaPlaced(scratch, choice->placement, scratch.clock().nowMs()))) {
      plan.assignments.push_back(std::move(choice->placement));
    } else {
      plan.unplaceable.push_back({request.replicaId, "does not fit"});
    }
  }
  return plan;
}

}  // namespace tessera::bench
