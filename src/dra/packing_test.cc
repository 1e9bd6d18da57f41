// Packing under DRA (docs/dra.md, "Packing"): the Alibaba GPU-sharing trace (FGD's benchmark,
// ../shared/data/alibaba-gpu-2023) replayed once through Tessera's engine, whose choices the
// claims pin (the claims test shows the allocator takes each of them as it is), and once as
// plain claims through kube-scheduler's way of doing it: a node by kube-scheduler's default
// scores, then the allocator's first fit in listing order (dra/testing/first_fit_allocator.h).
// Both see the same nodes, the same slices and the same arrivals (130 % of the GPU capacity,
// Tessera's own arrival plan). Skipped without ../shared. By default every third node of the
// cluster; TESSERA_DRA_PACKING_FULL=1 replays the whole cluster.
//
// The kube-scheduler model: nodes that fit the pod's CPU and memory requests and its GPU type
// (a node label in practice) and where the allocator finds the claim's devices; among them the
// highest NodeResourcesFit LeastAllocated score (free CPU and memory after the pod, each as a
// share of the node's, averaged) plus NodeResourcesBalancedAllocation's (100 minus the
// spread of the two shares used), both at their default weight 1; ties by node-list order.
// A pod's GPU share g (thousandths) is a claim of k requests, each one device with compute g
// (and 1Mi of memory: the trace's shares are compute shares).

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <gtest/gtest.h>

#include "dra/slices.h"
#include "dra/testing/first_fit_allocator.h"
#include "k8s/dra_claims.h"
#include "model/gpu_catalog.h"
#include "sim/fgd_run.h"
#include "sim/metrics.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace tessera::dra {
namespace {

using k8s::ClaimChoice;
using k8s::deviceClass;
using k8s::kDeviceClassName;
using k8s::PinnedGpu;
using k8s::pinPod;
using k8s::pinSelector;
using k8s::resourceClaim;

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kTraces = fs::path(TESSERA_SHARED_DIR) / "data" / "alibaba-gpu-2023";

struct FirstFitRun {
  std::vector<sim::PodSample> samples;
  int placed = 0, failed = 0;
};

FirstFitRun replayAsClaims(const sim::FgdTrace& trace, const sim::ArrivalPlan& plan,
                           const model::GpuCatalog& catalog) {
  testing::FirstFitAllocator allocator;
  allocator.addClass(deviceClass());
  struct NodeLoad {
    std::int64_t cpu = 0, mem = 0;
  };
  std::vector<NodeLoad> used(trace.nodes.size());
  for (const model::NodeSpec& n : trace.nodes) {
    deviceplugin::Inventory inv;
    for (std::size_t i = 0; i < n.gpus.size(); ++i) {
      deviceplugin::GpuDevice d;
      d.id = n.gpus[i].id;
      d.index = static_cast<int>(i);
      d.uuid = "GPU-" + n.name + "-" + d.id;
      d.type = n.gpus[i].type;
      const model::GpuType* t = catalog.find(d.type);
      d.memoryMib = n.gpus[i].memoryMib > 0 ? n.gpus[i].memoryMib
                                            : (t && t->memoryMib ? *t->memoryMib : 16384);
      inv.gpus.push_back(d);
    }
    SliceOptions so;
    so.nodeName = n.name;
    for (const json& s : resourceSlices(inv, so)) EXPECT_EQ(allocator.addSlice(s), "");
  }
  FirstFitRun out;
  std::int64_t arrived = 0, allocated = 0;
  // Pods leave no room behind (no departures in this experiment), so what a pod could not
  // get, a pod asking at least as much of everything (same GPU types) cannot get later
  // either: such pods are refused without searching again. Exact, and it keeps the replay fast.
  struct Refused {
    int gpus;
    std::int32_t milli;
    std::int64_t cpu, mem;
    std::vector<std::string> types;
  };
  std::vector<Refused> refused;
  std::vector<std::pair<double, std::size_t>> ranked;
  for (const int row : plan.order) {
    const sim::TracePod& pod = trace.pods[static_cast<std::size_t>(row)];
    arrived += pod.totalGpuMilli();
    const bool hopeless = std::ranges::any_of(refused, [&](const Refused& r) {
      return pod.gpus >= r.gpus && pod.gpuMilli >= r.milli && pod.cpuMilli >= r.cpu &&
             pod.memoryMib >= r.mem && pod.gpuTypes == r.types;
    });
    if (hopeless) {
      ++out.failed;
      out.samples.push_back({arrived, allocated, 0, 0});
      continue;
    }
    json requests = json::array();
    for (int k = 0; k < pod.gpus; ++k) {
      requests.push_back(
          {{"name", "gpu-" + std::to_string(k)},
           {"exactly",
            {{"deviceClassName", std::string(kDeviceClassName)},
             {"capacity",
              {{"requests", {{"compute", std::to_string(pod.gpuMilli)}, {"memory", "1Mi"}}}}}}}});
    }
    const json claim = {{"spec", {{"devices", {{"requests", requests}}}}}};
    ranked.clear();
    for (std::size_t i = 0; i < trace.nodes.size(); ++i) {
      const model::NodeSpec& n = trace.nodes[i];
      if (used[i].cpu + pod.cpuMilli > n.cpuMilli ||
          used[i].mem + pod.memoryMib > n.hostMemoryMib) {
        continue;
      }
      if (pod.gpus > static_cast<int>(n.gpus.size())) continue;
      if (pod.gpus > 0 && !pod.gpuTypes.empty() &&
          std::ranges::find(pod.gpuTypes, n.gpus.front().type) == pod.gpuTypes.end()) {
        continue;
      }
      const double c =
          static_cast<double>(used[i].cpu + pod.cpuMilli) / std::max<std::int64_t>(1, n.cpuMilli);
      const double m = static_cast<double>(used[i].mem + pod.memoryMib) /
                       std::max<std::int64_t>(1, n.hostMemoryMib);
      const double least = ((1 - c) + (1 - m)) / 2 * 100;
      const double balanced = 100 - std::abs(c - m) / 2 * 100;
      ranked.emplace_back(-(least + balanced), i);
    }
    std::ranges::stable_sort(ranked, {}, &std::pair<double, std::size_t>::first);
    bool placed = false;
    for (const auto& [_, i] : ranked) {
      if (pod.gpus > 0 && !allocator.allocate(claim, trace.nodes[i].name).ok) continue;
      used[i].cpu += pod.cpuMilli;
      used[i].mem += pod.memoryMib;
      placed = true;
      break;
    }
    if (placed) {
      ++out.placed;
      allocated += pod.totalGpuMilli();
    } else {
      ++out.failed;
      refused.push_back({pod.gpus, pod.gpuMilli, pod.cpuMilli, pod.memoryMib, pod.gpuTypes});
    }
    out.samples.push_back({arrived, allocated, 0, 0});
  }
  return out;
}

TEST(DraPacking, KubeSchedulersFirstFitLeavesMoreOfTheAlibabaTraceUnallocatedThanTessera) {
  const fs::path nodesFile = kTraces / "openb_node_list_gpu_node.csv";
  const fs::path podsFile = kTraces / "openb_pod_list_gpushare40.csv";
  if (!fs::exists(nodesFile) || !fs::exists(podsFile)) {
    GTEST_SKIP() << "needs " << kTraces.string()
                 << " (the Alibaba GPU trace in ../shared/data; a fresh clone has none)";
  }
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto nodes = sim::readNodeList(nodesFile.string(), catalog);
  ASSERT_TRUE(nodes) << nodes.error().message;
  auto pods = sim::readPodList(podsFile.string(), catalog);
  ASSERT_TRUE(pods) << pods.error().message;
  // Every third node of the cluster (405 nodes, 2107 GPUs), so that the replay stays short in
  // the sanitizer build; the arrivals are tuned to this capacity below.
  // TESSERA_DRA_PACKING_FULL=1 takes the whole cluster (1213 nodes; about 5 s in Release).
  const char* full = std::getenv("TESSERA_DRA_PACKING_FULL");
  const std::size_t step = full != nullptr && std::string(full) == "1" ? 1 : 3;
  std::vector<model::NodeSpec> some;
  for (std::size_t i = 0; i < nodes->size(); i += step) some.push_back((*nodes)[i]);
  auto trace = sim::makeFgdTrace("gpushare40", std::move(some), *pods, catalog);
  ASSERT_TRUE(trace) << trace.error().message;
  const sim::ArrivalPlan plan = sim::ownArrivalPlan(trace->pods, trace->nodes, 1.3, 42);

  sim::RunSpec spec;
  spec.policy = "tessera";
  spec.plan = plan;
  auto tessera = sim::runFgd(*trace, catalog, spec);
  ASSERT_TRUE(tessera) << tessera.error().message;
  const FirstFitRun firstFit = replayAsClaims(*trace, plan, catalog);
  const sim::Curve curve = sim::bucketize(firstFit.samples, trace->gpuCount);
  ASSERT_TRUE(curve.allocPct[100].has_value());
  const double firstFitUnallocated = 100 - *curve.allocPct[100];
  ASSERT_TRUE(tessera->unallocatedAt100().has_value());
  const double tesseraUnallocated = *tessera->unallocatedAt100();
  std::cout << "gpushare40 on " << trace->nodes.size() << " nodes, " << plan.order.size() << " pods arriving at 130 % of "
            << trace->gpuCount << " GPUs: unallocated GPU capacity once 100 % has arrived: "
            << "Tessera " << tesseraUnallocated << " % (" << tessera->placed << " placed, "
            << tessera->failed << " refused), kube-scheduler first fit " << firstFitUnallocated
            << " % (" << firstFit.placed << " placed, " << firstFit.failed << " refused)\n";
  EXPECT_LT(tesseraUnallocated, firstFitUnallocated);
  EXPECT_EQ(firstFit.placed + firstFit.failed, static_cast<int>(plan.order.size()));
}

}  // namespace
}  // namespace tessera::dra
