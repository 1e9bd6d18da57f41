#include "sim/fleet.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "sim/fleet_traffic.h"
#include "sim/serving_stats.h"

namespace tessera::sim {
namespace {

constexpr Micros kUsPerSecond = 1'000'000;

ServingModel modelOf(std::string name, std::int64_t weightsMib, double parametersB, int layers,
                     int hidden, int kvHeads, int headDim) {
  ServingModel m;
  m.name = std::move(name);
  m.weightsMib = weightsMib;
  m.parametersB = parametersB;
  m.layers = layers;
  m.hiddenSize = hidden;
  // K and V, BF16.
  m.kvBytesPerToken = std::int64_t{layers} * kvHeads * headDim * 2 * 2;
  return m;
}

double seriesArea(const std::vector<QpsPoint>& s) {
  double area = 0;
  for (std::size_t i = 0; i + 1 < s.size(); ++i) area += s[i].qps * (s[i + 1].timeS - s[i].timeS);
  return area;
}

// A day-shaped series (a swell peaking at `peakHour` of 24, 1 to 4 x its trough).
std::vector<QpsPoint> syntheticDay(double peakHour) {
  std::vector<QpsPoint> s;
  for (int m = 0; m <= 24 * 60; m += 10) {
    const double h = m / 60.0;
    s.push_back({m * 60.0, 2.5 + 1.5 * std::cos((h - peakHour) / 24 * 2 * M_PI)});
  }
  return s;
}

const ServingModel* findModel(const FleetSpec& spec, std::string_view name) {
  for (const ServingModel& m : spec.models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

int gpusOfType(const FleetSpec& spec, std::string_view type) {
  int n = 0;
  for (const loop::NodeGroup& g : spec.nodes) {
    if (g.gpuType == type) n += g.nodes * g.gpusPerNode;
  }
  return n;
}

}  // namespace

Result<ServingTrace> reshapeTrace(const ServingTrace& t, double rate, double shiftSeconds,
                                  double spanSeconds, std::uint64_t seed, std::string name) {
  if (!(rate > 0) || !std::isfinite(rate)) return fail(Error::invalid("the rate must be > 0"));
  if (!(spanSeconds > 0) || !std::isfinite(spanSeconds) || !(shiftSeconds >= 0) ||
      !std::isfinite(shiftSeconds)) {
    return fail(Error::invalid("the span must be > 0 and the shift >= 0"));
  }
  ServingTrace out;
  out.name = std::move(name);
  if (t.requests.empty()) return out;
  const double span = spanSeconds * 1e6;  // microseconds
  const double compress = std::max(1.0, rate);
  const double keep = std::min(1.0, rate);
  // The trace repeats with its own span, or the window's when it is shorter (a short trace
  // plays once per window at rate 1), compressed by the rate above 1.
  const double source = std::max(static_cast<double>(t.spanUs()) + 1, span);
  const double period = source / compress;
  const double shift = std::fmod(shiftSeconds * 1e6, source) / compress;
  const double copies = std::ceil((span + shift) / period);
  constexpr double kMaxRequests = 2e7;
  if (copies * static_cast<double>(t.requests.size()) * keep > kMaxRequests) {
    return fail(Error::invalid(out.name + ": rate " + std::to_string(rate) + " over " +
                               std::to_string(static_cast<long long>(spanSeconds)) +
                               " s would make more than 20 million requests"));
  }
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution kept(keep);
  for (double k = 0; k < copies; ++k) {
    const double base = k * period - shift;
    for (const ServingRequest& r : t.requests) {
      const double at = base + static_cast<double>(r.arrivalUs) / compress;
      if (keep < 1 && !kept(rng)) continue;
      if (at < 0 || at >= span) continue;
      ServingRequest c = r;
      c.arrivalUs = static_cast<Micros>(std::llround(at));
      out.requests.push_back(std::move(c));
    }
  }
  std::stable_sort(
      out.requests.begin(), out.requests.end(),
      [](const ServingRequest& a, const ServingRequest& b) { return a.arrivalUs < b.arrivalUs; });
  return out;
}

bool isFleetPolicyName(std::string_view name) {
  return std::find(kFleetPolicyNames.begin(), kFleetPolicyNames.end(), name) !=
         kFleetPolicyNames.end();
}

double defaultGpuPrice(std::string_view type) {
  if (type == "H200-141GB") return 5.0;
  if (type == "H100-80GB") return 4.0;
  if (type == "A100-80GB") return 2.5;
  if (type == "A100-40GB") return 2.0;
  if (type == "L40S") return 1.5;
  if (type == "L4") return 0.8;
  return 1.0;
}

std::vector<ServingModel> builtinFleetModels() {
  return {
      modelOf("llama-3.2-1b", 2357, 1.24, 16, 2048, 8, 64),
      modelOf("llama-3.2-3b", 6130, 3.21, 28, 3072, 8, 128),
      ServingModel{},  // llama-3.1-8b
      modelOf("qwen2.5-14b", 28130, 14.7, 48, 5120, 8, 128),
      modelOf("gemma-2-27b", 51975, 27.2, 46, 4608, 16, 128),
  };
}

Distribution distributionOf(std::vector<double> v) {
  Distribution d;
  d.count = static_cast<int>(v.size());
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = nearestRank(v, 0.5);
  d.p90 = nearestRank(v, 0.9);
  d.p99 = nearestRank(v, 0.99);
  d.max = v.back();
  return d;
}

Result<FleetSpec> defaultFleet(const DefaultFleetOptions& o) {
  if (!(o.spanSeconds >= 600) || !std::isfinite(o.spanSeconds)) {
    return fail(Error::invalid("the span must be at least 600 seconds"));
  }
  if (o.nodes < 1) return fail(Error::invalid("the fleet needs at least one node"));
  if (o.loraModels < 0) return fail(Error::invalid("the checkpoint count must be >= 0"));
  if (!(o.rateScale > 0) || !std::isfinite(o.rateScale)) {
    return fail(Error::invalid("the rate scale must be a number > 0"));
  }
  FleetSpec spec;
  spec.name = "default";
  loop::NodeGroup g;
  g.namePrefix = "h100";
  g.gpuType = "H100-80GB";
  g.nodes = o.nodes;
  spec.nodes.push_back(g);
  spec.models = builtinFleetModels();
  namespace fs = std::filesystem;
  const std::string azure = o.dataDir + "/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv";
  const std::string gentd = o.dataDir + "/alibaba-gentd26-genai-serving";
  std::error_code ec;
  const bool shared = fs::exists(azure, ec) && fs::exists(gentd + "/qps.tar.gz", ec) &&
                      fs::exists(gentd + "/lora_request_trace.csv", ec);
  ServingTrace chat;
  if (shared) {
    auto t = readServingTrace(azure, ServingTraceFormat::kAzure);
    if (!t) return fail(t.error());
    chat = std::move(*t);
    spec.source = "Azure LLM 2023 conversation; Alibaba GenTD26 qps and lora_request_trace (" +
                  o.dataDir + ")";
  } else {
    chat = builtinChatTrace(o.seed);
    spec.source = "built-in synthetic traffic (no traces under " + o.dataDir + ")";
  }
  std::uint64_t seed = o.seed;
  // Chat-shaped services at several scales and phase shifts, on models of several sizes.
  struct Chat {
    const char* name;
    const char* model;
    double rate, shiftS, sloMs;
    int priority;
  };
  for (const Chat& c : {Chat{"chat", "llama-3.1-8b", 1.0, 0, 2000, 2},
                        Chat{"chat-eu", "llama-3.1-8b", 0.5, 1800, 2000, 1},
                        Chat{"assistant", "qwen2.5-14b", 0.4, 900, 2000, 1},
                        Chat{"summarize", "gemma-2-27b", 0.2, 2700, 4000, 0}}) {
    FleetDeployment d;
    d.name = c.name;
    d.model = c.model;
    d.sloTtftMs = c.sloMs;
    d.priority = c.priority;
    auto t = reshapeTrace(chat, c.rate * o.rateScale, c.shiftS, o.spanSeconds, ++seed, c.name);
    if (!t) return fail(t.error());
    d.trace = std::move(*t);
    char what[160];
    std::snprintf(what, sizeof what, "%s x%.2f, shifted %.0f s", chat.name.c_str(),
                  c.rate * o.rateScale, c.shiftS);
    d.traffic = what;
    spec.deployments.push_back(std::move(d));
  }
  // Services shaped like GenTD26's busiest containers (each one's QPS series stretched over the
  // span), the busiest at 2 requests/s and the others in proportion.
  std::vector<std::pair<std::string, std::vector<QpsPoint>>> shapes;
  if (shared) {
    auto byContainer = readQpsByContainer(gentd + "/qps.tar.gz", "Generative Requests");
    if (!byContainer) return fail(byContainer.error());
    for (auto& [id, s] : *byContainer) shapes.emplace_back(id, std::move(s));
    std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
      return seriesArea(a.second) > seriesArea(b.second);
    });
    if (shapes.size() > 4) shapes.resize(4);
  } else {
    for (double peak : {10.0, 14.0, 18.0, 22.0}) {
      shapes.emplace_back("synthetic-" + std::to_string(static_cast<int>(peak)),
                          syntheticDay(peak));
    }
  }
  const double busiest = shapes.empty() ? 1 : seriesArea(shapes.front().second);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    FleetDeployment d;
    d.name = "gen-" + std::to_string(i + 1);
    d.model = i % 2 == 0 ? "llama-3.2-3b" : "llama-3.2-1b";
    QpsShapeOptions qo;
    qo.spanSeconds = o.spanSeconds;
    qo.meanRatePerSec = 2.0 * o.rateScale * seriesArea(shapes[i].second) / busiest;
    qo.seed = ++seed;
    auto t = shapeTrace(shapes[i].second, chat, qo, d.name);
    if (!t) return fail(Error::invalid(d.name + ": " + t.error().message));
    d.trace = std::move(*t);
    d.traffic = "QPS shape of container " + shapes[i].first.substr(0, 8) + ", mean " +
                std::to_string(qo.meanRatePerSec).substr(0, 4) + " req/s";
    spec.deployments.push_back(std::move(d));
  }
  // The long tail: each checkpoint a model of its own (Llama-3.2-3B-sized weights), arrivals
  // from GenTD26's LoRA request trace compressed into the span.
  std::vector<std::pair<std::string, std::vector<double>>> tail;
  double tailSpan = o.spanSeconds;
  if (shared) {
    auto lora = readLoraTrace(gentd + "/lora_request_trace.csv");
    if (!lora) return fail(lora.error());
    // The busiest window of the trace (all checkpoints together), then its checkpoints by
    // volume within it.
    const double window = std::min(lora->spanSeconds, o.spanSeconds * o.loraSpeedup);
    std::vector<double> all;
    for (const auto& [id, a] : lora->arrivals) all.insert(all.end(), a.begin(), a.end());
    std::sort(all.begin(), all.end());
    double from = 0;
    std::size_t best = 0;
    for (std::size_t i = 0, j = 0; i < all.size(); ++i) {
      while (j < all.size() && all[j] < all[i] + window) ++j;
      if (j - i > best) {
        best = j - i;
        from = all[i];
      }
    }
    LoraTrace cut;
    for (const auto& [id, a] : lora->arrivals) {
      std::vector<double> in;
      for (double x : a) {
        if (x >= from && x < from + window) in.push_back(x - from);
      }
      if (!in.empty()) cut.arrivals.emplace(id, std::move(in));
    }
    for (const std::string& id : cut.byVolume()) {
      if (static_cast<int>(tail.size()) >= o.loraModels) break;
      tail.emplace_back(id, cut.arrivals.at(id));
    }
    tailSpan = window;
  } else {
    // Zipf-like volumes (the k-th model 1/k of the first's), Poisson arrivals.
    std::mt19937_64 rng(o.seed);
    for (int k = 1; k <= o.loraModels; ++k) {
      std::exponential_distribution<double> gap(2.0 / k);
      std::vector<double> a;
      for (double at = gap(rng); at < o.spanSeconds; at += gap(rng)) a.push_back(at);
      if (a.empty()) a.push_back(o.spanSeconds / 2);
      tail.emplace_back("S" + std::to_string(k), std::move(a));
    }
  }
  const ServingModel base = modelOf("llama-3.2-3b", 6130, 3.21, 28, 3072, 8, 128);
  // Replayed over the span at rate 1, then at the rate scale (thinned or repeated).
  const double compress = std::max(1e-9, tailSpan / o.spanSeconds);
  for (const auto& [id, arrivals] : tail) {
    ServingModel m = base;
    m.name = "llama-3.2-3b@" + id;
    spec.models.push_back(m);
    FleetDeployment d;
    d.name = "ckpt-" + id;
    d.model = m.name;
    auto t = traceFromArrivals(arrivals, compress, chat, ++seed, d.name);
    if (!t) return fail(t.error());
    // On the window's time line (traceFromArrivals starts at the first arrival), within the span.
    const double offsetUs = arrivals.front() / compress * 1e6;
    for (ServingRequest& r : t->requests) r.arrivalUs += static_cast<Micros>(offsetUs);
    ServingTrace window;
    window.name = d.name;
    for (ServingRequest& r : t->requests) {
      if (static_cast<double>(r.arrivalUs) < o.spanSeconds * 1e6) window.requests.push_back(r);
    }
    auto scaled = reshapeTrace(window, o.rateScale, 0, o.spanSeconds, seed, d.name);
    if (!scaled) return fail(scaled.error());
    d.trace = std::move(*scaled);
    if (d.trace.requests.size() < 2) continue;
    char what[160];
    std::snprintf(what, sizeof what, "checkpoint %s of GenTD26's LoRA trace, busiest %.0f h at %gx",
                  id.c_str(), tailSpan / 3600, tailSpan / o.spanSeconds * o.rateScale);
    d.traffic = what;
    spec.deployments.push_back(std::move(d));
  }
  return spec;
}

Result<ServingOptions> fleetServingOptions(const FleetSpec& spec, const FleetDeployment& d) {
  const ServingModel* m = findModel(spec, d.model);
  if (m == nullptr) {
    return fail(Error::invalid("deployment " + d.name + ": unknown model '" + d.model + "'"));
  }
  if (spec.nodes.empty()) return fail(Error::invalid("the fleet has no nodes"));
  ServingOptions o;
  o.model = *m;
  o.fleet.gpuType = d.gpuType.empty() ? spec.nodes.front().gpuType : d.gpuType;
  const int gpus = gpusOfType(spec, o.fleet.gpuType);
  if (gpus == 0) {
    return fail(
        Error::invalid("deployment " + d.name + ": the fleet has no " + o.fleet.gpuType + " GPUs"));
  }
  // The limit a deployment may grow to: the fleet's GPUs of its type (replicaCapacity).
  o.fleet.nodes = 1;
  o.fleet.gpusPerNode = gpus;
  o.load = spec.load;
  o.sloTtftMs = d.sloTtftMs;
  o.warmupSeconds = spec.warmupSeconds;
  o.maxContextTokens = d.maxContextTokens;
  o.minReplicaKvTokens = d.maxContextTokens;
  return o;
}

namespace {

// One deployment's set-up under a policy (its controller is kept alive by the caller).
struct Prepared {
  ServingTrace trace;  // with its lead-in, on the fleet's time line
  std::size_t firstCounted = 0;
  std::unique_ptr<ServingController> controller;
  loop::DeploymentSetup setup;
};

// The baselines' autoscaler: an HPA on GPU utilisation between 1 and the trace's peak demand in
// replicas of `sizing` (the static-peak estimate: what a team provisions maxReplicas for), at
// most `limit`.
Result<std::unique_ptr<ServingController>> hpaOnUtilization(const FleetSpec& spec,
                                                            const ServingTrace& leadIn,
                                                            const ReplicaPerf& sizing,
                                                            const ServingOptions& o, int limit) {
  scale::AutoscalerConfig c;
  c.recommender = "hpa";
  c.args = {{"gpuUtilization", spec.hpaUtilization}};
  c.minReplicas = 1;
  const std::vector<int> demand = replicaDemand(leadIn, sizing, o.demand);
  const int peak = *std::max_element(demand.begin(), demand.end());
  c.maxReplicas = std::clamp(peak, 1, std::max(1, limit));
  const int initial = o.warmStart ? demand.front() : 1;
  return makeAutoscaled(c, initial);
}

Result<Prepared> prepare(const FleetSpec& spec, const FleetDeployment& d,
                         const model::GpuCatalog& catalog, std::string_view policy,
                         Micros measuredFromUs) {
  auto opts = fleetServingOptions(spec, d);
  if (!opts) return fail(opts.error());
  ServingOptions& o = *opts;
  auto whole = servingPerf(catalog, o);
  if (!whole) return fail(Error::invalid("deployment " + d.name + ": " + whole.error().message));
  if (d.trace.requests.empty()) {
    return fail(Error::invalid("deployment " + d.name + ": its traffic has no requests"));
  }
  if (whole->kvCapacityTokens < d.maxContextTokens) {
    return fail(Error::invalid("deployment " + d.name + ": one " + o.fleet.gpuType + " holds " +
                               std::to_string(whole->kvCapacityTokens) + " tokens of " + d.model +
                               "'s KV cache, fewer than its maxContextTokens " +
                               std::to_string(d.maxContextTokens)));
  }
  Prepared p;
  const Micros ownLeadIn = leadInUs(d.trace, o.warmupSeconds);
  ServingTrace warmed = withLeadIn(d.trace, o.warmupSeconds);
  p.firstCounted = warmed.requests.size() - d.trace.requests.size();
  loop::DeploymentSetup& s = p.setup;
  s.name = d.name;
  s.deploymentKey = d.name;
  s.firstCounted = p.firstCounted;
  s.measuredFromUs = measuredFromUs;
  s.perf = *whole;
  s.priority = d.priority;
  std::optional<ShareChoice> choice;
  if (policy == "tessera") {
    auto c = chooseReplicaShare(warmed, ownLeadIn, *whole, o, "tessera");
    if (!c) return fail(c.error());
    choice = *c;
    auto controller = makeServingController("tessera", warmed, c->perf, o, c->share);
    if (!controller) return fail(controller.error());
    p.controller = std::move(*controller);
    s.shareRule = shareRuleFor("tessera", *whole, o);
    s.nodeCache = true;
  } else {
    double share = 1;
    if (policy == "time-slicing" || policy == "binpack") {
      // Time-slicing: 1/timeSlices of the card's memory (or the smallest multiple of it the
      // model fits on); binpack: the smallest quarter the model fits on.
      const double step = policy == "time-slicing" ? 1.0 / std::max(1, spec.timeSlices) : 0.25;
      for (double f = step; f < 1 - 1e-9; f += step) {
        const auto p = sharePerf(*whole, o.model, f);
        if (p && p->kvCapacityTokens >= d.maxContextTokens) {
          share = f;
          break;
        }
      }
    }
    auto c = fixedShare(*whole, o.model, share);
    if (!c) return fail(c.error());
    choice = *c;
    // Sized for the worst case, every neighbour busy: the share's speed.
    const ReplicaPerf sizing = choice->perf;
    if (policy == "time-slicing" && share < 1) {
      // Time-slicing partitions nothing but memory (by the engine's own setting): alone on the
      // card a replica runs at the whole GPU's speed.
      choice->perf.flopsPerSec = whole->flopsPerSec;
      choice->perf.bytesPerSec = whole->bytesPerSec;
      s.interference = loop::Interference::kTimeSliced;
      s.timeSliceOverhead = spec.timeSliceOverhead;
    }
    s.nodeCache = false;
    const int limit = replicaCapacity(o.fleet, choice->share);
    auto controller = hpaOnUtilization(spec, warmed, sizing, o,
                                       d.maxReplicas > 0 ? std::min(limit, d.maxReplicas) : limit);
    if (!controller) return fail(controller.error());
    p.controller = std::move(*controller);
  }
  s.share = choice->share;
  s.replicaPerf = choice->perf;
  s.replicaLimit = replicaCapacity(o.fleet, choice->share);
  if (d.maxReplicas > 0) s.replicaLimit = std::min(s.replicaLimit, d.maxReplicas);
  // Every deployment's measured window starts at the same instant.
  const Micros offset = measuredFromUs - ownLeadIn;
  for (ServingRequest& r : warmed.requests) r.arrivalUs += offset;
  p.trace = std::move(warmed);
  s.options = std::move(o);
  return p;
}

}  // namespace

Result<FleetPolicyResult> runFleet(const FleetSpec& spec, const model::GpuCatalog& catalog,
                                   std::string_view policy, const FleetRunOptions& options) {
  if (!isFleetPolicyName(policy)) {
    std::string known;
    for (auto n : kFleetPolicyNames) known += (known.empty() ? "" : ", ") + std::string(n);
    return fail(Error::invalid("unknown fleet policy '" + std::string(policy) +
                               "' (known: " + known + ")"));
  }
  if (spec.deployments.empty()) return fail(Error::invalid("the fleet has no deployments"));
  const auto started = std::chrono::steady_clock::now();
  Micros measuredFrom = 0;
  for (const FleetDeployment& d : spec.deployments) {
    measuredFrom = std::max(measuredFrom, leadInUs(d.trace, spec.warmupSeconds));
  }
  std::vector<Prepared> prepared;
  prepared.reserve(spec.deployments.size());
  for (const FleetDeployment& d : spec.deployments) {
    auto p = prepare(spec, d, catalog, policy, measuredFrom);
    if (!p) return fail(p.error());
    prepared.push_back(std::move(*p));
  }
  // One horizon for all: a deployment whose traffic ends early still holds its replicas.
  Micros horizon = 0;
  for (const Prepared& p : prepared) {
    horizon =
        std::max(horizon, p.trace.spanUs() + Micros{p.setup.options.tailSeconds} * kUsPerSecond);
  }
  std::vector<loop::DeploymentSetup> setups;
  for (Prepared& p : prepared) {
    p.setup.horizonUs = horizon;
    p.setup.trace = &p.trace;
    p.setup.controller = p.controller.get();
    setups.push_back(p.setup);
  }
  loop::ClusterOptions cluster;
  cluster.groups = spec.nodes;
  cluster.modelAffinity = policy == "tessera";
  cluster.fleetSampleSeconds = std::max(1, spec.sampleSeconds);
  cluster.measuredFromUs = measuredFrom;
  auto loopResult = loop::runLoop(catalog, cluster, std::move(setups));
  if (!loopResult) return fail(loopResult.error());

  FleetPolicyResult r;
  r.policy = std::string(policy);
  std::array<std::vector<double>, 3> loads;
  r.minDeploymentAttainment = 1;
  for (std::size_t i = 0; i < spec.deployments.size(); ++i) {
    const FleetDeployment& d = spec.deployments[i];
    ServingPolicyResult& run = loopResult->deployments[i];
    r.requests += run.requests;
    r.sloMet += run.sloMet;
    r.replicaGpuHours += run.gpuHours;
    r.coldStarts += run.coldStarts;
    for (std::size_t t = 0; t < 3; ++t) {
      r.coldStartsByTier[t] += run.coldStartsByTier[t];
      loads[t].insert(loads[t].end(), run.coldStartSeconds[t].begin(),
                      run.coldStartSeconds[t].end());
    }
    r.placementFailures += run.placementFailures;
    r.pendingReplicaSeconds += run.pendingReplicaSeconds;
    r.ttftP99Ms = std::max(r.ttftP99Ms, run.ttftP99Ms);
    if (run.sloAttainment >= options.sloTarget) ++r.deploymentsMeetingTarget;
    r.minDeploymentAttainment = std::min(r.minDeploymentAttainment, run.sloAttainment);
    run.timeline.clear();  // per-deployment time lines are not reported for a fleet
    r.deployments.push_back({d.name, d.model, d.sloTtftMs, d.priority, std::move(run)});
  }
  r.sloAttainment = r.requests > 0 ? static_cast<double>(r.sloMet) / r.requests : 0;
  std::vector<double> all;
  for (std::size_t t = 0; t < 3; ++t) {
    all.insert(all.end(), loads[t].begin(), loads[t].end());
    r.coldStartSeconds[t] = distributionOf(std::move(loads[t]));
  }
  r.coldStartAll = distributionOf(std::move(all));
  for (const auto& [type, hours] : loopResult->gpuHoursByType) {
    r.gpuHours += hours;
    const auto price = spec.pricePerGpuHour.find(type);
    r.cost += hours * (price != spec.pricePerGpuHour.end() ? price->second : defaultGpuPrice(type));
  }
  r.peakGpus = loopResult->peakGpusInUse;
  r.evictions = loopResult->evictions;
  double gpus = 0, used = 0, held = 0, compute = 0;
  for (const loop::FleetSample& f : loopResult->samples) {
    gpus += f.gpusInUse;
    used += f.memoryUsed * f.gpusInUse;
    held += f.memoryAllocated * f.gpusInUse;
    compute += f.compute * f.gpusInUse;
    r.peakGpus = std::max(r.peakGpus, f.gpusInUse);
  }
  if (!loopResult->samples.empty()) {
    r.meanGpus = gpus / static_cast<double>(loopResult->samples.size());
  }
  if (gpus > 0) {
    r.meanMemoryUtilization = used / gpus;
    r.meanMemoryAllocated = held / gpus;
    r.meanComputeUtilization = compute / gpus;
  }
  r.timeline = std::move(loopResult->samples);
  r.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return r;
}

}  // namespace tessera::sim
