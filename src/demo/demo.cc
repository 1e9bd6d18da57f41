#include "demo/demo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_api.h"

namespace tessera::demo {

using nlohmann::json;

namespace {

// ---- the fleet ------------------------------------------------------------------------------

struct NodeShape {
  std::string_view name;
  std::string_view gpuType;
  int gpus;
  bool nvlink;
  bool mig;
  std::string_view zone;
};

constexpr NodeShape kNodes[] = {
    {"h100-a", "H100-80GB", 4, true, false, "zone-a"},
    {"h100-b", "H100-80GB", 4, true, false, "zone-b"},
    {"a100-a", "A100-80GB", 4, true, false, "zone-a"},
    {"a100-mig", "A100-40GB", 2, false, true, "zone-b"},
    {"l4-a", "L4", 4, false, false, "zone-a"},
    {"l4-b", "L4", 2, false, false, "zone-b"},
};

constexpr std::string_view kNodeNames[] = {"h100-a",   "h100-b", "a100-a",
                                           "a100-mig", "l4-a",   "l4-b"};

json nodeBody(const NodeShape& n) {
  json gpus = json::array();
  for (int i = 0; i < n.gpus; ++i) {
    json g = {{"type", n.gpuType}};
    if (n.nvlink) g["nvlinkGroup"] = 0;
    if (n.mig) g["migEnabled"] = true;
    gpus.push_back(std::move(g));
  }
  return {{"name", n.name},
          {"cpu", 16 * n.gpus + 32},
          {"hostMemory", std::to_string(128 * n.gpus + 256) + "Gi"},
          {"labels", {{"pool", "inference"}, {"zone", n.zone}}},
          {"gpus", std::move(gpus)}};
}

// Model profiles: per-GPU memory = weights + KV cache + overhead, spread over the GPUs of a
// replica (docs/configuration.md).
json modelBodies() {
  return json::array({
      {{"name", "llama-8b"},
       {"weights", "16GB"},
       {"kvCache", "8Gi"},
       {"overhead", "2Gi"},
       {"computeMilli", 300},
       {"memoryBandwidthGBps", 600},
       {"sharing", {"shared", "exclusive"}}},
      {{"name", "mistral-7b"},
       {"weightsMib", 13824},
       {"kvCacheMib", 3072},
       {"overheadMib", 1536},
       {"computeMilli", 250},
       {"memoryBandwidthGBps", 300},
       {"sharing", {"shared", "exclusive"}}},
      {{"name", "llama-70b-fp8"},
       {"weights", "70Gi"},
       {"kvCache", "16Gi"},
       {"overhead", "4Gi"},
       {"gpusPerReplica", 2},
       {"nvlinkRequired", true},
       {"computeMilli", 900},
       {"sharing", {"exclusive"}},
       {"priority", 10}},
      {{"name", "bge-large"},
       {"weightsMib", 1280},
       {"kvCacheMib", 0},
       {"overheadMib", 1024},
       {"computeMilli", 100},
       {"sharing", {"mig"}}},
  });
}

// A deployment and the traffic the demo sends it.
struct Workload {
  std::string_view deployment;
  std::string_view model;
  int minReplicas, maxReplicas;
  std::string_view recommender;
  double peakRatePerSec;  // requests per second at the day's peak
  double serviceMs;       // mean time a request holds a slot
  int maxConcurrency;     // slots per replica
  double phase;           // fraction of a day by which this deployment's day lags
};

constexpr Workload kWorkloads[] = {
    {"chat", "llama-8b", 2, 12, "hpa", 55, 4000, 32, 0.0},
    {"code", "mistral-7b", 1, 8, "hpa", 24, 3000, 24, 0.08},
    {"reasoning", "llama-70b-fp8", 1, 4, "littles-law", 6.5, 8000, 16, 0.15},
    {"embed", "bge-large", 1, 6, "hpa", 220, 50, 4, 0.04},
};

const Workload* findWorkload(std::string_view deployment) {
  for (const Workload& w : kWorkloads) {
    if (w.deployment == deployment) return &w;
  }
  return nullptr;
}

json deploymentBody(const Workload& w) {
  json autoscaling = {{"recommender", w.recommender},
                      {"syncPeriodSeconds", 5},
                      {"scaleUpStabilizationSeconds", 0},
                      {"scaleDownStabilizationSeconds", 15}};
  if (w.recommender == "hpa") {
    // Aim at 60 % of each replica's slots busy; a queue of more than 2 scales up as well.
    autoscaling["args"] = {{"runningPerReplica", 0.6 * w.maxConcurrency}, {"queuePerReplica", 2}};
  } else {
    autoscaling["args"] = {{"targetUtilization", 0.7}};
  }
  return {{"name", w.deployment},
          {"model", w.model},
          {"version", "demo"},
          {"minReplicas", w.minReplicas},
          {"maxReplicas", w.maxReplicas},
          {"autoscaling", std::move(autoscaling)}};
}

// SplitMix64: a small, fully specified generator, so the noise is the same on every platform
// (std:: distributions are not).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform number in [-1, 1] for (seed, stream, step).
double noiseAt(std::uint64_t seed, std::uint64_t stream, std::int64_t step) {
  const std::uint64_t bits =
      mix(seed ^ mix(stream * 0x100000001b3ull ^ static_cast<std::uint64_t>(step)));
  return static_cast<double>(bits >> 11) / static_cast<double>(std::uint64_t{1} << 53) * 2.0 - 1.0;
}

// How long a replica takes to load: engine start plus its weights at the node's cache speed.
Millis loadMs(std::int64_t estimateMib) {
  return 3000 + estimateMib / 4;  // ~4 GiB/s from the node-local cache
}

}  // namespace

// ---- FastClock ------------------------------------------------------------------------------

namespace {
Millis steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

FastClock::FastClock(double speed) : speed_(speed), startMs_(steadyMs()) {}

Millis FastClock::nowMs() const {
  return startMs_ + static_cast<Millis>(static_cast<double>(steadyMs() - startMs_) * speed_);
}

// ---- seeding ---------------------------------------------------------------------------------

std::span<const std::string_view> nodeNames() {
  return kNodeNames;
}

int gpuCount() {
  int n = 0;
  for (const NodeShape& s : kNodes) n += s.gpus;
  return n;
}

Result<void> seedFleet(api::ControlPlane& plane) {
  if (!plane.listNodes()["nodes"].empty()) {
    return fail(Error::precondition("the demo seeds an empty store; this one already holds nodes"));
  }
  auto named = [](std::string what, const Error& e) {
    return Error{e.code, "demo: " + what + ": " + e.message};
  };
  for (const NodeShape& n : kNodes) {
    if (auto r = api::json_api::registerNode(plane, nodeBody(n)); !r) {
      return fail(named("node " + std::string(n.name), r.error()));
    }
  }
  for (const json& m : modelBodies()) {
    if (auto r = api::json_api::putModel(plane, m); !r) {
      return fail(named("model " + m["name"].get<std::string>(), r.error()));
    }
  }
  for (const Workload& w : kWorkloads) {
    if (auto r = api::json_api::putDeployment(plane, deploymentBody(w)); !r) {
      return fail(named("deployment " + std::string(w.deployment), r.error()));
    }
  }
  return {};
}

// ---- the simulation --------------------------------------------------------------------------

Simulation::Simulation(DemoOptions options) : options_(options) {}

double Simulation::arrivalRatePerSec(std::string_view deployment, Millis nowMs) const {
  const Workload* w = findWorkload(deployment);
  if (w == nullptr) return 0;
  const Millis since = startMs_ < 0 ? 0 : nowMs - startMs_;
  const double day = static_cast<double>(since) / static_cast<double>(options_.dayMs) - w->phase;
  // Night at 10 % of the peak, noon at the peak.
  const double shape = 0.1 + 0.9 * (1 - std::cos(2 * std::numbers::pi * day)) / 2;
  const auto index = static_cast<std::uint64_t>(w - kWorkloads);
  const double noise = options_.noise * noiseAt(options_.seed, index, since / 1000);
  return std::max(0.0, w->peakRatePerSec * shape * (1 + noise));
}

StepReport Simulation::step(api::ControlPlane& plane, Millis nowMs) {
  if (startMs_ < 0) startMs_ = nowMs;
  StepReport report;
  auto count = [&report](const auto& result) {
    if (!result) ++report.refused;
  };

  // Where each replica is in its life, as its deployment sees it.
  std::map<std::string, std::string, std::less<>> phases;  // replica → ready/loading/draining
  const json deployments = plane.listDeployments()["deployments"];
  for (const json& d : deployments) {
    for (const json& r : d["replicas"]) {
      phases[r["replica"].get<std::string>()] = r["phase"].get<std::string>();
    }
  }

  // 1. Weights finish loading.
  json replicas = plane.listReplicas()["replicas"];
  for (json& r : replicas) {
    if (r["phase"] != "reserved") continue;
    std::int64_t mib = 0;
    for (const json& g : r["gpus"]) mib = std::max(mib, g["estimateMib"].get<std::int64_t>());
    if (nowMs - r["placedAtMs"].get<Millis>() < loadMs(mib)) continue;
    const std::string id = r["replica"].get<std::string>();
    if (auto done = plane.replicaLoaded(id); done) {
      r["phase"] = "loaded";
      ++report.loaded;
      if (auto p = phases.find(id); p != phases.end() && p->second == "loading")
        p->second = "ready";
    } else {
      ++report.refused;
    }
  }

  // 2. Engines and routers: the traffic spread evenly over the ready replicas.
  std::map<std::string, double, std::less<>> busy;  // replica → GPU utilisation of its share
  for (const json& d : deployments) {
    const std::string name = d["name"].get<std::string>();
    const Workload* w = findWorkload(name);
    if (w == nullptr) continue;
    const double rate = arrivalRatePerSec(name, nowMs);
    const double demand = rate * w->serviceMs / 1000;  // requests in flight (Little's law)
    std::vector<std::string> readyIds;
    for (const json& r : d["replicas"]) {
      const std::string id = r["replica"].get<std::string>();
      const std::string& phase = phases[id];
      if (phase == "ready") readyIds.push_back(id);
    }
    const double cap = w->maxConcurrency;
    const double share = readyIds.empty() ? 0 : demand / static_cast<double>(readyIds.size());
    const double running = std::min(cap, share);
    const double waiting = share - running;
    for (const json& r : d["replicas"]) {
      const std::string id = r["replica"].get<std::string>();
      const std::string& phase = phases[id];
      json signals;
      if (phase == "ready") {
        const double load = running / cap;
        signals = {{"waiting", std::round(waiting * 10) / 10},
                   {"running", std::round(running * 10) / 10},
                   {"kvCacheUsage", std::min(1.0, 0.05 + 0.85 * load)},
                   {"gpuUtilization", std::min(1.0, 0.05 + 0.9 * load)},
                   {"maxConcurrency", w->maxConcurrency}};
        busy[id] = std::min(1.0, 0.05 + 0.9 * load);
      } else if (phase.starts_with("draining")) {
        // No new requests reach a draining replica; its last ones finish at once here.
        signals = {{"waiting", 0}, {"running", 0}, {"kvCacheUsage", 0}, {"gpuUtilization", 0}};
        busy[id] = 0;
      } else {
        signals = {{"maxConcurrency", w->maxConcurrency}};
        busy[id] = 0.3;  // loading weights keeps the copy engines, not the SMs, busy
      }
      count(api::json_api::replicaSignals(plane, id, signals));
      ++report.signals;
    }
    json router = {{"arrivalRatePerSec", std::round(rate * 100) / 100},
                   {"meanServiceMs", w->serviceMs},
                   {"bufferedRequests", readyIds.empty() ? std::round(demand) : 0.0}};
    count(api::json_api::deploymentSignals(plane, name, router));
    ++report.signals;
  }

  // 3. Node agents: GPU memory used (the engines preallocate their estimate) and utilisation.
  struct Use {
    std::int64_t mib = 0;
    double util = 0;
    json perReplica = json::object();
  };
  std::map<std::string, Use, std::less<>> byGpu;  // "node/gpu" → use
  std::map<std::string, std::set<std::string>, std::less<>> modelsOn;
  for (const json& r : replicas) {
    const std::string id = r["replica"].get<std::string>();
    const std::string node = r["node"].get<std::string>();
    const bool exclusive = r["mode"] == "exclusive";
    if (r["phase"] == "loaded") modelsOn[node].insert(r["model"].get<std::string>());
    const auto b = busy.find(id);
    const double util = b == busy.end() ? (r["phase"] == "loaded" ? 0.05 : 0.3) : b->second;
    for (const json& g : r["gpus"]) {
      Use& u = byGpu[node + "/" + g["id"].get<std::string>()];
      const std::int64_t mib = g["estimateMib"].get<std::int64_t>();
      u.mib += mib;
      u.perReplica[id] = mib;
      u.util += util * (exclusive ? 1.0 : g["computeMilli"].get<double>() / 1000.0);
    }
  }
  const json nodes = plane.listNodes()["nodes"];
  for (const json& n : nodes) {
    const std::string node = n["name"].get<std::string>();
    json gpus = json::array();
    for (const json& g : n["gpus"]) {
      const std::string gid = g["id"].get<std::string>();
      const auto u = byGpu.find(node + "/" + gid);
      json t = {{"id", gid}, {"usedMib", 0}, {"utilization", 0.0}};
      if (u != byGpu.end()) {
        t["usedMib"] = std::min(u->second.mib, g["memoryMib"].get<std::int64_t>());
        t["utilization"] = std::round(std::min(1.0, u->second.util) * 1000) / 1000;
        t["replicaUsedMib"] = u->second.perReplica;
      }
      gpus.push_back(std::move(t));
    }
    json body = {{"gpus", std::move(gpus)}};
    std::set<std::string>& cached = cached_[node];
    const std::size_t before = cached.size();
    for (const std::string& m : modelsOn[node]) cached.insert(m);
    if (cached.size() != before) body["cachedModels"] = cached;
    count(api::json_api::heartbeat(plane, node, body));
    ++report.heartbeats;
  }
  return report;
}

}  // namespace tessera::demo
