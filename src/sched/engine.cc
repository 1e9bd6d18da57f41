#include "sched/engine.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "sched/mig_choice.h"

namespace tessera::sched {
namespace {

Result<void> validateRequest(const model::PlacementRequest& r) {
  const auto& m = r.model;
  const std::string who = "request " + r.replicaId;
  if (r.replicaId.empty()) return fail(Error::invalid("request has an empty replicaId"));
  if (m.gpusPerReplica < 0 || m.gpusPerReplica > kMaxGpusPerReplica) {
    return fail(Error::invalid(who + ": gpusPerReplica must be in 0.." +
                               std::to_string(kMaxGpusPerReplica)));
  }
  if (m.weightsMib < 0 || m.kvCacheMib < 0 || m.overheadMib < 0) {
    return fail(Error::invalid(who + ": memory figures must be >= 0"));
  }
  if (m.computeMilli < 0 || m.computeMilli > 1000) {
    return fail(Error::invalid(who + ": computeMilli must be in 0..1000"));
  }
  if (m.memoryBandwidthGBps < 0 || m.cpuMilli < 0 || m.hostMemoryMib < 0) {
    return fail(Error::invalid(who + ": bandwidth, CPU and host memory must be >= 0"));
  }
  if ((m.sharing & model::kAllSharingModes) == 0) {
    return fail(Error::invalid(who + ": no sharing mode allowed"));
  }
  return {};
}

}  // namespace

Needs deriveNeeds(const model::PlacementRequest& request, const EngineOptions& options) {
  const auto& m = request.model;
  Needs n;
  n.gpuCount = m.gpusPerReplica;
  n.estimateMib = n.gpuCount > 0 ? m.memoryPerGpuMib() : 0;
  n.memoryMib = static_cast<std::int64_t>(
      std::ceil(static_cast<double>(n.estimateMib) * options.memorySafetyFactor - 1e-9));
  n.computeMilli = m.computeMilli;
  n.bandwidthGBps = m.memoryBandwidthGBps;
  n.cpuMilli = m.cpuMilli;
  n.hostMemoryMib = m.hostMemoryMib;
  return n;
}

PlacementEngine::PlacementEngine(PluginSet plugins, EngineOptions options)
    : plugins_(std::move(plugins)), options_(options) {
  perPlugin_.resize(plugins_.scores.size());
  for (const auto& f : plugins_.filters) {
    const std::uint8_t c = f->checks();
    if (c & FilterPlugin::kNodeCheck) nodeFilters_.push_back(f.get());
    if (c & FilterPlugin::kGpuCheck) gpuFilters_.push_back(f.get());
    if (c & FilterPlugin::kOptionCheck) optionFilters_.push_back(f.get());
  }
}

void PlacementEngine::reject(Pass pass, Decision& out, std::string_view plugin, bool node,
                             std::string nodeName, std::string gpuId,
                             const std::function<std::string()>& why) {
  if (pass == Pass::kFast) return;
  auto it = std::find_if(out.rejectionCounts.begin(), out.rejectionCounts.end(),
                         [&](const RejectionCount& c) { return c.plugin == plugin; });
  if (it == out.rejectionCounts.end()) {
    out.rejectionCounts.push_back({std::string(plugin), 0, 0});
    it = std::prev(out.rejectionCounts.end());
  }
  (node ? it->nodes : it->gpus)++;
  if (pass == Pass::kExplain) {
    out.rejections.push_back({std::move(nodeName), std::move(gpuId), std::string(plugin), why()});
  }
}

bool PlacementEngine::nodePasses(const DecisionContext& ctx, NodeId node, Pass pass,
                                 Decision& out) {
  std::int8_t& verdict = nodeVerdict_[static_cast<std::size_t>(node)];
  if (verdict != 0) return verdict > 0;
  for (const FilterPlugin* f : nodeFilters_) {
    if (!f->passNode(ctx, node)) {
      verdict = -1;
      if (pass != Pass::kFast) {
        reject(pass, out, f->name(), true, ctx.state.node(node).spec.name, "",
               [&] { return f->whyNode(ctx, node); });
      }
      return false;
    }
  }
  verdict = 1;
  return true;
}

bool PlacementEngine::gpuPasses(const DecisionContext& ctx, GpuId gpu, Pass pass,
                                Decision& out) {
  for (const FilterPlugin* f : gpuFilters_) {
    if (!f->passGpu(ctx, gpu)) {
      if (pass != Pass::kFast) {
        const GpuRecord& g = ctx.state.gpu(gpu);
        reject(pass, out, f->name(), false, ctx.state.node(g.node).spec.name, g.spec.id,
               [&] { return f->whyGpu(ctx, gpu); });
      }
      return false;
    }
  }
  return true;
}

void PlacementEngine::considerNode(const DecisionContext& ctx, NodeId node,
                                   std::span<const GpuId> gpus, Pass pass, Decision& out) {
  const ClusterState& st = ctx.state;
  const model::PlacementRequest& req = ctx.request;
  const int k = ctx.needs.gpuCount;
  Option opt;
  opt.node = node;
  opt.gpuCount = static_cast<std::int8_t>(k);
  const model::SharingMode plain = model::allows(req.model.sharing, model::SharingMode::kShared)
                                       ? model::SharingMode::kShared
                                       : model::SharingMode::kExclusive;
  opt.mode = plain;
  if (k == 1) {
    const GpuId g = gpus[0];
    opt.gpus[0] = g;
    if (st.gpu(g).spec.migEnabled) {
      auto choice = chooseMigSlice(st, g, req, ctx.needs);
      if (!choice) {
        reject(pass, out, "MigSlice", false, st.node(node).spec.name, st.gpu(g).spec.id,
               [] { return std::string("no free or creatable MIG slice is large enough"); });
        return;
      }
      opt.mode = model::SharingMode::kMig;
      opt.migProfile = static_cast<std::int16_t>(choice->profileIndex);
      opt.migStart = static_cast<std::int8_t>(choice->start);
      opt.migCreates = choice->creates;
    }
  } else if (k > 1) {
    // A multi-GPU replica takes k whole-card shares on one node, inside one NVLink group
    // and/or NUMA node when asked; the tightest domain that still fits is used so that
    // larger domains stay whole for larger replicas.
    group_.clear();
    for (GpuId g : gpus) {
      if (!st.gpu(g).spec.migEnabled) group_.push_back(g);
    }
    if (options_.gpuTieBreak == GpuTieBreak::kBestFit) {
      std::stable_sort(group_.begin(), group_.end(), [&](GpuId a, GpuId b) {
        const auto& ga = st.gpu(a);
        const auto& gb = st.gpu(b);
        if (ga.freeMemoryMib() != gb.freeMemoryMib()) return ga.freeMemoryMib() < gb.freeMemoryMib();
        if (ga.freeComputeMilli() != gb.freeComputeMilli()) {
          return ga.freeComputeMilli() < gb.freeComputeMilli();
        }
        return ga.indexInNode < gb.indexInNode;
      });
    } else {
      std::stable_sort(group_.begin(), group_.end(), [&](GpuId a, GpuId b) {
        return st.gpu(a).indexInNode < st.gpu(b).indexInNode;
      });
    }
    const bool byLink = req.model.nvlinkRequired;
    const bool byNuma = req.model.numaAligned;
    auto domainOf = [&](GpuId g) -> std::pair<int, int> {
      const auto& s = st.gpu(g).spec;
      return {byLink ? s.nvlinkGroup : 0, byNuma ? s.numaNode : 0};
    };
    std::map<std::pair<int, int>, int> counts;
    for (GpuId g : group_) {
      auto d = domainOf(g);
      if ((byLink && d.first < 0) || (byNuma && d.second < 0)) continue;
      ++counts[d];
    }
    const std::pair<int, int>* best = nullptr;
    int bestCount = 0;
    for (const auto& [d, c] : counts) {
      if (c >= k && (best == nullptr || c < bestCount)) {
        best = &d;
        bestCount = c;
      }
    }
    if (best == nullptr) {
      reject(pass, out, "GpuTopology", true, st.node(node).spec.name, "", [&] {
        int most = 0;
        for (const auto& [d, c] : counts) most = std::max(most, c);
        const std::string where = byLink && byNuma ? "one NVLink group on one NUMA node"
                                  : byLink         ? "one NVLink group"
                                  : byNuma         ? "one NUMA node"
                                                   : "the node";
        return "needs " + std::to_string(k) + " GPUs in " + where + ", " +
               std::to_string(most) + " usable";
      });
      return;
    }
    int taken = 0;
    for (GpuId g : group_) {
      if (taken == k) break;
      if (domainOf(g) == *best) opt.gpus[static_cast<std::size_t>(taken++)] = g;
    }
  }
  for (const FilterPlugin* f : optionFilters_) {
    if (!f->passOption(ctx, opt)) {
      reject(pass, out, f->name(), true, st.node(node).spec.name, "",
             [&] { return f->whyOption(ctx, opt); });
      return;
    }
  }
  candidates_.push_back(opt);
}

void PlacementEngine::collectOptions(const DecisionContext& ctx, const DecideOptions& opts,
                                     Pass pass, Decision& out) {
  const ClusterState& st = ctx.state;
  for (const auto& f : plugins_.filters) f->prepare(ctx);
  nodeVerdict_.assign(st.nodes().size(), 0);
  candidates_.clear();
  passing_.clear();
  auto liveNode = [&](NodeId n) {
    return !st.node(n).removed && (!opts.onlyNode || *opts.onlyNode == n);
  };
  const auto nodeCount = static_cast<NodeId>(st.nodes().size());
  if (ctx.needs.gpuCount == 0) {
    for (NodeId n = 0; n < nodeCount; ++n) {
      if (liveNode(n) && nodePasses(ctx, n, pass, out)) considerNode(ctx, n, {}, pass, out);
    }
    return;
  }
  // Node-major over the state, front to back, so that a node's options arrive together
  // (score plugins memoise per node). In the fast pass the capacity keys skip whole nodes and
  // GPUs that cannot hold the request's memory or compute: the books would refuse those
  // placements whatever the filters say. The counting and explaining passes visit everything
  // so that each rejection gets its filter.
  const NodeId from = opts.onlyNode.value_or(0);
  const NodeId to = opts.onlyNode ? std::min<NodeId>(*opts.onlyNode + 1, nodeCount) : nodeCount;
  const bool prune = pass == Pass::kFast;
  const std::int64_t needMib = ctx.needs.memoryMib;
  const std::int32_t needCompute = ctx.needs.computeMilli;
  for (NodeId n = from; n < to; ++n) {
    if (!liveNode(n)) continue;
    if (prune && (st.nodePlaceableMib(n) < needMib || st.nodeMaxFreeComputeMilli(n) < needCompute)) {
      continue;
    }
    if (!nodePasses(ctx, n, pass, out)) continue;
    for (GpuId g : st.node(n).gpuIds) {
      if (prune) {
        if (st.indexedPlaceableMib(g) < needMib) continue;
        const GpuRecord& rec = st.gpu(g);
        if (!rec.spec.migEnabled && rec.freeComputeMilli() < needCompute) continue;
      }
      if (gpuPasses(ctx, g, pass, out)) passing_.emplace_back(n, g);
    }
  }
  if (ctx.needs.gpuCount == 1) {
    for (const auto& [n, g] : passing_) {
      considerNode(ctx, n, std::span<const GpuId>(&g, 1), pass, out);
    }
    return;
  }
  std::sort(passing_.begin(), passing_.end());
  std::vector<GpuId> nodeGpus;
  for (std::size_t i = 0; i < passing_.size();) {
    std::size_t j = i;
    nodeGpus.clear();
    while (j < passing_.size() && passing_[j].first == passing_[i].first) {
      nodeGpus.push_back(passing_[j].second);
      ++j;
    }
    if (static_cast<int>(nodeGpus.size()) >= ctx.needs.gpuCount) {
      considerNode(ctx, passing_[i].first, nodeGpus, pass, out);
    } else {
      reject(pass, out, "GpuTopology", true, st.node(passing_[i].first).spec.name, "", [&] {
        return "needs " + std::to_string(ctx.needs.gpuCount) + " GPUs, " +
               std::to_string(nodeGpus.size()) + " pass the filters";
      });
    }
    i = j;
  }
}

void PlacementEngine::scoreCandidates(const DecisionContext& ctx) {
  for (const auto& p : plugins_.scores) p->prepare(ctx);
  const std::size_t n = candidates_.size();
  total_.assign(n, 0);
  for (std::size_t p = 0; p < plugins_.scores.size(); ++p) {
    auto& s = perPlugin_[p];
    s.assign(n, 0);
    plugins_.scores[p]->score(ctx, candidates_, s);
    plugins_.scores[p]->normalize(s);
    const std::int64_t w = plugins_.weights[p];
    for (std::size_t i = 0; i < n; ++i) total_[i] += w * s[i];
  }
}

std::size_t PlacementEngine::choose(const ClusterState& st) const {
  // Memory (then compute) left on the option's GPUs after placement: the best-fit tie-break.
  auto leftover = [&](const Option& o) {
    std::pair<std::int64_t, std::int64_t> left{0, 0};
    for (int i = 0; i < o.gpuCount; ++i) {
      const GpuRecord& g = st.gpu(o.gpus[static_cast<std::size_t>(i)]);
      left.first += g.freeMemoryMib();
      left.second += g.freeComputeMilli();
    }
    return left;
  };
  auto firstIndex = [&](const Option& o) {
    return o.gpuCount > 0 ? st.gpu(o.gpus[0]).indexInNode : 0;
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < candidates_.size(); ++i) {
    const Option& a = candidates_[i];
    const Option& b = candidates_[best];
    if (total_[i] != total_[best]) {
      if (total_[i] > total_[best]) best = i;
      continue;
    }
    const auto ra = st.node(a.node).rank;
    const auto rb = st.node(b.node).rank;
    if (ra != rb) {
      if (ra < rb) best = i;
      continue;
    }
    if (a.node != b.node) {
      if (a.node < b.node) best = i;
      continue;
    }
    if (options_.gpuTieBreak == GpuTieBreak::kBestFit) {
      const auto la = leftover(a);
      const auto lb = leftover(b);
      if (la != lb) {
        if (la < lb) best = i;
        continue;
      }
    }
    if (firstIndex(a) < firstIndex(b)) best = i;
  }
  return best;
}

Placement placementFor(const ClusterState& st, const model::PlacementRequest& req,
                       const Needs& needs, const Option& o) {
  Placement p;
  p.replicaId = req.replicaId;
  p.deployment = req.deployment.empty() ? req.model.name : req.deployment;
  p.modelName = req.model.name;
  p.priority = req.model.priority;
  p.mode = o.mode;
  p.node = o.node;
  p.cpuMilli = needs.cpuMilli;
  p.hostMemoryMib = needs.hostMemoryMib;
  for (int i = 0; i < o.gpuCount; ++i) {
    const GpuId gid = o.gpus[static_cast<std::size_t>(i)];
    const GpuRecord& g = st.gpu(gid);
    GpuAssignment a;
    a.gpu = gid;
    a.estimateMib = needs.estimateMib;
    switch (o.mode) {
      case model::SharingMode::kShared:
        a.reservedMib = needs.memoryMib;
        a.computeMilli = needs.computeMilli;
        a.bandwidthGBps = needs.bandwidthGBps;
        break;
      case model::SharingMode::kExclusive:
        // The whole card: everything free now, every SM share.
        a.reservedMib = std::max(needs.memoryMib, g.freeMemoryMib());
        a.computeMilli = g.freeComputeMilli();
        a.bandwidthGBps = needs.bandwidthGBps;
        break;
      case model::SharingMode::kMig: {
        const model::GpuType& type = st.catalog().at(g.typeIndex);
        const model::MigProfile& prof = type.migProfiles[static_cast<std::size_t>(o.migProfile)];
        int slices = 1;
        for (const auto& mp : type.migProfiles) slices = std::max(slices, mp.computeSlices);
        a.reservedMib = prof.memoryMib;
        a.computeMilli = prof.computeSlices * g.spec.computeMilli / slices;
        a.bandwidthGBps = 0;  // a slice's bandwidth is partitioned in hardware
        a.migProfile = o.migProfile;
        a.migStart = o.migStart;
        break;
      }
    }
    p.gpus.push_back(a);
  }
  return p;
}

void PlacementEngine::refuseCandidate(const ClusterState& state, std::size_t index,
                                      const std::string& why, const DecideOptions& opts,
                                      Decision& out) {
  static constexpr std::string_view kBooks = "ClusterState";
  const Option& o = candidates_[index];
  const NodeRecord& node = state.node(o.node);
  if (opts.explain || opts.explainFailures) {
    std::string gpus;
    for (int i = 0; i < o.gpuCount; ++i) {
      gpus += (i ? "," : "") + state.gpu(o.gpus[static_cast<std::size_t>(i)]).spec.id;
    }
    out.rejections.push_back({node.spec.name, gpus, std::string(kBooks), why});
  }
  auto count = std::find_if(out.rejectionCounts.begin(), out.rejectionCounts.end(),
                            [](const RejectionCount& c) { return c.plugin == kBooks; });
  if (count == out.rejectionCounts.end()) {
    out.rejectionCounts.push_back({std::string(kBooks), 0, 0});
    count = out.rejectionCounts.end() - 1;
  }
  count->gpus += std::max<int>(o.gpuCount, 1);
  const auto at = static_cast<std::ptrdiff_t>(index);
  candidates_.erase(candidates_.begin() + at);
  total_.erase(total_.begin() + at);
  for (auto& column : perPlugin_) {
    if (index < column.size()) column.erase(column.begin() + at);
  }
}

std::string PlacementEngine::summarize(const ClusterState& st, const Decision& d) {
  std::string s = "0/" + std::to_string(st.liveNodeCount()) + " nodes can take it";
  if (d.rejectionCounts.empty()) return s + ": no live node";
  s += ":";
  bool first = true;
  for (const auto& c : d.rejectionCounts) {
    s += first ? " " : ", ";
    first = false;
    s += c.plugin + " rejected ";
    if (c.nodes > 0) s += std::to_string(c.nodes) + " node" + (c.nodes == 1 ? "" : "s");
    if (c.nodes > 0 && c.gpus > 0) s += " and ";
    if (c.gpus > 0) s += std::to_string(c.gpus) + " GPU" + (c.gpus == 1 ? "" : "s");
  }
  return s;
}

Decision PlacementEngine::decide(const ClusterState& state, const model::PlacementRequest& request,
                                 DecideOptions opts) {
  Decision d;
  if (auto ok = validateRequest(request); !ok) {
    d.summary = "invalid request: " + ok.error().message;
    d.requestRefused = true;
    return d;
  }
  if (state.findReplica(request.replicaId)) {
    d.summary = "replica " + request.replicaId + " is already placed";
    d.requestRefused = true;
    return d;
  }
  // Files and API bodies are checked name by name when they are read; here, a list where
  // some name is known (a newer type listed ahead of its catalogue entry) still places on
  // the known ones, and one where none is can never place anywhere.
  const auto known = [&](const std::string& type) { return state.catalog().indexOf(type) >= 0; };
  if (!request.gpuTypes.empty() &&
      std::none_of(request.gpuTypes.begin(), request.gpuTypes.end(), known)) {
    d.summary = "invalid request: " +
                state.catalog()
                    .checkKnown(request.gpuTypes, "request " + request.replicaId + ": gpuTypes")
                    .error()
                    .message;
    d.requestRefused = true;
    return d;
  }
  const Needs needs = deriveNeeds(request, options_);
  const DecisionContext ctx{state, request, needs};
  collectOptions(ctx, opts, opts.explain ? Pass::kExplain : Pass::kFast, d);
  auto nothingFits = [&]() {
    if (!opts.explain && (opts.explainFailures || opts.diagnoseFailures)) {
      collectOptions(ctx, opts, opts.explainFailures ? Pass::kExplain : Pass::kCount, d);
    }
    d.summary = opts.explain || opts.explainFailures || opts.diagnoseFailures
                    ? summarize(state, d)
                    : "nothing fits";
    return d;
  };
  if (candidates_.empty()) return nothingFits();
  d.feasibleOptions = static_cast<int>(candidates_.size());
  scoreCandidates(ctx);
  // The profile's filters decide what is feasible, but the books have the last word: a
  // profile without MemoryFit or MigSlice would otherwise choose what ClusterState refuses,
  // and a plan would call unplaceable what its explanation places. The best option the books
  // accept wins; the ones they refuse are rejections like any filter's.
  std::size_t best = choose(state);
  Placement chosen = placementFor(state, request, needs, candidates_[best]);
  for (auto ok = state.checkPlacement(chosen); !ok; ok = state.checkPlacement(chosen)) {
    refuseCandidate(state, best, ok.error().message, opts, d);
    if (candidates_.empty()) {
      d.feasibleOptions = 0;
      d.summary = summarize(state, d);
      return d;
    }
    best = choose(state);
    chosen = placementFor(state, request, needs, candidates_[best]);
  }
  d.placement = std::move(chosen);
  d.totalScore = total_[best];
  for (std::size_t p = 0; p < plugins_.scores.size(); ++p) {
    d.breakdown.push_back(
        {std::string(plugins_.scores[p]->name()), plugins_.weights[p], perPlugin_[p][best]});
  }
  return d;
}

Decision PlacementEngine::place(ClusterState& state, const model::PlacementRequest& request,
                                DecideOptions opts) {
  Decision d = decide(state, request, opts);
  if (!d.placement) return d;
  if (auto ok = state.apply(replicaPlaced(state, *d.placement, state.clock().nowMs())); !ok) {
    // A plugin set that let through what the books refuse: report, never over-commit.
    d.summary = "the cluster state refused the placement: " + ok.error().message;
    d.placement.reset();
  }
  return d;
}

std::vector<PlacementEngine::NodeScore> PlacementEngine::scoreNodes(
    const ClusterState& state, const model::PlacementRequest& request, DecideOptions opts) {
  std::vector<NodeScore> out;
  if (!validateRequest(request)) return out;
  const Needs needs = deriveNeeds(request, options_);
  const DecisionContext ctx{state, request, needs};
  Decision scratch;
  collectOptions(ctx, opts, Pass::kFast, scratch);
  if (candidates_.empty()) return out;
  scoreCandidates(ctx);
  std::map<NodeId, std::int64_t> best;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    auto [it, inserted] = best.emplace(candidates_[i].node, total_[i]);
    if (!inserted) it->second = std::max(it->second, total_[i]);
  }
  for (const auto& [n, s] : best) out.push_back({n, s});
  return out;
}

}  // namespace tessera::sched
