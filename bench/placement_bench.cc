// Placement benchmarks: single decisions, batch plans, state mutation, explanations and
// eviction plans, each next to a baseline measured in the same run (docs/benchmarks.md has
// the numbers, the command and the method; bench/ratios.py turns the JSON into its table).
//
// Every benchmark's label names its baseline ("vs <name>"). The baseline of an engine
// benchmark is ReferenceScan (reference_scan.h): the same plugins over every GPU without the
// engine's index and caches, checked to choose the same placement.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "fleets.h"
#include "reference_scan.h"
#include "sched/engine.h"
#include "sched/plugin.h"
#include "sched/profile.h"

namespace tessera::bench {
namespace {

using sched::ClusterState;

constexpr int kBatchRequests = 10'000;
constexpr int kAlibabaGpus = 6'212;

enum class Shape { kSmall7b, kTp70b };

const char* shapeName(Shape shape) {
  return shape == Shape::kSmall7b ? "7b-shared" : "70b-tp4-nvlink";
}

model::PlacementRequest makeRequest(Shape shape, std::string id) {
  return shape == Shape::kSmall7b ? small7bRequest(std::move(id)) : tp70bRequest(std::move(id));
}

// ---- Shared set-up (built once per process, outside every timed region) ----------------------

sched::PluginSet defaultPlugins() {
  static const sched::PluginRegistry registry = [] {
    sched::PluginRegistry r;
    sched::registerBuiltinPlugins(r);
    return r;
  }();
  auto set = sched::buildPlugins(sched::defaultProfile(), registry);
  if (!set) {
    std::fprintf(stderr, "placement_bench: default profile: %s\n", set.error().message.c_str());
    std::abort();
  }
  return std::move(*set);
}

sched::EngineOptions defaultOptions() {
  return sched::defaultProfile().options;
}

Fleet& synthetic(int gpus, bool saturate = false, double fill = 0.60) {
  static std::map<std::tuple<int, bool, double>, std::unique_ptr<Fleet>> cache;
  auto& slot = cache[{gpus, saturate, fill}];
  if (!slot) {
    SyntheticOptions o;
    o.gpus = gpus;
    o.saturate = saturate;
    o.memoryFill = saturate ? 1.0 : fill;
    o.seed = benchSeed();
    slot = syntheticFleet(o);
    std::fprintf(stderr,
                 "placement_bench: synthetic fleet: %d GPUs on %d nodes, %d resident replicas, "
                 "%.1f %% of GPU memory charged (seed %llu)\n",
                 slot->state->liveGpuCount(), slot->state->liveNodeCount(), slot->residentReplicas,
                 100.0 * slot->memoryUsedFraction, static_cast<unsigned long long>(o.seed));
  }
  return *slot;
}

std::string alibabaCsv() {
  return sharedDir() + "/data/alibaba-gpu-2023/openb_node_list_gpu_node.csv";
}

// nullptr (and `why`) when the trace is not there.
Fleet* alibaba(std::string* why) {
  static std::unique_ptr<Fleet> fleet;
  static std::string error;
  if (!fleet && error.empty()) {
    auto loaded = alibabaFleet(alibabaCsv());
    if (loaded) {
      fleet = std::move(*loaded);
    } else {
      error = "Alibaba trace not available (" + loaded.error().message +
              "); set TESSERA_SHARED_DIR to the directory holding data/alibaba-gpu-2023";
    }
  }
  *why = error;
  return fleet.get();
}

void setRate(benchmark::State& s, double decisionsPerIteration) {
  s.counters["decisions/s"] = benchmark::Counter(
      decisionsPerIteration * static_cast<double>(s.iterations()), benchmark::Counter::kIsRate);
}

std::string describe(const ClusterState& st, const sched::Placement& p) {
  std::string s = st.node(p.node).spec.name + ":";
  for (const auto& a : p.gpus) s += " " + st.gpu(a.gpu).spec.id;
  return s;
}

// ---- (1) single decisions -------------------------------------------------------------------

void decideEngine(benchmark::State& s, int gpus, Shape shape) {
  const Fleet& fleet = synthetic(gpus);
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const auto request = makeRequest(shape, "bench-decide");
  sched::Decision d;
  for (auto _ : s) {
    d = engine.decide(*fleet.state, request);
    benchmark::DoNotOptimize(d);
  }
  if (!d.placement) {
    s.SkipWithError(("nothing fits: " + d.summary).c_str());
    return;
  }
  setRate(s, 1);
  s.counters["options"] = d.feasibleOptions;
  s.counters["mem_used_pct"] = 100.0 * fleet.memoryUsedFraction;
}

void decideReference(benchmark::State& s, int gpus, Shape shape) {
  const Fleet& fleet = synthetic(gpus);
  ReferenceScan reference(defaultPlugins(), defaultOptions());
  const auto request = makeRequest(shape, "bench-decide");
  std::optional<ReferenceScan::Choice> choice;
  for (auto _ : s) {
    choice = reference.decide(*fleet.state, request);
    benchmark::DoNotOptimize(choice);
  }
  if (!choice) {
    s.SkipWithError("nothing fits");
    return;
  }
  // The ratio means something only if both chose the same placement.
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const sched::Decision d = engine.decide(*fleet.state, request);
  const bool same =
      d.placement &&
      describe(*fleet.state, *d.placement) == describe(*fleet.state, choice->placement) &&
      d.totalScore == choice->totalScore;
  if (!same) {
    std::fprintf(
        stderr, "placement_bench: WARNING: engine chose %s (score %lld), reference %s (%lld)\n",
        d.placement ? describe(*fleet.state, *d.placement).c_str() : "nothing",
        static_cast<long long>(d.totalScore), describe(*fleet.state, choice->placement).c_str(),
        static_cast<long long>(choice->totalScore));
  }
  setRate(s, 1);
  s.counters["options"] = choice->feasibleOptions;
  s.counters["same_choice"] = same ? 1 : 0;
}

// ---- (2) batch plans ------------------------------------------------------------------------

Fleet* batchFleet(bool useAlibaba, std::string* why) {
  return useAlibaba ? alibaba(why) : &synthetic(kAlibabaGpus, false, 0.0);
}

void batchEngine(benchmark::State& s, bool useAlibaba) {
  std::string why;
  Fleet* fleet = batchFleet(useAlibaba, &why);
  if (fleet == nullptr) {
    s.SkipWithError(why.c_str());
    return;
  }
  const auto requests = inferenceMix(kBatchRequests, fleet->gpuTypes, benchSeed());
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  sched::BatchPlan plan;
  for (auto _ : s) {
    s.PauseTiming();
    auto copy = requests;
    s.ResumeTiming();
    plan = sched::planBatch(engine, *fleet->state, std::move(copy), /*commit=*/false);
    benchmark::DoNotOptimize(plan);
  }
  setRate(s, kBatchRequests);
  s.counters["placed"] = static_cast<double>(plan.assignments.size());
  s.counters["unplaceable"] = static_cast<double>(plan.unplaceable.size());
}

void batchReference(benchmark::State& s, bool useAlibaba) {
  std::string why;
  Fleet* fleet = batchFleet(useAlibaba, &why);
  if (fleet == nullptr) {
    s.SkipWithError(why.c_str());
    return;
  }
  const auto requests = inferenceMix(kBatchRequests, fleet->gpuTypes, benchSeed());
  ReferenceScan reference(defaultPlugins(), defaultOptions());
  sched::BatchPlan plan;
  for (auto _ : s) {
    plan = reference.planBatch(*fleet->state, requests);
    benchmark::DoNotOptimize(plan);
  }
  // Same plan as the engine's, replica by replica?
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const sched::BatchPlan mine = sched::planBatch(engine, *fleet->state, requests, false);
  std::map<std::string, std::string> where;
  for (const auto& p : mine.assignments) where[p.replicaId] = describe(*fleet->state, p);
  int differ = static_cast<int>(mine.assignments.size() != plan.assignments.size());
  for (const auto& p : plan.assignments) {
    auto it = where.find(p.replicaId);
    differ += it == where.end() || it->second != describe(*fleet->state, p);
  }
  if (differ > 0) {
    std::fprintf(stderr,
                 "placement_bench: WARNING: reference batch differs from planBatch on %d "
                 "replicas\n",
                 differ);
  }
  setRate(s, kBatchRequests);
  s.counters["placed"] = static_cast<double>(plan.assignments.size());
  s.counters["unplaceable"] = static_cast<double>(plan.unplaceable.size());
  s.counters["differing"] = differ;
}

// ---- (3) place + unload cycles --------------------------------------------------------------

void placeUnloadCycle(benchmark::State& s) {
  // A private copy: every cycle leaves a replica tombstone behind.
  ClusterState st(*synthetic(10'000).state);
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const auto request = small7bRequest("bench-cycle");
  for (auto _ : s) {
    const sched::Decision d = engine.place(st, request);
    if (!d.placement) {
      s.SkipWithError(("place failed: " + d.summary).c_str());
      break;
    }
    (void)st.apply(sched::ReplicaUnloaded{request.replicaId});
  }
  setRate(s, 1);
}

void applyCycle(benchmark::State& s) {
  ClusterState st(*synthetic(10'000).state);
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const auto d = engine.decide(st, small7bRequest("bench-apply"));
  if (!d.placement) {
    s.SkipWithError("nothing fits");
    return;
  }
  const sched::Event placed = sched::replicaPlaced(st, *d.placement, st.clock().nowMs());
  const sched::Event unloaded = sched::ReplicaUnloaded{d.placement->replicaId};
  for (auto _ : s) {
    if (!st.apply(placed) || !st.apply(unloaded)) {
      s.SkipWithError("the state refused the cycle");
      break;
    }
  }
  s.counters["cycles/s"] =
      benchmark::Counter(static_cast<double>(s.iterations()), benchmark::Counter::kIsRate);
}

// ---- (4) explained decisions ----------------------------------------------------------------

void decideExplain(benchmark::State& s, int gpus, Shape shape) {
  const Fleet& fleet = synthetic(gpus);
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const auto request = makeRequest(shape, "bench-explain");
  sched::DecideOptions opts;
  opts.explain = true;
  sched::Decision d;
  for (auto _ : s) {
    d = engine.decide(*fleet.state, request, opts);
    benchmark::DoNotOptimize(d);
  }
  setRate(s, 1);
  s.counters["rejections"] = static_cast<double>(d.rejections.size());
}

// ---- (5) eviction plans ---------------------------------------------------------------------

model::PlacementRequest evictionRequest() {
  auto r = small7bRequest("bench-evict");
  r.model.priority = 10;  // above every resident replica (0..2)
  return r;
}

void evictionPlan(benchmark::State& s) {
  const Fleet& fleet = synthetic(1'000, /*saturate=*/true);
  sched::PlacementEngine engine(defaultPlugins(), defaultOptions());
  const auto request = evictionRequest();
  if (engine.decide(*fleet.state, request).placement) {
    s.SkipWithError("the saturated fleet still takes the request without eviction");
    return;
  }
  sched::EvictionPlan plan;
  for (auto _ : s) {
    plan = sched::planEviction(engine, *fleet.state, request);
    benchmark::DoNotOptimize(plan);
  }
  if (!plan.feasible) s.SkipWithError(("no eviction plan: " + plan.reason).c_str());
  s.counters["victims"] = static_cast<double>(plan.victims.size());
  s.counters["mem_used_pct"] = 100.0 * fleet.memoryUsedFraction;
}

void evictionBaseline(benchmark::State& s) {
  const Fleet& fleet = synthetic(1'000, /*saturate=*/true);
  ReferenceScan reference(defaultPlugins(), defaultOptions());
  const auto request = evictionRequest();
  for (auto _ : s) {
    auto choice = reference.decide(*fleet.state, request);
    benchmark::DoNotOptimize(choice);
  }
  setRate(s, 1);
}

// ---- Registration ---------------------------------------------------------------------------

template <typename Fn>
benchmark::internal::Benchmark* add(const std::string& name, const std::string& baseline, Fn fn) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [fn, baseline](benchmark::State& s) {
    fn(s);
    s.SetLabel(baseline.empty() ? "baseline" : "vs " + baseline);
  });
  return b->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond);
}

void registerAll() {
  for (int gpus : {1'000, 10'000, 100'000}) {
    for (Shape shape : {Shape::kSmall7b, Shape::kTp70b}) {
      const std::string tail = "/gpus:" + std::to_string(gpus) + "/" + shapeName(shape);
      add("decide/reference" + tail, "", [=](auto& s) { decideReference(s, gpus, shape); });
      add("decide/engine" + tail, "decide/reference" + tail,
          [=](auto& s) { decideEngine(s, gpus, shape); });
    }
  }
  for (Shape shape : {Shape::kSmall7b, Shape::kTp70b}) {
    const std::string tail = std::string("/gpus:10000/") + shapeName(shape);
    add("explain/engine" + tail, "decide/reference" + tail,
        [=](auto& s) { decideExplain(s, 10'000, shape); });
  }
  add("cycle/place+unload/gpus:10000/7b-shared", "decide/engine/gpus:10000/7b-shared",
      [](auto& s) { placeUnloadCycle(s); });
  // Fixed iterations: every cycle leaves a tombstone, so an open-ended run would grow the
  // replica table (and the time per cycle) with the machine's speed.
  add("cycle/apply-only/gpus:10000/7b-shared", "decide/engine/gpus:10000/7b-shared", [](auto& s) {
    applyCycle(s);
  })->Iterations(100'000);
  add("evict/reference-decide/gpus:1000-full/7b-prio10", "", [](auto& s) { evictionBaseline(s); });
  add("evict/engine/gpus:1000-full/7b-prio10", "evict/reference-decide/gpus:1000-full/7b-prio10",
      [](auto& s) { evictionPlan(s); });
  for (bool useAlibaba : {true, false}) {
    const std::string tail = std::string(useAlibaba ? "/alibaba-6212" : "/synthetic-6212") +
                             "/requests:" + std::to_string(kBatchRequests);
    add("batch/reference" + tail, "", [=](auto& s) { batchReference(s, useAlibaba); })
        ->Iterations(1)
        ->Repetitions(3)
        ->Unit(benchmark::kMillisecond);
    add("batch/engine" + tail, "batch/reference" + tail,
        [=](auto& s) { batchEngine(s, useAlibaba); })
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("tessera_seed", std::to_string(tessera::bench::benchSeed()));
  benchmark::AddCustomContext("tessera_shared_dir", tessera::bench::sharedDir());
  tessera::bench::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
