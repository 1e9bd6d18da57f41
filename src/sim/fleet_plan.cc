#include "sim/fleet_plan.h"

#include <algorithm>

namespace tessera::sim {

FleetSpec withFleet(const FleetSpec& spec, const std::string& gpuType, int gpus, int gpusPerNode) {
  FleetSpec s = spec;
  s.nodes.clear();
  const int perNode = std::max(1, gpusPerNode);
  loop::NodeGroup full;
  full.namePrefix = "plan";
  full.gpuType = gpuType;
  full.nodes = gpus / perNode;
  full.gpusPerNode = perNode;
  if (full.nodes > 0) s.nodes.push_back(full);
  if (gpus % perNode != 0) {
    loop::NodeGroup rest = full;
    rest.namePrefix = "plan-rest";
    rest.nodes = 1;
    rest.gpusPerNode = gpus % perNode;
    s.nodes.push_back(rest);
  }
  for (FleetDeployment& d : s.deployments) d.gpuType = gpuType;
  return s;
}

bool meetsEverySlo(const FleetPolicyResult& r, double sloTarget) {
  return std::all_of(
      r.deployments.begin(), r.deployments.end(),
      [&](const FleetDeploymentResult& d) { return d.run.sloAttainment >= sloTarget; });
}

namespace {

// Why a type cannot serve the deployments at all (a model with no room for a KV cache on one
// card), or empty.
std::string unfit(const FleetSpec& spec, const model::GpuCatalog& catalog,
                  const std::string& type) {
  const model::GpuType* t = catalog.find(type);
  if (t == nullptr) return "unknown GPU type";
  for (const FleetDeployment& d : spec.deployments) {
    for (const ServingModel& m : spec.models) {
      if (m.name != d.model) continue;
      const auto perf = replicaPerf(m, *t);
      if (!perf) return "deployment " + d.name + ": " + m.name + " does not fit on one " + type;
      if (perf->kvCapacityTokens < d.maxContextTokens) {
        return "deployment " + d.name + ": one " + type + " holds " +
               std::to_string(perf->kvCapacityTokens) + " tokens of " + m.name +
               "'s KV cache, fewer than its maxContextTokens " + std::to_string(d.maxContextTokens);
      }
    }
  }
  return "";
}

}  // namespace

Result<Plan> plan(const FleetSpec& spec, const model::GpuCatalog& catalog, const PlanOptions& o) {
  if (!isFleetPolicyName(o.policy)) {
    return fail(Error::invalid("unknown fleet policy '" + o.policy + "'"));
  }
  if (o.gpuTypes.empty()) return fail(Error::invalid("no GPU types to plan with"));
  if (o.maxGpus < 1) return fail(Error::invalid("the largest fleet must have at least one GPU"));
  Plan out;
  out.policy = o.policy;
  FleetRunOptions ro;
  ro.sloTarget = o.sloTarget;
  for (const std::string& type : o.gpuTypes) {
    PlanOption opt;
    opt.gpuType = type;
    const auto price = spec.pricePerGpuHour.find(type);
    opt.pricePerGpuHour =
        price != spec.pricePerGpuHour.end() ? price->second : defaultGpuPrice(type);
    if (std::string why = unfit(spec, catalog, type); !why.empty()) {
      opt.why = why;
      out.options.push_back(std::move(opt));
      continue;
    }
    auto replay = [&](int gpus) -> Result<FleetPolicyResult> {
      ++opt.runs;
      return runFleet(withFleet(spec, type, gpus, o.gpusPerNode), catalog, o.policy, ro);
    };
    // Double until it meets, then bisect (lo fails, hi meets).
    int lo = 0, hi = 1;
    std::optional<FleetPolicyResult> atHi;
    std::string hopeless;
    for (;;) {
      auto r = replay(hi);
      if (!r) return fail(Error{r.error().code, type + ": " + r.error().message});
      // Requests no replica can ever run (longer than maxContextTokens or the KV cache) miss
      // at any size: more of them than the target leaves, and no fleet will do.
      for (const FleetDeploymentResult& d : r->deployments) {
        if (d.run.requests > 0 &&
            d.run.rejected > (1 - o.sloTarget) * static_cast<double>(d.run.requests)) {
          hopeless = "deployment " + d.name + ": " + std::to_string(d.run.rejected) + " of " +
                     std::to_string(d.run.requests) +
                     " requests can never run (longer than its maxContextTokens or the KV cache)";
          break;
        }
      }
      if (!hopeless.empty()) break;
      if (meetsEverySlo(*r, o.sloTarget)) {
        atHi = std::move(*r);
        break;
      }
      lo = hi;
      if (hi >= o.maxGpus) break;
      hi = std::min(o.maxGpus, hi * 2);
    }
    if (!atHi) {
      opt.why = !hopeless.empty()
                    ? hopeless
                    : "even " + std::to_string(o.maxGpus) + " GPUs do not meet every SLO";
      out.options.push_back(std::move(opt));
      continue;
    }
    std::optional<FleetPolicyResult> atLo;
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      auto r = replay(mid);
      if (!r) return fail(Error{r.error().code, type + ": " + r.error().message});
      if (meetsEverySlo(*r, o.sloTarget)) {
        hi = mid;
        atHi = std::move(*r);
      } else {
        lo = mid;
        atLo = std::move(*r);
      }
    }
    if (lo > 0 && !atLo) {
      auto r = replay(lo);
      if (!r) return fail(Error{r.error().code, type + ": " + r.error().message});
      atLo = std::move(*r);
    }
    opt.feasible = true;
    opt.gpus = hi;
    opt.costPerHour = hi * opt.pricePerGpuHour;
    opt.atCount = std::move(*atHi);
    if (atLo) {
      opt.attainmentOneFewer = atLo->sloAttainment;
      const FleetDeploymentResult* worst = nullptr;
      for (const FleetDeploymentResult& d : atLo->deployments) {
        if (worst == nullptr || d.run.sloAttainment < worst->run.sloAttainment) worst = &d;
      }
      if (worst != nullptr) {
        opt.bindingDeployment = worst->name;
        opt.bindingAttainment = worst->run.sloAttainment;
      }
    }
    out.options.push_back(std::move(opt));
  }
  for (std::size_t i = 0; i < out.options.size(); ++i) {
    const PlanOption& p = out.options[i];
    if (!p.feasible) continue;
    if (!out.best || p.costPerHour < out.options[*out.best].costPerHour) out.best = i;
  }
  return out;
}

}  // namespace tessera::sim
