#include <algorithm>
#include <cmath>

#include "sim/serving_run.h"

// The set-up of a serving run, apart from the run itself (serving_run.cc): policy names, the
// replica's performance, the controllers, the lead-in, the model error and the GPU share rule.

namespace tessera::sim {
namespace {

constexpr Micros kUsPerSecond = 1'000'000;

}  // namespace

bool isServingPolicyName(std::string_view name) {
  return std::find(kServingPolicyNames.begin(), kServingPolicyNames.end(), name) !=
         kServingPolicyNames.end();
}

Result<ReplicaPerf> servingPerf(const model::GpuCatalog& catalog, const ServingOptions& o) {
  const model::GpuType* type = catalog.find(o.fleet.gpuType);
  if (type == nullptr) {
    std::string known;
    for (const auto& n : catalog.names()) known += (known.empty() ? "" : ", ") + n;
    return fail(
        Error::invalid("unknown GPU type '" + o.fleet.gpuType + "' (known: " + known + ")"));
  }
  return replicaPerf(o.model, *type);
}

int replicaCapacity(const ServingFleet& fleet, double share) {
  const int perGpu = share < 1 ? static_cast<int>(std::floor(1 / share + 1e-9)) : 1;
  return fleet.nodes * fleet.gpusPerNode * std::max(1, perGpu);
}

Result<std::unique_ptr<ServingController>> makeServingController(std::string_view policy,
                                                                 const ServingTrace& trace,
                                                                 const ReplicaPerf& perf,
                                                                 const ServingOptions& o,
                                                                 double share) {
  const int fleetGpus = replicaCapacity(o.fleet, share);
  if (policy == "static-peak") {
    return makeStaticPeak(replicaDemand(trace, perf, o.demand), fleetGpus);
  }
  if (policy == "clairvoyant") {
    return fail(Error::invalid(
        "clairvoyant is a reference searched with the simulator in the loop, not a controller: "
        "run it with runServing"));
  }
  if (isServingPolicyName(policy)) {
    auto config = autoscalerConfigFor(policy);
    if (!config) return fail(config.error());
    // The fleet is the limit, as it is the clairvoyant's: a deployment may grow to all of it.
    config->maxReplicas = fleetGpus;
    if (policy == "tessera") {
      // The deployment's SLO is something tessera is told, as a ModelDeployment states it.
      TESSERA_RETURN_IF_ERROR(overrideSetting(*config, "sloTtftMs", o.sloTtftMs));
      TESSERA_RETURN_IF_ERROR(overrideSetting(*config, "sloTarget", o.sloTarget));
    }
    for (const auto& s : o.policySettings) {
      if (s.policy != policy) continue;
      if (auto ok = overrideSetting(*config, s.key, s.value); !ok) {
        return fail(
            Error::invalid("--policy-arg " + s.policy + "." + s.key + ": " + ok.error().message));
      }
    }
    if (config->warmReplicas > 0) {
      return fail(Error::invalid("policy " + std::string(policy) +
                                 ": the serving simulation does not model a warm pool "
                                 "(warmReplicas must be 0)"));
    }
    const int initial = o.warmStart ? replicaDemand(trace, perf, o.demand).front() : 1;
    return makeAutoscaled(*config, initial);
  }
  std::string known;
  for (auto n : kServingPolicyNames) known += (known.empty() ? "" : ", ") + std::string(n);
  return fail(
      Error::invalid("unknown policy '" + std::string(policy) + "' (known: " + known + ")"));
}

ReplicaPerf withError(const ReplicaPerf& p, const ModelError& e) {
  ReplicaPerf out = p;
  out.flopsPerSec *= e.prefillSpeed;
  out.bytesPerSec *= e.decodeSpeed;
  return out;
}

LoadTimes withError(const LoadTimes& l, const ModelError& e) {
  LoadTimes out = l;
  out.engineStartupSeconds *= e.coldStart;
  out.hostMemoryGBps /= e.coldStart;
  out.localDiskGBps /= e.coldStart;
  out.remoteGBps /= e.coldStart;
  return out;
}

Micros leadInUs(const ServingTrace& t, int warmupSeconds) {
  // At most a third of the trace, so that the lead-in stays a prefix of it.
  return std::min(Micros{std::max(0, warmupSeconds)} * kUsPerSecond, t.spanUs() / 3);
}

ServingTrace withLeadIn(const ServingTrace& t, int warmupSeconds) {
  const Micros from = leadInUs(t, warmupSeconds);
  ServingTrace w;
  w.name = t.name;
  for (const ServingRequest& r : t.requests) {
    if (r.arrivalUs < from) w.requests.push_back(r);
  }
  w.requests.reserve(w.requests.size() + t.requests.size());
  for (ServingRequest r : t.requests) {
    r.arrivalUs += from;
    w.requests.push_back(std::move(r));
  }
  return w;
}

Result<ShareChoice> fixedShare(const ReplicaPerf& whole, const ServingModel& model, double share) {
  if (share >= 1) return ShareChoice{1, whole};
  auto p = sharePerf(whole, model, share);
  if (!p) return fail(p.error());
  return ShareChoice{share, *p};
}

Result<ShareChoice> chooseReplicaShare(const ServingTrace& leadIn, Micros measuredFromUs,
                                       const ReplicaPerf& whole, const ServingOptions& o,
                                       std::string_view policy) {
  ShareChoice c{1, whole};
  if (policy != "tessera") return c;
  if (o.replicaShare > 0) return fixedShare(whole, o.model, o.replicaShare);
  // Auto: the lead-in's peak prefill demand (the first interval's without a lead-in), in whole
  // GPUs at tessera's prefill target utilisation (its recommender's prefillTargetUtilization).
  const Micros until = std::max(measuredFromUs, Micros{o.demand.intervalSeconds} * kUsPerSecond);
  DemandOptions d = o.demand;
  d.targetUtilization = o.sharePrefillTargetUtilization;
  const double demand = peakPrefillDemand(leadIn, whole, d, until);
  // A share stretches every prefill by 1 / share: it must leave a prompt at least half of its
  // TTFT target for queueing. The lead-in's largest ratio of unloaded prefill to target (the
  // SLO rule of the run) sets the smallest share that does.
  double prefillShare = 0;
  for (const ServingRequest& r : leadIn.requests) {
    if (r.arrivalUs >= until) break;
    const double p = whole.prefillSeconds(r.inputTokens);
    const double target = std::max(o.sloTtftMs / 1000, o.sloPrefillFactor * p);
    prefillShare = std::max(prefillShare, 2 * p / target);
  }
  for (double share : kReplicaShares) {
    if (share >= 1 || share + 1e-9 < demand || share + 1e-9 < prefillShare) continue;
    if (auto p = sharePerf(whole, o.model, share)) return ShareChoice{share, *p};
  }
  return c;
}

}  // namespace tessera::sim
