#include "sim/experiment.h"

#include <charconv>
#include <filesystem>
#include <mutex>
#include <thread>

#include "sim/reference.h"

namespace tessera::sim {
namespace {

Curve meanOf(const std::vector<RunResult>& runs) {
  Curve c;
  auto average = [&](BucketValues Curve::*member, std::size_t k) -> std::optional<double> {
    double sum = 0;
    int n = 0;
    for (const RunResult& r : runs) {
      if (const auto& v = (r.curve.*member)[k]) {
        sum += *v;
        ++n;
      }
    }
    if (n == 0) return std::nullopt;
    return sum / n;
  };
  for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
    c.allocPct[k] = average(&Curve::allocPct, k);
    c.fragPct[k] = average(&Curve::fragPct, k);
    c.fragRatePct[k] = average(&Curve::fragRatePct, k);
  }
  return c;
}

}  // namespace

Result<std::optional<TraceReference>> loadTraceReference(const std::string& referenceDir,
                                                         const std::string& trace) {
  const std::string orderPath = arrivalOrderPath(referenceDir, trace);
  const std::string rankPath = nodeRankPath(referenceDir, trace);
  std::error_code ec;
  if (!std::filesystem::exists(orderPath, ec) || !std::filesystem::exists(rankPath, ec)) {
    return std::optional<TraceReference>();
  }
  auto orders = readArrivalOrders(orderPath);
  if (!orders) return fail(orders.error());
  auto ranks = readNodeRanks(rankPath);
  if (!ranks) return fail(ranks.error());
  return std::optional<TraceReference>(TraceReference{std::move(*orders), std::move(*ranks)});
}

Result<ArrivalPlan> referencePlan(const FgdTrace& trace, const TraceReference& reference,
                                  int seed) {
  auto order = reference.orders.forSeed(seed);
  if (!order) return fail(order.error());
  std::vector<std::string> names;
  names.reserve(trace.nodes.size());
  for (const auto& n : trace.nodes) names.push_back(n.name);
  auto nodeRanks = reference.ranks.forSeed(seed, names);
  if (!nodeRanks) return fail(nodeRanks.error());
  ArrivalPlan plan;
  plan.order.assign(order->begin(), order->end());
  plan.ranks = std::move(*nodeRanks);
  std::vector<int> seen(trace.pods.size(), 0);
  for (int i : plan.order) {
    if (i < 0 || static_cast<std::size_t>(i) >= trace.pods.size()) {
      return fail(Error::invalid(reference.orders.label + ": pod row " + std::to_string(i) +
                                 " is outside the trace (" + std::to_string(trace.pods.size()) +
                                 " pods)"));
    }
    if (seen[static_cast<std::size_t>(i)]++ > 0) ++plan.appended;
    plan.arrivingGpuMilli += trace.pods[static_cast<std::size_t>(i)].totalGpuMilli();
  }
  for (int s : seen) plan.removed += s == 0 ? 1 : 0;
  return plan;
}

Result<std::vector<TraceResult>> runExperiments(
    const std::vector<FgdTrace>& traces, const model::GpuCatalog& catalog,
    const ExperimentOptions& options, const std::function<void(const ProgressSnapshot&)>& onTick) {
  for (const auto& p : options.policies) {
    if (!isPolicyName(p)) {
      auto err = policyProfile(p, {}, 0);  // the error lists the known names
      return fail(err ? Error::invalid("unknown policy " + p) : err.error());
    }
  }
  if (options.seeds.empty()) return fail(Error::invalid("no seeds"));

  std::vector<TraceResult> results(traces.size());
  struct Job {
    std::size_t trace, policy, seed;
  };
  std::vector<Job> jobs;
  std::int64_t podsTotal = 0;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    TraceResult& r = results[t];
    r.trace = traces[t].name;
    r.typical = traces[t].typical;
    r.gpuCount = traces[t].gpuCount;
    std::optional<TraceReference> reference;
    if (options.referenceDir) {
      auto loaded = loadTraceReference(*options.referenceDir, traces[t].name);
      if (!loaded) return fail(loaded.error());
      reference = std::move(*loaded);
    }
    for (int seed : options.seeds) {
      auto plan = reference ? referencePlan(traces[t], *reference, seed)
                            : Result<ArrivalPlan>(ownArrivalPlan(traces[t].pods, traces[t].nodes,
                                                                 options.tuneRatio,
                                                                 static_cast<std::uint64_t>(seed)));
      if (!plan) return fail(plan.error());
      r.plans.push_back(std::move(*plan));
    }
    r.replayed = reference.has_value();
    r.policies.resize(options.policies.size());
    for (std::size_t p = 0; p < options.policies.size(); ++p) {
      r.policies[p].policy = options.policies[p];
      r.policies[p].runs.resize(options.seeds.size());
      for (std::size_t s = 0; s < options.seeds.size(); ++s) {
        jobs.push_back({t, p, s});
        podsTotal += static_cast<std::int64_t>(r.plans[s].order.size());
      }
    }
  }

  std::atomic<std::size_t> next{0};
  std::atomic<std::int64_t> podsDone{0};
  std::atomic<int> runsDone{0};
  std::mutex errorMutex;
  std::optional<Error> firstError;
  auto worker = [&] {
    for (;;) {
      const std::size_t j = next.fetch_add(1);
      if (j >= jobs.size()) return;
      {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (firstError) return;
      }
      const Job& job = jobs[j];
      TraceResult& tr = results[job.trace];
      RunSpec spec;
      spec.policy = options.policies[job.policy];
      spec.seed = options.seeds[job.seed];
      spec.plan = tr.plans[job.seed];
      spec.bound = options.bound;
      auto run =
          runFgd(traces[job.trace], catalog, spec, [&](int pods) { podsDone.fetch_add(pods); });
      if (!run) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!firstError) {
          Error e = run.error();
          e.message = tr.trace + "/" + spec.policy + "/seed " + std::to_string(spec.seed) + ": " +
                      e.message;
          firstError = std::move(e);
        }
        return;
      }
      if (!options.keepSamples) std::vector<PodSample>().swap(run->samples);
      tr.policies[job.policy].runs[job.seed] = std::move(*run);
      runsDone.fetch_add(1);
    }
  };

  const auto started = std::chrono::steady_clock::now();
  const int threads = std::max(1, std::min<int>(options.jobs, static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  auto snapshot = [&] {
    ProgressSnapshot s;
    s.podsDone = podsDone.load();
    s.podsTotal = podsTotal;
    s.runsDone = runsDone.load();
    s.runsTotal = static_cast<int>(jobs.size());
    s.elapsedSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return s;
  };
  if (onTick) {
    while (runsDone.load() < static_cast<int>(jobs.size())) {
      {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (firstError) break;
      }
      onTick(snapshot());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  for (auto& t : pool) t.join();
  if (firstError) return fail(*firstError);
  if (onTick) onTick(snapshot());

  for (TraceResult& r : results) {
    for (PolicySummary& p : r.policies) {
      std::vector<double> at100;
      for (const RunResult& run : p.runs) {
        if (auto v = run.unallocatedAt100()) at100.push_back(*v);
      }
      p.unallocatedAt100 = meanSd(at100);
      p.meanCurve = meanOf(p.runs);
      std::vector<double> bound;
      for (const RunResult& run : p.runs) {
        if (run.boundAt100) bound.push_back(*run.boundAt100);
      }
      p.boundAt100 = meanSd(bound);
    }
    if (!r.policies.empty()) {
      std::vector<double> placeAll;
      for (const RunResult& run : r.policies.front().runs) {
        if (run.placeAllBoundAt100) placeAll.push_back(*run.placeAllBoundAt100);
      }
      r.placeAllBoundAt100 = meanSd(placeAll);
    }
  }
  return results;
}

Result<std::vector<int>> parseSeedList(std::string_view text) {
  std::vector<int> seeds;
  auto number = [&](std::string_view s) -> Result<int> {
    int v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 0) {
      return fail(Error::invalid("bad seed '" + std::string(s) + "' in '" + std::string(text) +
                                 "' (expected e.g. 42-51 or 42,43,50)"));
    }
    return v;
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view part = text.substr(pos, comma - pos);
    const std::size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      auto v = number(part);
      if (!v) return fail(v.error());
      seeds.push_back(*v);
    } else {
      auto lo = number(part.substr(0, dash));
      if (!lo) return fail(lo.error());
      auto hi = number(part.substr(dash + 1));
      if (!hi) return fail(hi.error());
      if (*hi < *lo || *hi - *lo > 100000) {
        return fail(Error::invalid("bad seed range '" + std::string(part) + "'"));
      }
      for (int s = *lo; s <= *hi; ++s) seeds.push_back(s);
    }
    pos = comma + 1;
  }
  return seeds;
}

}  // namespace tessera::sim
