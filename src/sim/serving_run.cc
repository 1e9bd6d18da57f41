#include "sim/serving_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "sim/serving_loop.h"
#include "sim/serving_reference.h"

namespace tessera::sim {
namespace {

// The nodes of a single-deployment run.
loop::NodeGroup clusterOf(const ServingFleet& fleet, const std::string& modelName) {
  loop::NodeGroup g;
  g.gpuType = fleet.gpuType;
  g.nodes = fleet.nodes;
  g.gpusPerNode = fleet.gpusPerNode;
  g.cpuMilliPerNode = fleet.cpuMilliPerNode;
  g.hostMemoryMibPerNode = fleet.hostMemoryMibPerNode;
  if (fleet.modelCachedOnDisk) g.cachedModels.push_back(modelName);
  return g;
}

// The trace behind a lead-in: its first warmupSeconds replayed once, then the whole trace.
struct WarmedTrace {
  ServingTrace trace;
  std::size_t firstCounted = 0;
  Micros measuredFromUs = 0;
};

WarmedTrace withWarmup(const ServingTrace& t, int warmupSeconds) {
  WarmedTrace w;
  w.measuredFromUs = leadInUs(t, warmupSeconds);
  w.trace = withLeadIn(t, warmupSeconds);
  w.firstCounted = w.trace.requests.size() - t.requests.size();
  return w;
}

// The run itself sees the world as it is (ServingOptions::actual): the controller was built
// from the model, the replicas run at the actual speeds and load at the actual cold starts.
Result<ServingPolicyResult> runWarmed(const WarmedTrace& w, const model::GpuCatalog& catalog,
                                      const ServingOptions& options, const ReplicaPerf& perf,
                                      const ReplicaPerf& replicaPerf, double share,
                                      std::optional<scale::ShareRule> shareRule,
                                      std::string policyName, ServingController& controller) {
  if (w.firstCounted == w.trace.requests.size()) {
    return fail(Error::invalid("trace " + w.trace.name + ": no requests"));
  }
  ServingOptions actual = options;
  actual.load = withError(options.load, options.actual);
  const Micros measuredFrom = w.measuredFromUs;
  loop::ClusterOptions cluster;
  cluster.groups = {clusterOf(options.fleet, options.model.name)};
  cluster.measuredFromUs = measuredFrom;
  loop::DeploymentSetup d;
  d.name = std::move(policyName);
  d.deploymentKey = "serving";
  d.trace = &w.trace;
  d.firstCounted = w.firstCounted;
  d.measuredFromUs = measuredFrom;
  d.options = std::move(actual);
  d.perf = withError(perf, options.actual);
  d.replicaPerf = withError(replicaPerf, options.actual);
  d.share = share;
  d.shareRule = std::move(shareRule);
  d.controller = &controller;
  d.replicaLimit = replicaCapacity(options.fleet, share);
  const auto started = std::chrono::steady_clock::now();
  std::vector<loop::DeploymentSetup> one;
  one.push_back(std::move(d));
  auto r = loop::runLoop(catalog, cluster, std::move(one));
  if (!r) return fail(r.error());
  ServingPolicyResult result = std::move(r->deployments.front());
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace

Result<ServingPolicyResult> runServingOnShare(const ServingTrace& trace,
                                              const model::GpuCatalog& catalog,
                                              const ServingOptions& options, double share,
                                              std::string policyName,
                                              ServingController& controller) {
  auto perf = servingPerf(catalog, options);
  if (!perf) return fail(perf.error());
  auto c = fixedShare(*perf, options.model, share);
  if (!c) return fail(c.error());
  return runWarmed(withWarmup(trace, options.warmupSeconds), catalog, options, *perf, c->perf,
                   c->share, std::nullopt, std::move(policyName), controller);
}

Result<ServingPolicyResult> runServingWith(const ServingTrace& trace,
                                           const model::GpuCatalog& catalog,
                                           const ServingOptions& options, std::string policyName,
                                           ServingController& controller) {
  const double share = options.replicaShare > 0 ? options.replicaShare : 1;  // auto: whole
  return runServingOnShare(trace, catalog, options, share, std::move(policyName), controller);
}

Result<ServingPolicyResult> runServing(const ServingTrace& trace, const model::GpuCatalog& catalog,
                                       const ServingOptions& options, std::string_view policy) {
  auto perf = servingPerf(catalog, options);
  if (!perf) return fail(perf.error());
  if (policy == "clairvoyant") {
    return runClairvoyant(trace, catalog, options,
                          ClairvoyantOptions{options.sloTarget, options.clairvoyantMaxRuns});
  }
  const WarmedTrace warmed = withWarmup(trace, options.warmupSeconds);
  auto share = chooseReplicaShare(warmed.trace, warmed.measuredFromUs, *perf, options, policy);
  if (!share) return fail(share.error());
  // The warm start sizes in replicas of the chosen share.
  auto controller = makeServingController(policy, warmed.trace, share->perf, options, share->share);
  if (!controller) return fail(controller.error());
  auto r = runWarmed(warmed, catalog, options, *perf, share->perf, share->share,
                     shareRuleFor(policy, *perf, options), std::string(policy), **controller);
  if (r && r->minReplicaShare < 1) {
    char detail[96];
    if (r->maxReplicaShare - r->minReplicaShare < 1e-9) {
      std::snprintf(detail, sizeof detail, "replicas on %.2f GPU shares", r->minReplicaShare);
    } else {
      std::snprintf(detail, sizeof detail, "replicas on %.2f to %.2f GPU shares (%.2f on average)",
                    r->minReplicaShare, r->maxReplicaShare, r->replicaShare);
    }
    r->detail = detail;
  }
  return r;
}

}  // namespace tessera::sim
