#include "sim/fleet.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "sim/fleet_plan.h"
#include "sim/fleet_report.h"
#include "sim/fleet_traffic.h"
#include "sim/serving_test_support.h"
#include "sim/test_support.h"

namespace tessera::sim {
namespace {

using testing::phasedTrace;
using testing::servingCatalog;

// A built-in synthetic fleet small enough for a unit test (no shared data is read).
FleetSpec smallFleet(std::uint64_t seed) {
  DefaultFleetOptions o;
  o.dataDir = "/nonexistent";
  o.spanSeconds = 900;
  o.nodes = 2;
  o.loraModels = 4;
  o.seed = seed;
  auto spec = defaultFleet(o);
  EXPECT_TRUE(spec) << spec.error().message;
  return std::move(*spec);
}

loop::NodeGroup nodes(int count, int gpus, std::string type = "H100-80GB") {
  loop::NodeGroup g;
  g.gpuType = std::move(type);
  g.nodes = count;
  g.gpusPerNode = gpus;
  return g;
}

FleetDeployment deployment(std::string name, std::string model, ServingTrace trace,
                           int priority = 0) {
  FleetDeployment d;
  d.name = std::move(name);
  d.model = std::move(model);
  d.trace = std::move(trace);
  d.priority = priority;
  return d;
}

// Every request of every deployment is counted once: served, unserved (no first token by the
// horizon: timed out) or rejected; and only served ones can meet the SLO.
void expectConserved(const FleetSpec& spec, const FleetPolicyResult& r) {
  ASSERT_EQ(r.deployments.size(), spec.deployments.size());
  int total = 0;
  for (std::size_t i = 0; i < spec.deployments.size(); ++i) {
    const ServingPolicyResult& x = r.deployments[i].run;
    SCOPED_TRACE(r.policy + " / " + r.deployments[i].name);
    EXPECT_EQ(r.deployments[i].name, spec.deployments[i].name);
    EXPECT_EQ(x.requests, static_cast<int>(spec.deployments[i].trace.requests.size()));
    EXPECT_EQ(x.served + x.unserved + x.rejected, x.requests);
    EXPECT_LE(x.sloMet, x.served);
    EXPECT_GE(x.gpuHours, 0);
    total += x.requests;
  }
  EXPECT_EQ(r.requests, total);
  EXPECT_NEAR(r.sloAttainment, static_cast<double>(r.sloMet) / r.requests, 1e-12);
}

TEST(FleetTest, EveryRequestIsCountedOnceUnderEveryPolicy) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("FleetTest seed %llu\n", static_cast<unsigned long long>(seed));
  const FleetSpec spec = smallFleet(seed);
  ASSERT_GE(spec.deployments.size(), 8u);
  for (auto policy : kFleetPolicyNames) {
    auto r = runFleet(spec, servingCatalog(), policy);
    ASSERT_TRUE(r) << policy << ": " << r.error().message;
    expectConserved(spec, *r);
    // Cards in use: never more than the fleet, and the peak bounds the hours.
    EXPECT_LE(r->peakGpus, 16);
    EXPECT_GT(r->gpuHours, 0);
    EXPECT_LE(r->gpuHours, r->peakGpus * (r->deployments.front().run.horizonS / 3600) + 1e-6);
    // A card in use holds at least a share of a replica: replica GPU-hours cannot exceed it.
    EXPECT_LE(r->replicaGpuHours, r->gpuHours + 1e-6);
    EXPECT_GE(r->meanMemoryUtilization, 0);
    EXPECT_LE(r->meanMemoryUtilization, r->meanMemoryAllocated + 1e-9);
    EXPECT_LE(r->meanMemoryAllocated, 1 + 1e-9);
    EXPECT_LE(r->meanComputeUtilization, 1 + 1e-9);
    int byTier = 0;
    for (int n : r->coldStartsByTier) byTier += n;
    EXPECT_EQ(byTier, r->coldStarts);
    EXPECT_EQ(r->coldStartAll.count, r->coldStarts);
    if (policy != "tessera") {
      // The baselines have no node cache: every cold start reads the remote store.
      EXPECT_EQ(r->coldStartsByTier[2], r->coldStarts);
    }
  }
}

TEST(FleetTest, RunsAreDeterministic) {
  const FleetSpec spec = smallFleet(7);
  auto a = runFleet(spec, servingCatalog(), "tessera");
  auto b = runFleet(spec, servingCatalog(), "tessera");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->sloMet, b->sloMet);
  EXPECT_DOUBLE_EQ(a->gpuHours, b->gpuHours);
  EXPECT_EQ(a->coldStarts, b->coldStarts);
}

// A one-deployment fleet under tessera is simulate serving's tessera run on the same trace and
// fleet.
TEST(FleetTest, OneDeploymentReproducesTheServingSimulation) {
  ServingTrace trace = builtinChatTrace(3);
  // The first 20 minutes keep the test short.
  std::erase_if(trace.requests,
                [](const ServingRequest& r) { return r.arrivalUs >= Micros{1200} * 1'000'000; });
  FleetSpec spec;
  spec.nodes = {nodes(4, 8)};
  spec.models = builtinFleetModels();
  spec.deployments = {deployment("chat", "llama-3.1-8b", trace)};
  auto fleet = runFleet(spec, servingCatalog(), "tessera");
  ASSERT_TRUE(fleet) << fleet.error().message;

  ServingOptions o;  // simulate serving's defaults: 4 x 8 H100-80GB, Llama-3.1-8B
  auto serving = runServing(trace, servingCatalog(), o, "tessera");
  ASSERT_TRUE(serving) << serving.error().message;
  const ServingPolicyResult& f = fleet->deployments.front().run;
  EXPECT_EQ(f.requests, serving->requests);
  EXPECT_EQ(f.sloMet, serving->sloMet);
  EXPECT_DOUBLE_EQ(f.sloAttainment, serving->sloAttainment);
  EXPECT_DOUBLE_EQ(f.gpuHours, serving->gpuHours);
  EXPECT_DOUBLE_EQ(f.ttftP99Ms, serving->ttftP99Ms);
  EXPECT_EQ(f.coldStarts, serving->coldStarts);
  EXPECT_EQ(f.coldStartsByTier, serving->coldStartsByTier);
  EXPECT_EQ(f.scaleUps, serving->scaleUps);
  EXPECT_EQ(f.scaleDowns, serving->scaleDowns);
  EXPECT_EQ(f.peakReplicas, serving->peakReplicas);
}

// Time-slicing: a replica alone on a card runs at the card's speed; a busy neighbour on the same
// card slows it. The same deployment next to a busy one, time-sliced, answers later than alone.
TEST(FleetTest, TimeSlicedNeighboursSlowEachOtherDown) {
  const ServingTrace steady = phasedTrace({{600, 4.0}}, 2000, 200);
  FleetSpec alone;
  alone.nodes = {nodes(1, 1)};
  alone.models = builtinFleetModels();
  alone.deployments = {deployment("a", "llama-3.2-3b", steady)};
  FleetSpec shared = alone;
  shared.deployments.push_back(deployment("b", "llama-3.2-1b", steady));
  auto one = runFleet(alone, servingCatalog(), "time-slicing");
  auto two = runFleet(shared, servingCatalog(), "time-slicing");
  ASSERT_TRUE(one && two) << (one ? two.error().message : one.error().message);
  // On one card both deployments share it: one card in use either way.
  EXPECT_EQ(one->peakGpus, 1);
  EXPECT_EQ(two->peakGpus, 1);
  EXPECT_GT(two->deployments[0].run.ttftP50Ms, 1.5 * one->deployments[0].run.ttftP50Ms);
  // Partitioned shares (binpack) do not depend on the neighbour: a's latency is the same.
  auto binOne = runFleet(alone, servingCatalog(), "binpack");
  auto binTwo = runFleet(shared, servingCatalog(), "binpack");
  ASSERT_TRUE(binOne && binTwo);
  EXPECT_DOUBLE_EQ(binTwo->deployments[0].run.ttftP50Ms, binOne->deployments[0].run.ttftP50Ms);
}

// A higher-priority deployment that finds no room evicts a lower-priority replica; the evicted
// deployment's requests are still all counted.
TEST(FleetTest, HigherPriorityEvictsLowerWhenTheFleetIsFull) {
  FleetSpec spec;
  spec.nodes = {nodes(1, 2)};
  spec.models = builtinFleetModels();
  // No lead-in: the HPA on duty cycle asks for a second replica at the first busy sync, and
  // evictions count (as cold starts do) only within the measured window.
  spec.warmupSeconds = 0;
  // "low" holds one card from the start; "high" starts small and then needs both.
  spec.deployments = {
      deployment("low", "llama-3.1-8b", phasedTrace({{1200, 0.5}}, 500, 50), 0),
      deployment("high", "llama-3.1-8b", phasedTrace({{300, 0.5}, {900, 40}}, 2000, 200), 5)};
  auto r = runFleet(spec, servingCatalog(), "whole-gpu");
  ASSERT_TRUE(r) << r.error().message;
  expectConserved(spec, *r);
  EXPECT_GE(r->evictions, 1);
  EXPECT_EQ(r->deployments[0].run.evicted, r->evictions);
  EXPECT_EQ(r->deployments[1].run.evicted, 0);
  EXPECT_LE(r->peakGpus, 2);
}

TEST(FleetTest, BadSpecsAreErrorsNamingTheProblem) {
  FleetSpec spec;
  spec.nodes = {nodes(1, 8)};
  spec.models = builtinFleetModels();
  spec.deployments = {deployment("chat", "no-such-model", phasedTrace({{60, 1}}))};
  auto r = runFleet(spec, servingCatalog(), "tessera");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("deployment chat: unknown model 'no-such-model'"),
            std::string::npos)
      << r.error().message;
  spec.deployments.front().model = "llama-3.1-8b";
  spec.deployments.front().gpuType = "L40S";
  r = runFleet(spec, servingCatalog(), "tessera");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no L40S GPUs"), std::string::npos) << r.error().message;
  r = runFleet(spec, servingCatalog(), "hami");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown fleet policy 'hami'"), std::string::npos);
  spec.deployments.clear();
  EXPECT_FALSE(runFleet(spec, servingCatalog(), "tessera"));
}

TEST(FleetTest, ReportJsonHasThePolicyFieldsAndSavings) {
  const FleetSpec spec = smallFleet(3);
  FleetReport report;
  report.fleet = spec.name;
  report.deployments = spec.deployments;
  for (auto policy : {"whole-gpu", "tessera"}) {
    auto r = runFleet(spec, servingCatalog(), policy);
    ASSERT_TRUE(r) << r.error().message;
    report.policies.push_back(std::move(*r));
  }
  const nlohmann::json j = fleetJson(report);
  for (const char* p : {"whole-gpu", "tessera"}) {
    for (const char* key : {"gpu_hours", "slo_attainment", "mean_gpu_memory_utilization",
                            "mean_gpu_compute_utilization", "cold_starts", "cost", "evictions"}) {
      EXPECT_TRUE(j["policies"][p].contains(key)) << p << "." << key;
    }
    EXPECT_EQ(j["policies"][p]["deployments"].size(), spec.deployments.size());
  }
  EXPECT_NEAR(j["savings"]["gpu_hours_vs_whole_gpu"].get<double>(),
              report.policies[1].gpuHours / report.policies[0].gpuHours, 1e-3);
  const std::string svg = fleetPlotSvg(report);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("tessera"), std::string::npos);
}

TEST(FleetTrafficTest, QpsSeriesPerContainerKeepTheirPhase) {
  const std::string csv =
      "timestamp_anon,value,container_ip,request_type\n"
      "100,1,a,Generative Requests\n"
      "160,2,a,Generative Requests\n"
      "160,5,b,Generative Requests\n"
      "220,4,b,Generative Requests\n"
      "220,9,b,API Requests\n";
  auto s = parseQpsByContainer(csv, "qps.csv", "Generative Requests");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->size(), 2u);
  EXPECT_DOUBLE_EQ(s->at("a").front().timeS, 0);
  EXPECT_DOUBLE_EQ(s->at("a").back().qps, 2);
  // b starts 60 s after the file's first sample: held at 0 until then.
  ASSERT_EQ(s->at("b").size(), 3u);
  EXPECT_DOUBLE_EQ(s->at("b")[1].timeS, 60);
  EXPECT_DOUBLE_EQ(s->at("b")[2].qps, 4);  // the API request row is not counted
  auto bad = parseQpsByContainer("timestamp_anon,value,container_ip\n1,x,a\n", "q.csv", "");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("q.csv:2"), std::string::npos) << bad.error().message;
  auto missing = parseQpsByContainer("timestamp_anon,value\n1,2\n", "q.csv", "");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("container_ip"), std::string::npos);
}

TEST(FleetTrafficTest, LoraTraceGroupsArrivalsByCheckpoint) {
  const std::string csv =
      "gmt_create,predict_type,checkpoint_model_version_id\n"
      "2024-11-15 00:00:00,T,M1\n"
      "2024-11-15 00:00:30,T,M2\n"
      "2024-11-15 00:01:00,T,M1\n"
      "2024-11-15 00:02:00,T,\n";
  auto t = parseLoraTrace(csv, "lora.csv");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_DOUBLE_EQ(t->spanSeconds, 120);
  EXPECT_EQ(t->withoutCheckpoint, 1);
  ASSERT_EQ(t->byVolume(), (std::vector<std::string>{"M1", "M2"}));
  EXPECT_EQ(t->arrivals.at("M1"), (std::vector<double>{0, 60}));
  auto bad = parseLoraTrace("gmt_create,checkpoint_model_version_id\nyesterday,M1\n", "lora.csv");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("lora.csv:2"), std::string::npos) << bad.error().message;
  // Arrivals compressed 10x, token lengths drawn from the given trace.
  const ServingTrace tokens = phasedTrace({{10, 1}}, 321, 12);
  auto tr = traceFromArrivals({5, 25, 105}, 10, tokens, 1, "m");
  ASSERT_TRUE(tr) << tr.error().message;
  ASSERT_EQ(tr->requests.size(), 3u);
  EXPECT_EQ(tr->requests[1].arrivalUs, 2'000'000);
  EXPECT_EQ(tr->requests[2].arrivalUs, 10'000'000);
  EXPECT_EQ(tr->requests[0].inputTokens, 321);
}

TEST(FleetTest, TheDefaultExperimentReadsTheSharedTraces) {
  const std::string data = testing::sharedDir() + "/data";
  if (!std::filesystem::exists(data + "/alibaba-gentd26-genai-serving/lora_request_trace.csv") ||
      !std::filesystem::exists(data +
                               "/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv")) {
    GTEST_SKIP() << "the Azure and GenTD26 traces are not under " << data;
  }
  DefaultFleetOptions o;
  o.dataDir = data;
  o.spanSeconds = 900;
  o.loraModels = 6;
  auto spec = defaultFleet(o);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_NE(spec->source.find("GenTD26"), std::string::npos);
  EXPECT_EQ(spec->deployments.size(), 4u + 4u + 6u);
  for (auto policy : {"whole-gpu", "tessera"}) {
    auto r = runFleet(*spec, servingCatalog(), policy);
    ASSERT_TRUE(r) << r.error().message;
    expectConserved(*spec, *r);
  }
  auto loads = readLatencySeconds(data +
                                  "/alibaba-gentd26-genai-serving/"
                                  "basemodel_update_latency_anon.tar.gz");
  ASSERT_TRUE(loads) << loads.error().message;
  EXPECT_GT(loads->size(), 1000u);
}

}  // namespace
}  // namespace tessera::sim

namespace tessera::sim {
namespace {

// The planner's fleet meets every SLO when replayed on its own, and one GPU fewer does not.
// The plan for one policy: the count it reports meets every SLO in a replay, one GPU fewer does
// not. One test per policy, so that the two long searches run side by side under ctest -j.
void expectPlanIsTheFewestThatMeetsEverySlo(const char* policy) {
  const FleetSpec spec = smallFleet(11);
  PlanOptions o;
  o.gpuTypes = {"H100-80GB", "L40S"};
  o.maxGpus = 64;
  o.policy = policy;
  auto p = plan(spec, servingCatalog(), o);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->options.size(), 2u);
  const PlanOption& h100 = p->options[0];
  ASSERT_TRUE(h100.feasible) << h100.why;
  // L40S (48 GB) cannot hold gemma-2-27b's weights and a KV cache.
  EXPECT_FALSE(p->options[1].feasible);
  EXPECT_NE(p->options[1].why.find("gemma-2-27b"), std::string::npos) << p->options[1].why;
  ASSERT_TRUE(p->best.has_value());
  EXPECT_EQ(*p->best, 0u);
  auto atCount = runFleet(withFleet(spec, "H100-80GB", h100.gpus, 8), servingCatalog(), policy);
  ASSERT_TRUE(atCount) << atCount.error().message;
  EXPECT_TRUE(meetsEverySlo(*atCount, o.sloTarget));
  auto fewer = runFleet(withFleet(spec, "H100-80GB", h100.gpus - 1, 8), servingCatalog(), policy);
  ASSERT_TRUE(fewer) << fewer.error().message;
  EXPECT_FALSE(meetsEverySlo(*fewer, o.sloTarget));
  EXPECT_DOUBLE_EQ(h100.costPerHour, h100.gpus * defaultGpuPrice("H100-80GB"));
}

TEST(FleetPlanTest, ThePlannedTesseraFleetMeetsEverySloAndOneGpuFewerDoesNot) {
  expectPlanIsTheFewestThatMeetsEverySlo("tessera");
}

TEST(FleetPlanTest, ThePlannedWholeGpuFleetMeetsEverySloAndOneGpuFewerDoesNot) {
  expectPlanIsTheFewestThatMeetsEverySlo("whole-gpu");
}

TEST(FleetPlanTest, WithFleetSplitsTheCountIntoNodes) {
  FleetSpec spec;
  spec.deployments = {deployment("a", "llama-3.1-8b", phasedTrace({{60, 1}}))};
  const FleetSpec s = withFleet(spec, "A100-80GB", 19, 8);
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0].nodes, 2);
  EXPECT_EQ(s.nodes[0].gpusPerNode, 8);
  EXPECT_EQ(s.nodes[1].nodes, 1);
  EXPECT_EQ(s.nodes[1].gpusPerNode, 3);
  EXPECT_EQ(s.deployments[0].gpuType, "A100-80GB");
}

}  // namespace
}  // namespace tessera::sim

namespace tessera::sim {
namespace {

class FleetFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera_fleet_file_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  Result<FleetSpec> load(const std::string& yaml) {
    return loadFleetFile(write("fleet.yaml", yaml), servingCatalog());
  }
  std::filesystem::path dir_;
};

constexpr const char* kAzure =
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.0000000,800,40\n"
    "2023-11-16 18:15:47.0000000,900,60\n"
    "2023-11-16 18:15:49.0000000,700,50\n"
    "2023-11-16 18:25:49.0000000,700,50\n";

TEST_F(FleetFileTest, AFleetFileDescribesNodesModelsPricesAndTraffic) {
  write("conv.csv", kAzure);
  auto spec = load(
      "kind: Fleet\nname: mine\nminutes: 10\n"
      "nodes:\n  - {gpuType: A100-80GB, count: 2, gpusPerNode: 4}\n"
      "models:\n  - {name: tiny, weightsMib: 1000, parametersB: 0.5, layers: 8, hiddenSize: 1024}\n"
      "prices: {A100-80GB: 1.9}\n"
      "load: {remoteGBps: 2}\n"
      "deployments:\n"
      "  - {name: a, model: tiny, priority: 3, traffic: {trace: conv.csv, rate: 0.5}}\n"
      "  - {name: b, model: llama-3.1-8b, sloTtftMs: 1500, traffic: {builtin: chat, seed: 4}}\n");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->name, "mine");
  ASSERT_EQ(spec->nodes.size(), 1u);
  EXPECT_EQ(spec->nodes[0].gpuType, "A100-80GB");
  EXPECT_EQ(spec->nodes[0].nodes, 2);
  EXPECT_EQ(spec->nodes[0].gpusPerNode, 4);
  EXPECT_DOUBLE_EQ(spec->pricePerGpuHour.at("A100-80GB"), 1.9);
  EXPECT_DOUBLE_EQ(spec->load.remoteGBps, 2);
  ASSERT_EQ(spec->deployments.size(), 2u);
  EXPECT_EQ(spec->deployments[0].priority, 3);
  EXPECT_LE(spec->deployments[0].trace.requests.size(), 4u);  // rate 0.5 thins the trace
  EXPECT_DOUBLE_EQ(spec->deployments[1].sloTtftMs, 1500);
  // The built-in chat trace, cut to the 10-minute span.
  EXPECT_LE(spec->deployments[1].trace.spanUs(), Micros{600} * 1'000'000);
  auto r = runFleet(*spec, servingCatalog(), "tessera");
  ASSERT_TRUE(r) << r.error().message;
  expectConserved(*spec, *r);
}

TEST_F(FleetFileTest, MistakesNameTheFileLineAndField) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::string nodes = "nodes:\n  - {gpuType: H100-80GB, count: 1}\n";
  for (const Case& c : std::vector<Case>{
           {nodes + "deployments:\n  - {name: a, model: gpt-9, traffic: {builtin: chat}}\n",
            "fleet.yaml:4: deployments[0].model: unknown model 'gpt-9'"},
           {nodes + "deployments:\n  - {name: a, model: llama-3.1-8b, traffic: {trace: no.csv}}\n",
            "deployments[0].traffic.trace:"},
           {nodes + "deployments:\n  - {name: a, model: llama-3.1-8b, traffic: {}}\n",
            "give exactly one of trace, qps or builtin"},
           {nodes + "deployments:\n  - {name: a, model: llama-3.1-8b, trafic: {}}\n", "trafic"},
           {"nodes:\n  - {gpuType: Z80, count: 1}\ndeployments: []\n", "unknown GPU type 'Z80'"},
           {nodes + "deployments:\n  - {name: a, model: llama-3.1-8b, gpuType: L40S, traffic: "
                    "{builtin: chat}}\n",
            "the fleet has no L40S nodes"},
           {nodes + "deployments:\n  - {name: a, model: llama-3.1-8b, traffic: {builtin: chat}}\n"
                    "  - {name: a, model: llama-3.1-8b, traffic: {builtin: chat}}\n",
            "named twice"},
           {nodes + "deployments: []\n", "at least one deployment"},
           {"kind: Cluster\n" + nodes, "kind"},
       }) {
    auto spec = load(c.yaml);
    ASSERT_FALSE(spec) << c.yaml;
    EXPECT_NE(spec.error().message.find(c.expected), std::string::npos)
        << "got: " << spec.error().message << "\nwanted: " << c.expected;
  }
}

TEST_F(FleetFileTest, TheExampleFleetFileLoadsAndRuns) {
  auto spec =
      loadFleetFile(std::string(TESSERA_SOURCE_DIR) + "/examples/fleet.yaml", servingCatalog());
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->deployments.size(), 3u);
  auto r = runFleet(*spec, servingCatalog(), "tessera");
  ASSERT_TRUE(r) << r.error().message;
  expectConserved(*spec, *r);
}

}  // namespace
}  // namespace tessera::sim

namespace tessera::sim {
namespace {

TEST(FleetTrafficTest, ReshapeThinsCompressesShiftsAndRefusesAFlood) {
  // One request per second for 100 s.
  const ServingTrace t = phasedTrace({{100, 1.0}});
  auto same = reshapeTrace(t, 1, 0, 100, 1, "same");
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ(same->requests.size(), t.requests.size());
  EXPECT_EQ(same->requests.front().arrivalUs, 0);
  // Twice the rate: the trace compressed into 50 s and played twice.
  auto twice = reshapeTrace(t, 2, 0, 100, 1, "twice");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->requests.size(), 2 * t.requests.size());
  EXPECT_EQ(twice->requests[1].arrivalUs, 500'000);
  // A shift is in the trace's own seconds, whatever the rate: 30 s in, the request at t = 30 s
  // comes first (at 15 s of it at twice the rate, so at 0).
  auto shifted = reshapeTrace(t, 2, 30, 100, 1, "shifted");
  ASSERT_TRUE(shifted);
  EXPECT_EQ(shifted->requests.front().arrivalUs, 0);
  EXPECT_EQ(shifted->requests.size(), 2 * t.requests.size());
  // Half the rate keeps about half, over the same span.
  auto half = reshapeTrace(t, 0.5, 0, 100, 1, "half");
  ASSERT_TRUE(half);
  EXPECT_GT(half->requests.size(), 30u);
  EXPECT_LT(half->requests.size(), 70u);
  // A trace shorter than the span plays once per span at rate 1.
  auto longer = reshapeTrace(t, 1, 0, 400, 1, "longer");
  ASSERT_TRUE(longer);
  EXPECT_EQ(longer->requests.size(), t.requests.size());
  // A single instant repeated to a high rate would be a flood: refused.
  ServingTrace instant;
  instant.requests.push_back({0, 100, 10, 2});
  auto flood = reshapeTrace(instant, 1000, 0, 1e6, 1, "flood");
  EXPECT_TRUE(flood);  // 1000 copies of one request: fine
  ServingTrace many = phasedTrace({{100, 1000.0}});
  auto tooMany = reshapeTrace(many, 1000, 0, 1e6, 1, "too-many");
  ASSERT_FALSE(tooMany);
  EXPECT_NE(tooMany.error().message.find("20 million"), std::string::npos);
  EXPECT_FALSE(reshapeTrace(t, 0, 0, 100, 1, "zero"));
}

TEST(FleetTest, TheRateScaleScalesEveryDeploymentIncludingTheLongTail) {
  DefaultFleetOptions o;
  o.dataDir = "/nonexistent";
  o.spanSeconds = 1200;
  o.nodes = 2;
  o.loraModels = 4;
  auto one = defaultFleet(o);
  o.rateScale = 2;
  auto two = defaultFleet(o);
  ASSERT_TRUE(one && two);
  ASSERT_EQ(one->deployments.size(), two->deployments.size());
  for (std::size_t i = 0; i < one->deployments.size(); ++i) {
    const double a = static_cast<double>(one->deployments[i].trace.requests.size());
    const double b = static_cast<double>(two->deployments[i].trace.requests.size());
    // Twice the rate (a compressed trace reaches further into its swell: not exactly 2).
    EXPECT_GT(b, 1.5 * a) << one->deployments[i].name;
    EXPECT_LT(b, 3.0 * a) << one->deployments[i].name;
  }
}

TEST(FleetPlanTest, RequestsNoReplicaCanRunMakeATypeInfeasibleAtOnce) {
  FleetSpec spec;
  spec.models = builtinFleetModels();
  FleetDeployment d = deployment("long", "llama-3.1-8b", phasedTrace({{300, 1.0}}, 3000, 100));
  d.maxContextTokens = 2048;  // every request is longer
  spec.deployments = {d};
  PlanOptions o;
  o.gpuTypes = {"H100-80GB"};
  o.maxGpus = 256;
  auto p = plan(spec, servingCatalog(), o);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_FALSE(p->options[0].feasible);
  EXPECT_NE(p->options[0].why.find("can never run"), std::string::npos) << p->options[0].why;
  EXPECT_EQ(p->options[0].runs, 1);  // no search to 256 GPUs
}

}  // namespace
}  // namespace tessera::sim
