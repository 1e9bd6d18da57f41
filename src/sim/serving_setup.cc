#include <algorithm>
#include <cmath>

#include "sim/serving_run.h"
#include "sim/serving_stats.h"

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

std::optional<scale::ShareRule> shareRuleFor(std::string_view policy, const ReplicaPerf& whole,
                                             const ServingOptions& o) {
  if (policy != "tessera" || o.replicaShare > 0) return std::nullopt;
  scale::ShareRule rule;
  rule.sloTtftMs = o.sloTtftMs;
  rule.sloTarget = o.sloTarget;
  // The smallest step the weights fit on with a KV cache; none below a whole GPU: whole.
  rule.minShareMilli = 1000;
  for (std::int32_t m = rule.stepMilli; m < 1000; m += rule.stepMilli) {
    const auto p = sharePerf(whole, o.model, m / 1000.0);
    if (p && p->kvCapacityTokens >= o.minReplicaKvTokens) {
      rule.minShareMilli = m;
      break;
    }
  }
  // A share here caps the engine's memory too (sharePerf): its KV cache shrinks with it.
  const double wholeKv = static_cast<double>(std::max<std::int64_t>(1, whole.kvCapacityTokens));
  rule.kvScale = [whole, model = o.model, wholeKv](std::int32_t milli) {
    if (milli >= 1000) return 1.0;
    const auto p = sharePerf(whole, model, milli / 1000.0);
    return p ? static_cast<double>(p->kvCapacityTokens) / wholeKv : 0.0;
  };
  return rule;
}

namespace {

// What one whole-GPU replica would have measured, unloaded, over the lead-in's busiest signal
// window by prefill work (decode at the demand estimate's reference batch): the deployment's
// signals before the trace, for the share its first replicas take.
scale::DeploymentSignals leadInSignals(const ServingTrace& leadIn, Micros untilUs,
                                       const ReplicaPerf& whole, int windowSeconds,
                                       const DemandOptions& demand) {
  const Micros window = Micros{std::max(1, windowSeconds)} * kUsPerSecond;
  const auto& rs = leadIn.requests;
  std::size_t best = 0, bestEnd = 0, begin = 0;
  double work = 0, bestWork = -1;
  for (std::size_t end = 0; end < rs.size() && rs[end].arrivalUs < untilUs; ++end) {
    work += whole.prefillSeconds(rs[end].inputTokens);
    while (rs[begin].arrivalUs <= rs[end].arrivalUs - window) {
      work -= whole.prefillSeconds(rs[begin].inputTokens);
      ++begin;
    }
    if (work > bestWork) {
      bestWork = work;
      best = begin;
      bestEnd = end + 1;
    }
  }
  scale::DeploymentSignals s;
  s.nowMs = untilUs / 1000;
  scale::ReplicaSignals r;
  r.id = "lead-in";
  r.gpuFraction = 1;
  s.replicas.push_back(r);
  if (bestEnd == best) return s;
  std::vector<double> prefillsMs;
  double prefillMs = 0, serviceMs = 0, contextTokens = 0;
  for (std::size_t i = best; i < bestEnd; ++i) {
    const double p = whole.prefillSeconds(rs[i].inputTokens);
    const double out = std::max(1, rs[i].outputTokens);
    prefillsMs.push_back(1000 * p);
    prefillMs += 1000 * p;
    // A sequence waits a whole decode step per token: the step of a batch of referenceBatch.
    const double stepSec =
        demand.referenceBatch *
        decodeSecondsPerToken(whole, rs[i].inputTokens + out / 2, demand.referenceBatch);
    serviceMs += 1000 * (p + (out - 1) * stepSec);
    contextTokens += rs[i].inputTokens + out;
  }
  const auto count = static_cast<double>(prefillsMs.size());
  s.arrivalRatePerSec = count / (static_cast<double>(window) / 1e6);
  s.meanPrefillMs = prefillMs / count;
  s.prefillP99Ms = nearestRank(prefillsMs, 0.99);
  s.meanServiceMs = serviceMs / count;
  s.replicas.front().maxConcurrency = static_cast<int>(std::clamp<double>(
      static_cast<double>(whole.kvCapacityTokens) / std::max(1.0, contextTokens / count), 1,
      whole.maxNumSeqs));
  return s;
}

}  // namespace

Result<ShareChoice> chooseReplicaShare(const ServingTrace& leadIn, Micros measuredFromUs,
                                       const ReplicaPerf& whole, const ServingOptions& o,
                                       std::string_view policy) {
  ShareChoice c{1, whole};
  if (policy != "tessera") return c;
  if (o.replicaShare > 0) return fixedShare(whole, o.model, o.replicaShare);
  // Auto: the share rule every later replica is placed by (scale/reconcile.h), on what the
  // deployment measured before the trace: the lead-in's busiest window (the first interval's
  // without a lead-in), over the replicas the warm start would place on whole GPUs.
  const auto rule = shareRuleFor(policy, whole, o);
  const Micros until = std::max(measuredFromUs, Micros{o.demand.intervalSeconds} * kUsPerSecond);
  const int replicas = std::max(1, replicaDemand(leadIn, whole, o.demand).front());
  // The lead-in's signals stand in for one replica already placed: the warm start's replicas
  // come on top of it.
  const auto share = scale::chooseShare(
      leadInSignals(leadIn, until, whole, o.signalWindowSeconds, o.demand), replicas + 1, *rule);
  if (!share || share->milli >= 1000) return c;
  return fixedShare(whole, o.model, share->milli / 1000.0);
}

}  // namespace tessera::sim
