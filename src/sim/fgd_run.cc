#include "sim/fgd_run.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/plugin.h"
#include "sched/packing_lp.h"

namespace tessera::sim {
namespace {

std::vector<sched::PluginSpec> artifactFilters() {
  return {{"NodeResources", 1, sched::PluginArgs::object()},
          {"GpuType", 1, sched::PluginArgs::object()},
          {"ComputeCap", 1, sched::PluginArgs{{"cap", 1.0}, {"mode", "hard"}}}};
}

// Every GPU of a node is of one type in the trace; -1 for a node without GPUs.
int nodeGpuType(const sched::ClusterState& state, sched::NodeId node) {
  const auto& ids = state.node(node).gpuIds;
  return ids.empty() ? -1 : state.gpu(ids.front()).typeIndex;
}

}  // namespace

bool isPolicyName(std::string_view name) {
  return std::find(kPolicyNames.begin(), kPolicyNames.end(), name) != kPolicyNames.end();
}

Result<sched::Profile> policyProfile(std::string_view policy,
                                     std::span<const sched::TaskShape> typical,
                                     std::uint64_t seed) {
  if (policy == "tessera") return tesseraProfile(typical);
  sched::Profile p;
  p.name = std::string(policy);
  p.filters = artifactFilters();
  p.options.gpuTieBreak = sched::GpuTieBreak::kBestFit;
  sched::PluginArgs args = sched::PluginArgs::object();
  std::string plugin;
  if (policy == "random") {
    plugin = "ArtifactRandom";
    args = sched::PluginArgs{{"seed", seed}};
  } else if (policy == "dotprod") {
    plugin = "ArtifactDotProd";
  } else if (policy == "clustering") {
    plugin = "ArtifactGpuClustering";
  } else if (policy == "packing") {
    plugin = "ArtifactGpuPacking";
  } else if (policy == "bestfit") {
    plugin = "ArtifactBestFit";
  } else if (policy == "fgd") {
    plugin = "ArtifactFgd";
    args = sched::taskShapesToArgs(typical);
    p.options.gpuTieBreak = sched::GpuTieBreak::kIndex;
  } else {
    std::string known;
    for (auto n : kPolicyNames) known += (known.empty() ? "" : ", ") + std::string(n);
    return fail(
        Error::invalid("unknown policy '" + std::string(policy) + "' (known: " + known + ")"));
  }
  p.scores = {{plugin, 1000, std::move(args)}};
  return p;
}

sched::Profile tesseraProfile(std::span<const sched::TaskShape> workload) {
  sched::Profile p;
  p.name = "tessera";
  p.filters = artifactFilters();
  // PackingGradient (sched/plugins/packing_gradient.h, docs/tessera-policy.md): the loss of
  // the expected workload's usable capacity, stranded GPU, GPU-type pressure and the
  // bin-packing LP's guidance (waste committed, pattern order, CPU kept for open patterns),
  // one weight set for every trace. It scores a sharing pod's GPUs one by one; equal costs mean
  // identical node states, so the lowest GPU index is as good as any.
  p.options.gpuTieBreak = sched::GpuTieBreak::kIndex;
  sched::PluginArgs args = sched::taskShapesToArgs(workload);
  args["stranding"] = 2.0;
  args["cpuPerGpuScale"] = 1.0;
  args["typePressure"] = 4.0;
  args["lpWaste"] = 30.0;
  args["patternOrder"] = 100.0;
  args["completionReserve"] = 2.0;
  p.scores = {{"PackingGradient", 1, std::move(args)}};
  return p;
}

Result<FgdTrace> makeFgdTrace(std::string name, std::vector<model::NodeSpec> nodes,
                              std::vector<TracePod> pods, const model::GpuCatalog& catalog) {
  FgdTrace t;
  t.name = std::move(name);
  t.nodes = std::move(nodes);
  t.pods = std::move(pods);
  if (t.nodes.empty()) return fail(Error::invalid("trace " + t.name + ": no nodes"));
  if (t.pods.empty()) return fail(Error::invalid("trace " + t.name + ": no pods"));
  t.capacityMilli = gpuCapacityMilli(t.nodes);
  for (const auto& n : t.nodes) t.gpuCount += static_cast<std::int64_t>(n.gpus.size());
  if (t.gpuCount == 0) return fail(Error::invalid("trace " + t.name + ": no GPUs"));
  t.typical = typicalPods(t.pods);
  t.workload = typicalPods(t.pods, 100.0);
  for (auto* w : {&t.typical, &t.workload}) {
    if (auto ok = sched::resolveTaskShapes(catalog, w->shapes); !ok) {
      return fail(Error::invalid("trace " + t.name + ": " + ok.error().message));
    }
  }
  return t;
}

namespace {

// One submitted pod as the LP bound sees it: `copies` GPUs × `milli` when it shares GPUs.
struct SharingEvent {
  std::int32_t milli = 0;  // 0: not a sharing pod
  std::int32_t copies = 0;
  bool placed = false;
};

// The mean over bucket 100's samples of the waste packingLowerBound proves for the sharing
// pods placed (and arrived) up to each sample, in % of the GPUs. Consecutive samples with the
// same multiset reuse the last bound.
Result<void> computeBounds(const FgdTrace& trace, const std::vector<SharingEvent>& events,
                           RunResult& out) {
  const std::vector<std::size_t> members = bucketMembers(out.samples, trace.gpuCount, 100);
  if (members.empty()) return {};
  std::map<std::int32_t, std::int64_t> placed, arrived;
  bool placedDirty = true, arrivedDirty = true;
  double placedWaste = 0, arrivedWaste = 0, placedSum = 0, arrivedSum = 0;
  const double perPct = static_cast<double>(trace.gpuCount) * 10;  // milli per 1 %
  std::size_t next = 0;
  for (std::size_t i = 0; i < events.size() && next < members.size(); ++i) {
    const SharingEvent& e = events[i];
    if (e.milli > 0) {
      arrived[e.milli] += e.copies;
      arrivedDirty = true;
      if (e.placed) {
        placed[e.milli] += e.copies;
        placedDirty = true;
      }
    }
    if (i != members[next]) continue;
    ++next;
    for (auto [counts, dirty, waste] : {std::tuple{&placed, &placedDirty, &placedWaste},
                                        std::tuple{&arrived, &arrivedDirty, &arrivedWaste}}) {
      if (!*dirty) continue;
      auto bound = sched::packingLowerBound(*counts);
      if (!bound) return fail(bound.error());
      *waste = static_cast<double>(bound->waste()) / perPct;
      *dirty = false;
    }
    placedSum += placedWaste;
    arrivedSum += arrivedWaste;
  }
  const auto n = static_cast<double>(members.size());
  out.boundAt100 = placedSum / n;
  out.placeAllBoundAt100 = arrivedSum / n;
  return {};
}

}  // namespace

std::optional<double> RunResult::unallocatedAt100() const {
  const auto& v = curve.allocPct[100];
  if (!v) return std::nullopt;
  return 100.0 - *v;
}

Result<RunResult> runFgd(const FgdTrace& trace, const model::GpuCatalog& catalog,
                         const RunSpec& spec, const std::function<void(int)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  // FGD scores against its target workload; Tessera looks at every shape of the pod list.
  auto profile =
      spec.policy == "tessera"
          ? Result<sched::Profile>(tesseraProfile(trace.workload.shapes))
          : policyProfile(spec.policy, trace.typical.shapes, static_cast<std::uint64_t>(spec.seed));
  if (!profile) return fail(profile.error());
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  sched::registerArtifactPlugins(registry);
  auto plugins = sched::buildPlugins(*profile, registry);
  if (!plugins) return fail(plugins.error());

  if (spec.plan.ranks.size() != trace.nodes.size()) {
    return fail(Error::internal("run " + spec.policy + "/" + std::to_string(spec.seed) +
                                ": ranks for " + std::to_string(spec.plan.ranks.size()) +
                                " nodes, the trace has " + std::to_string(trace.nodes.size())));
  }
  // The clock stands still: no reservation lapses during the run (there is no time).
  ManualClock clock;
  sched::ClusterState state(catalog, clock, profile->options);
  for (std::size_t i = 0; i < trace.nodes.size(); ++i) {
    model::NodeSpec node = trace.nodes[i];
    node.rank = spec.plan.ranks[i];
    if (auto ok = state.apply(sched::NodeAdded{std::move(node)}); !ok) {
      return fail(Error::invalid("trace " + trace.name + ": " + ok.error().message));
    }
  }
  sched::PlacementEngine engine(std::move(*plugins), profile->options);

  // Per-node FGD fragment, recomputed only for the node a pod lands on.
  const std::span<const sched::TaskShape> shapes = trace.typical.shapes;
  std::vector<std::int32_t> freeMilli;
  auto nodeFragment = [&](sched::NodeId id) {
    const sched::NodeRecord& n = state.node(id);
    if (n.gpuIds.empty()) return 0.0;
    freeMilli.clear();
    for (sched::GpuId g : n.gpuIds) freeMilli.push_back(state.gpu(g).freeComputeMilli());
    return sched::fgdNodeFragmentMilli(n.freeCpuMilli(), freeMilli, nodeGpuType(state, id), shapes);
  };
  std::vector<double> fragment(state.nodes().size());
  for (std::size_t i = 0; i < fragment.size(); ++i) {
    fragment[i] = nodeFragment(static_cast<sched::NodeId>(i));
  }

  double clusterFragment = 0;
  for (double f : fragment) clusterFragment += f;

  RunResult out;
  out.policy = spec.policy;
  out.seed = spec.seed;
  out.samples.reserve(spec.plan.order.size());
  std::vector<int> copies(trace.pods.size(), 0);
  int copiesMade = 0;
  std::int64_t arrived = 0;
  std::int64_t allocated = 0;
  model::PlacementRequest req;
  req.model.name = "trace-pod";
  req.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kShared);
  sched::DecideOptions opts;
  opts.explain = false;
  opts.explainFailures = false;
  int sinceReport = 0;
  std::vector<SharingEvent> sharing;
  if (spec.bound) sharing.reserve(spec.plan.order.size());
  for (int index : spec.plan.order) {
    if (index < 0 || static_cast<std::size_t>(index) >= trace.pods.size()) {
      return fail(Error::invalid("arrival order names pod row " + std::to_string(index) +
                                 ", the trace has " + std::to_string(trace.pods.size())));
    }
    const TracePod& pod = trace.pods[static_cast<std::size_t>(index)];
    // A pod seen before is a resampled copy; the artifact names it <name>-tuned-<i>.
    req.replicaId = copies[static_cast<std::size_t>(index)]++ == 0
                        ? pod.name
                        : pod.name + "-tuned-" + std::to_string(copiesMade++);
    req.model.cpuMilli = pod.cpuMilli;
    req.model.hostMemoryMib = pod.memoryMib;
    req.model.gpusPerReplica = pod.gpus;
    req.model.computeMilli = pod.gpuMilli;
    req.gpuTypes = pod.gpuTypes;
    arrived += pod.totalGpuMilli();
    const sched::Decision d = engine.place(state, req, opts);
    if (spec.bound) {
      const bool shares = pod.gpus > 0 && pod.gpuMilli > 0 && pod.gpuMilli < 1000;
      sharing.push_back({shares ? pod.gpuMilli : 0, shares ? pod.gpus : 0,
                         d.placement.has_value()});
    }
    if (d.placement) {
      allocated += pod.totalGpuMilli();
      double& slot = fragment[static_cast<std::size_t>(d.placement->node)];
      const double updated = nodeFragment(d.placement->node);
      clusterFragment += updated - slot;
      slot = updated;
      ++out.placed;
    } else {
      if (d.summary.starts_with("the cluster state refused") ||
          d.summary.starts_with("invalid request")) {
        return fail(Error::internal("pod " + req.replicaId + ": " + d.summary));
      }
      ++out.failed;
    }
    // Resum now and then so that rounding in the running total cannot build up.
    if (out.samples.size() % 1024 == 1023) {
      clusterFragment = 0;
      for (double f : fragment) clusterFragment += f;
    }
    const double frag = clusterFragment;
    const auto idle = static_cast<double>(trace.capacityMilli - allocated);
    out.samples.push_back({arrived, allocated, frag, idle > 0 ? 100 * frag / idle : 0.0});
    if (progress && ++sinceReport == 256) {
      progress(sinceReport);
      sinceReport = 0;
    }
  }
  if (progress && sinceReport > 0) progress(sinceReport);
  out.pods = static_cast<int>(out.samples.size());
  out.curve = bucketize(out.samples, trace.gpuCount);
  if (spec.bound) {
    if (auto ok = computeBounds(trace, sharing, out); !ok) {
      return fail(Error::internal("run " + spec.policy + "/" + std::to_string(spec.seed) +
                                  ": packing bound: " + ok.error().message));
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace tessera::sim
