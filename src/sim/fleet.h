#pragma once
// The fleet simulation (docs/fleet-simulator.md): many deployments, each with its model, SLO,
// priority and traffic, on one fleet of nodes, under one of four policies:
//
//   whole-gpu     one replica per whole GPU, an HPA on GPU utilisation (duty cycle, target
//                 hpaUtilization), weights pulled from the remote store at every start, the
//                 placement engine without model affinity: the common set-up today;
//   time-slicing  the same, with NVIDIA time-slicing at 4 replicas per GPU: each replica gets a
//                 quarter of the memory and the whole GPU's speed when alone, and shares it
//                 round-robin with its busy neighbours (sim/serving_loop.h, "time-sliced");
//   binpack       HAMi-style sharing: each replica on the smallest quarter of a GPU its model
//                 fits on (memory and compute partitioned), the same HPA, no model affinity, no
//                 node cache;
//   tessera       Tessera's autoscaler and share rule, the default placement profile (model
//                 affinity included) and the node cache (host memory, then disk, then remote).
//
// Every policy runs through the same loop (sim/serving_loop.h): the real placement engine, the
// real autoscalers and reconciler, replicas with continuous batching, cold starts charged by
// where the weights are. A one-deployment fleet under `tessera` is `simulate serving`'s tessera
// run on the same trace and fleet (tested).
//
// Threading: runFleet builds everything per call; calls for different policies may run on
// different threads (the spec and the traces are only read).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sim/serving_loop.h"
#include "sim/serving_model.h"
#include "sim/serving_run.h"
#include "sim/serving_trace.h"

namespace tessera::sim {

inline constexpr std::array<std::string_view, 4> kFleetPolicyNames = {"whole-gpu", "time-slicing",
                                                                      "binpack", "tessera"};
bool isFleetPolicyName(std::string_view name);

struct FleetDeployment {
  std::string name;
  std::string model;    // a name in FleetSpec::models
  std::string gpuType;  // empty: the fleet's first node group's
  double sloTtftMs = 2000;
  int priority = 0;     // higher evicts strictly lower when nothing fits (every policy)
  int maxReplicas = 0;  // 0: as many as the fleet's GPUs of its type hold
  // The engine's max_model_len: longer requests are refused, and a replica's KV cache must hold
  // one request this long (vLLM will not start otherwise), which bounds how small a share can be.
  std::int64_t maxContextTokens = 32768;
  ServingTrace trace;   // its traffic, arrivals from 0
  std::string traffic;  // where the traffic came from, in words
};

struct FleetSpec {
  std::string name = "fleet";
  std::vector<loop::NodeGroup> nodes;
  std::vector<ServingModel> models;
  std::vector<FleetDeployment> deployments;
  LoadTimes load;
  int warmupSeconds = 300;  // each trace's lead-in (ServingOptions::warmupSeconds)
  int sampleSeconds = 60;   // the fleet's utilisation time line
  double hpaUtilization =
      0.6;             // whole-gpu, time-slicing, binpack: the HPA's GPU-utilisation target
  int timeSlices = 4;  // time-slicing: replicas per GPU
  double timeSliceOverhead = 0.1;  // time-slicing: context-switch cost when neighbours are busy
  // Price per GPU-hour by GPU type (docs/fleet-simulator.md, "Prices"); types not listed use
  // kDefaultGpuPrices, then 1.
  std::map<std::string, double> pricePerGpuHour;
  std::string source;  // what the traffic was built from, in words
};

// On-demand list prices per GPU-hour the report uses unless told otherwise (USD; the common
// cloud list prices of 8-GPU instances divided by 8, rounded).
double defaultGpuPrice(std::string_view gpuType);

// The models `tessera simulate fleet` knows by name (single-GPU, BF16): llama-3.2-1b,
// llama-3.2-3b, llama-3.1-8b, qwen2.5-14b, gemma-2-27b; architecture figures from their
// published configurations.
std::vector<ServingModel> builtinFleetModels();

// The default experiment (docs/fleet-simulator.md, "The default experiment"): from the traces
// under `dataDir` when they are there (Azure LLM 2023 conversation at several rates and phase
// shifts; GenTD26 per-container QPS shapes; GenTD26's LoRA trace, its `loraModels` most
// requested checkpoints each a model of its own), else a built-in synthetic fleet of the same
// shape. `spanSeconds` is every deployment's measured hour; `nodes` nodes of 8 H100-80GB.
struct DefaultFleetOptions {
  std::string dataDir = "../shared/data";
  double spanSeconds = 3600;
  int nodes = 8;
  int loraModels = 16;
  // The LoRA trace's busiest window of spanSeconds x this is replayed over the span (24: a day
  // into an hour). Compressing its 23 days whole would turn a user's batch of jobs minutes
  // apart into a burst within a second.
  double loraSpeedup = 24;
  double rateScale = 1;  // every deployment's request rate x this
  std::uint64_t seed = 1;
};
Result<FleetSpec> defaultFleet(const DefaultFleetOptions& options);

// A fleet of your own (docs/fleet-simulator.md, "Fleet file"): nodes, extra models, prices,
// load speeds and deployments with their traffic; trace paths relative to `baseDir`. Every
// error names the file, line and field.
Result<FleetSpec> parseFleetYaml(const std::string& text, const std::string& source,
                                 const std::string& baseDir, const model::GpuCatalog& catalog);
Result<FleetSpec> loadFleetFile(const std::string& path, const model::GpuCatalog& catalog);

// A trace at `rate` times its own request rate, started `shiftSeconds` into itself (wrapping
// round: the trace repeats with its span, or with spanSeconds when it is shorter), cut to
// [0, spanSeconds): a rate below 1 keeps each request with that probability (the shape stays),
// a rate above 1 compresses time and repeats the trace to fill the span. Fails when that would
// make more than 20 million requests. Deterministic for a seed.
Result<ServingTrace> reshapeTrace(const ServingTrace& trace, double rate, double shiftSeconds,
                                  double spanSeconds, std::uint64_t seed, std::string name);

struct Distribution {
  int count = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
Distribution distributionOf(std::vector<double> values);

struct FleetDeploymentResult {
  std::string name;
  std::string model;
  double sloTtftMs = 0;
  int priority = 0;
  ServingPolicyResult run;  // run.policy is the deployment's name
};

struct FleetPolicyResult {
  std::string policy;
  std::vector<FleetDeploymentResult> deployments;
  int requests = 0;
  int sloMet = 0;
  double sloAttainment = 0;          // over every request of every deployment
  int deploymentsMeetingTarget = 0;  // deployments at or above sloTarget
  double minDeploymentAttainment = 0;
  // GPU-hours: cards holding at least one replica, over the measured window (a shared card is
  // one card); replicaGpuHours: each replica's share x its time (what sharing hands out).
  double gpuHours = 0;
  double replicaGpuHours = 0;
  double cost = 0;   // gpuHours by type x price
  int peakGpus = 0;  // most cards in use at once: the fleet this policy needs
  double meanGpus = 0;
  // Time averages over the cards in use (fleet samples): memory the models and their running
  // requests use, memory the engines hold, tensor activity.
  double meanMemoryUtilization = 0;
  double meanMemoryAllocated = 0;
  double meanComputeUtilization = 0;
  int coldStarts = 0;
  std::array<int, 3> coldStartsByTier{};  // host memory, local disk, remote
  std::array<Distribution, 3> coldStartSeconds{};
  Distribution coldStartAll;
  int evictions = 0;
  int placementFailures = 0;
  double pendingReplicaSeconds = 0;
  double ttftP99Ms = 0;  // the worst deployment's
  std::vector<loop::FleetSample> timeline;
  double wallSeconds = 0;
};

struct FleetRunOptions {
  double sloTarget = 0.99;
};

Result<FleetPolicyResult> runFleet(const FleetSpec& spec, const model::GpuCatalog& catalog,
                                   std::string_view policy, const FleetRunOptions& options = {});

// A deployment's ServingOptions in a fleet (its model, SLO, GPU type; the fleet's load times,
// lead-in; the fleet's GPUs of its type as the limit). Fails for an unknown model or GPU type.
Result<ServingOptions> fleetServingOptions(const FleetSpec& spec, const FleetDeployment& d);

}  // namespace tessera::sim
