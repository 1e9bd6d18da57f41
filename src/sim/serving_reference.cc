#include "sim/serving_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <unordered_set>

namespace tessera::sim {
namespace {

constexpr double kSlotSeconds = 60;  // the bound's accounting slots

// Prefill FLOPs of a prompt of `tokens`, `cached` of them already in a prefix cache.
double prefillFlops(const ReplicaPerf& p, double tokens, double cached) {
  return (tokens - cached) * p.flopsPerToken +
         p.attentionFlopsPerPair * (tokens * tokens - cached * cached) / 2;
}

}  // namespace

// The bound, step by step (all times in the measured window, seconds; F = a whole GPU's
// effective FLOP/s; a replica on share f computes at f x F and costs f per second, so work
// costs the same GPU-seconds on any share):
//
//  1. Request i (arrival a, prompt L) is met only if its first token comes by a + d (d: its
//     SLO). Its prefill needs at least p = prefill FLOPs / F GPU-seconds, computed inside
//     [a, a + d] (an iteration lasts at least its FLOPs / F, batched or not). With prefix
//     caching, the FLOPs are those of the prompt's blocks no earlier request carried (the most
//     any cache can skip).
//  2. The replica that serves it starts its prefill at some s in [a, a + d - p], so it exists
//     through s + p >= a + p, and was placed at least C (the fastest cold start: engine start-up
//     plus weights from host memory) before s, or before the window began. Whatever s is, it
//     exists over E = [max(0, a + d - p - C), a + p], and costs at least fmin per second there
//     (fmin: the smallest share the weights and overhead fit on).
//  3. Per 60-s slot, GPU-seconds >= max(fmin x (time some E covers), work of the requests whose
//     [a, a + d] lies in the slot). Summing the slots gives the bound with every request met.
//  4. A policy may miss M = floor(N (1 - target)) requests, less those no replica can ever run.
//     Dropping them lowers step 3's sum by at most (their work) + fmin x (time they alone
//     cover). Work: the M largest p. Coverage: a 1-s tick stops being covered only when all k
//     requests whose E contain it are dropped; two ticks at least r = ceil(max |E|) + 1 apart
//     share no request, so dropping M requests uncovers a set U of ticks with sum of k over U
//     <= r x M. The most ticks that allows: the ticks with the smallest k first.
//  5. bound = max(0, step 3 - the two reductions of step 4).
ServingLowerBound servingLowerBound(const ServingTrace& trace, const ReplicaPerf& model,
                                    const ServingOptions& o, double target) {
  const ReplicaPerf whole = withError(model, o.actual);  // the bound knows the truth
  ServingLowerBound b;
  b.requests = static_cast<int>(trace.requests.size());
  const double horizon = static_cast<double>(trace.spanUs()) / 1e6 + o.tailSeconds;
  b.minShare = static_cast<double>(o.model.weightsMib + o.model.overheadMib) /
               static_cast<double>(std::max<std::int64_t>(1, whole.memoryMib));
  b.minColdStartS = withError(o.load, o.actual).seconds(CacheTier::kHostMemory, whole.weightsBytes);
  const double c = b.minColdStartS;

  struct Need {
    double arrival, deadline, work;
  };
  std::vector<Need> needs;
  needs.reserve(trace.requests.size());
  std::unordered_set<std::uint32_t> seenBlocks;
  for (const ServingRequest& r : trace.requests) {
    const std::int64_t context =
        static_cast<std::int64_t>(r.inputTokens) + std::max(1, r.outputTokens);
    if (context > o.maxContextTokens || context > whole.kvCapacityTokens) {
      ++b.neverServable;
      continue;
    }
    double cached = 0;
    if (o.prefixCache) {
      std::size_t lead = 0;
      while (lead < r.blockHashes.size() && seenBlocks.contains(r.blockHashes[lead])) ++lead;
      cached = std::min<double>(static_cast<double>(lead) * kMooncakeBlockTokens,
                                std::max(0, r.inputTokens - 1));
      seenBlocks.insert(r.blockHashes.begin(), r.blockHashes.end());
    }
    const double a = static_cast<double>(r.arrivalUs) / 1e6;
    const double d =
        std::max(o.sloTtftMs / 1000, o.sloPrefillFactor * whole.prefillSeconds(r.inputTokens));
    needs.push_back({a, std::min(horizon, a + d),
                     prefillFlops(whole, r.inputTokens, cached) / whole.flopsPerSec});
  }
  b.allowedMisses =
      static_cast<int>(std::floor(b.requests * (1 - target) + 1e-9)) - b.neverServable;
  if (b.allowedMisses < 0) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "%d of %d requests can never run (context beyond the model's window or a whole "
                  "GPU's KV cache): more than the %.2f %% target allows",
                  b.neverServable, b.requests, 100 * (1 - target));
    b.reason = why;
    return b;
  }

  const auto ticks = static_cast<std::size_t>(std::ceil(horizon));
  std::vector<int> cover(ticks + 1, 0);  // difference array, then per-tick counts
  double longest = 0;
  const auto slots = static_cast<std::size_t>(std::ceil(horizon / kSlotSeconds)) + 1;
  std::vector<double> work(slots, 0.0);
  std::vector<double> works;
  works.reserve(needs.size());
  for (const Need& n : needs) {
    b.workGpuHours += n.work / 3600;
    works.push_back(n.work);
    const auto slot = static_cast<std::size_t>(n.arrival / kSlotSeconds);
    if (slot == static_cast<std::size_t>(n.deadline / kSlotSeconds)) work[slot] += n.work;
    const double from = std::max(0.0, n.deadline - n.work - c);
    const double to = std::min(horizon, n.arrival + n.work);
    if (to <= from) continue;
    longest = std::max(longest, to - from);
    const auto first = static_cast<std::size_t>(std::ceil(from));
    const auto end = static_cast<std::size_t>(std::floor(to));  // ticks [first, end)
    if (end <= first) continue;
    ++cover[first];
    --cover[std::min(end, ticks)];
  }
  std::vector<double> covered(slots, 0.0);
  std::vector<int> counts;
  int running = 0;
  for (std::size_t t = 0; t < ticks; ++t) {
    running += cover[t];
    if (running <= 0) continue;
    counts.push_back(running);
    covered[static_cast<std::size_t>(static_cast<double>(t) / kSlotSeconds)] += 1;
  }
  double base = 0;
  for (std::size_t s = 0; s < slots; ++s) base += std::max(b.minShare * covered[s], work[s]);
  b.coverageGpuHours = b.minShare * static_cast<double>(counts.size()) / 3600;

  const auto m = static_cast<std::size_t>(b.allowedMisses);
  std::sort(works.begin(), works.end(), std::greater<>());
  double workCut = 0;
  for (std::size_t i = 0; i < std::min(m, works.size()); ++i) workCut += works[i];
  std::sort(counts.begin(), counts.end());
  const double budget = (std::ceil(longest) + 1) * static_cast<double>(m);
  double spent = 0;
  std::size_t uncovered = 0;
  while (uncovered < counts.size() && spent + counts[uncovered] <= budget) {
    spent += counts[uncovered];
    ++uncovered;
  }
  const double coverCut = b.minShare * static_cast<double>(uncovered);
  b.gpuHours = std::max(0.0, base - workCut - coverCut) / 3600;
  return b;
}

namespace {

struct Search {
  const ServingTrace& trace;
  const model::GpuCatalog& catalog;
  const ServingOptions& o;
  const ClairvoyantOptions& co;
  double share;
  Millis syncMs;
  Millis leadMs;
  Micros measuredFromUs;
  int cap;
  int runs = 0;

  Result<ServingPolicyResult> run(const std::vector<int>& plan) {
    ++runs;
    auto controller = makePlanned(plan, syncMs, leadMs, cap);
    return runServingOnShare(trace, catalog, o, share, "clairvoyant", *controller);
  }
  bool meets(const ServingPolicyResult& r) const { return r.sloAttainment >= co.target; }
};

// The fewest replicas held constant that meet the target: from the demand estimate's peak,
// doubling until a count meets it (when even the whole fleet misses, nothing will: that run is
// returned), then bisection. Then the demand's shape under that constant, then lower blocks of
// slots. The best run that meets the target, else the fleet's run.
Result<ServingPolicyResult> searchShare(Search& s, const std::vector<int>& demand) {
  const std::size_t slots = demand.size();
  int fails = 0;  // a constant count that misses
  int meets = std::clamp(*std::max_element(demand.begin(), demand.end()), 1, s.cap);
  std::vector<int> plan(slots, meets);
  auto r = s.run(plan);
  if (!r) return fail(r.error());
  ServingPolicyResult best = std::move(*r);
  while (!s.meets(best)) {
    if (meets == s.cap) return best;
    fails = meets;
    meets = std::min(s.cap, 2 * meets);
    plan.assign(slots, meets);
    auto up = s.run(plan);
    if (!up) return fail(up.error());
    best = std::move(*up);
  }
  while (meets - fails > 1 && s.runs < s.co.maxRuns) {
    const int mid = fails + (meets - fails) / 2;
    auto tried = s.run(std::vector<int>(slots, mid));
    if (!tried) return fail(tried.error());
    if (s.meets(*tried)) {
      meets = mid;
      plan.assign(slots, mid);
      best = std::move(*tried);
    } else {
      fails = mid;
    }
  }
  std::vector<int> shaped(slots);
  for (std::size_t k = 0; k < slots; ++k) shaped[k] = std::min(plan[k], demand[k]);
  if (shaped != plan && s.runs < s.co.maxRuns) {
    auto tried = s.run(shaped);
    if (!tried) return fail(tried.error());
    if (s.meets(*tried) && tried->gpuHours < best.gpuHours) {
      plan = std::move(shaped);
      best = std::move(*tried);
    }
  }
  // Lower: one replica fewer over a block of measured slots; a block that fails is halved,
  // down to two slots; a block that succeeds is tried again. Breadth first: every block of a
  // size is tried before the halves, so the budget goes to broad cuts over the whole window.
  const auto first = static_cast<std::size_t>(s.measuredFromUs / (s.syncMs * 1000));
  std::deque<std::pair<std::size_t, std::size_t>> blocks{{first, plan.size()}};
  while (!blocks.empty() && s.runs < s.co.maxRuns) {
    const auto [from, to] = blocks.front();
    blocks.pop_front();
    std::vector<int> lower = plan;
    bool changed = false;
    for (std::size_t k = from; k < to; ++k) {
      if (lower[k] > 0) {
        --lower[k];
        changed = true;
      }
    }
    if (!changed) continue;
    auto tried = s.run(lower);
    if (!tried) return fail(tried.error());
    if (s.meets(*tried) && tried->gpuHours < best.gpuHours) {
      plan = std::move(lower);
      best = std::move(*tried);
      blocks.emplace_back(from, to);
    } else if (to - from > 2) {
      const std::size_t mid = from + (to - from) / 2;
      blocks.emplace_back(from, mid);
      blocks.emplace_back(mid, to);
    }
  }
  return best;
}

}  // namespace

Result<ServingPolicyResult> runClairvoyant(const ServingTrace& trace,
                                           const model::GpuCatalog& catalog,
                                           const ServingOptions& o, const ClairvoyantOptions& co) {
  auto whole = servingPerf(catalog, o);
  if (!whole) return fail(whole.error());
  const Micros measuredFromUs = leadInUs(trace, o.warmupSeconds);
  const ServingTrace warmed = withLeadIn(trace, o.warmupSeconds);
  const int fleetGpus = o.fleet.nodes * o.fleet.gpusPerNode;
  // A replica asked for now may come from the remote store unless every node holds the
  // weights on disk from the start.
  const CacheTier slowest = o.fleet.modelCachedOnDisk ? CacheTier::kLocalDisk : CacheTier::kRemote;
  const auto leadMs = static_cast<Millis>(
      std::ceil(withError(o.load, o.actual).seconds(slowest, whole->weightsBytes) * 1e3));
  const Millis syncMs = Millis{std::max(1, o.clairvoyantSyncSeconds)} * 1000;

  std::optional<ServingPolicyResult> best;
  int totalRuns = 0;
  for (double share : kReplicaShares) {
    auto perf = sharePerf(*whole, o.model, share);
    if (!perf) continue;  // the weights do not fit on this share
    Search s{trace,  catalog,        o,
             co,     share,          syncMs,
             leadMs, measuredFromUs, replicaCapacity(o.fleet, share)};
    // The demand estimate at full utilisation, per sync slot: the shape the search tries.
    DemandOptions d;
    d.intervalSeconds = static_cast<int>(syncMs / 1000);
    d.targetUtilization = 1.0;
    std::vector<int> demand = replicaDemand(warmed, *perf, d);
    const auto slots = static_cast<std::size_t>(
        (warmed.spanUs() / 1000 + Millis{o.tailSeconds} * 1000) / syncMs + 1);
    demand.resize(std::max(demand.size(), slots), 1);
    auto r = searchShare(s, demand);
    if (!r) return fail(r.error());
    totalRuns += s.runs;
    char detail[96];
    std::snprintf(detail, sizeof detail, "%.2f GPU shares", share);
    r->detail = detail;
    const bool meets = r->sloAttainment >= co.target;
    const bool bestMeets = best && best->sloAttainment >= co.target;
    if (!best || (meets && (!bestMeets || r->gpuHours < best->gpuHours)) ||
        (!meets && !bestMeets && r->sloAttainment > best->sloAttainment)) {
      best = std::move(*r);
    }
  }
  if (!best) return fail(Error::invalid("clairvoyant: the model fits on no GPU share"));
  best->policy = "clairvoyant";
  char detail[160];
  std::snprintf(detail, sizeof detail, "%s, %d simulations", best->detail.c_str(), totalRuns);
  best->detail = detail;
  if (best->sloAttainment < co.target) {
    const int allowed = static_cast<int>(std::floor(best->requests * (1 - co.target) + 1e-9));
    char why[256];
    if (best->rejected > allowed) {
      std::snprintf(why, sizeof why,
                    "%d requests can never run here (context beyond the KV cache or the model's "
                    "window), more than the %d misses the target allows",
                    best->rejected, allowed);
    } else {
      std::snprintf(why, sizeof why,
                    "the fleet (%d GPUs of %s) cannot serve the peak within the SLO: %.2f %% with "
                    "every GPU serving throughout",
                    fleetGpus, o.fleet.gpuType.c_str(), 100 * best->sloAttainment);
    }
    best->infeasible = why;
  }
  return std::move(*best);
}

}  // namespace tessera::sim
