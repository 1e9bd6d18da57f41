#pragma once
// Random clusters, deployments (placement-request templates) and telemetry for randomised
// tests and benchmarks of the scheduler.
//
// Every draw comes from one Rng (splitmix64, with its own integer helpers rather than
// std::*_distribution, whose output differs between standard libraries), so a seed
// reproduces a case exactly on every platform. Seeds come from $TESSERA_SEED when set;
// $TESSERA_FUZZ_ITERATIONS sets how many cases a randomised test runs.
//
// Header-only on purpose: test binaries and benchmarks include it without a library, and it
// never links into production code. Threading: an Rng is owned by one thread.

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "model/inventory.h"
#include "model/mig.h"
#include "model/workload.h"
#include "sched/cluster_state.h"

namespace tessera::sched::testkit {

// ---- Seeds and iteration counts ------------------------------------------------------------

namespace internal {
// A malformed variable is fatal: silently running another seed than the one being
// reproduced would hide the failure it was set to find.
inline std::uint64_t parseEnvNumber(const char* name, const char* text) {
  std::string_view s(text);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || end != s.data() + s.size()) {
    std::fprintf(stderr, "%s=%s is not an unsigned integer\n", name, text);
    std::abort();
  }
  return value;
}
}  // namespace internal

// The master seed of a randomised test: $TESSERA_SEED when set, else a fresh random one.
inline std::uint64_t fuzzSeed() {
  if (const char* env = std::getenv("TESSERA_SEED"); env != nullptr && *env != '\0') {
    return internal::parseEnvNumber("TESSERA_SEED", env);
  }
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

// Cases a randomised test runs: $TESSERA_FUZZ_ITERATIONS when set, else `fallback`.
inline int fuzzIterations(int fallback) {
  if (const char* env = std::getenv("TESSERA_FUZZ_ITERATIONS"); env != nullptr && *env != '\0') {
    const std::uint64_t n = internal::parseEnvNumber("TESSERA_FUZZ_ITERATIONS", env);
    return n > 100'000'000 ? 100'000'000 : static_cast<int>(n);
  }
  return fallback;
}

inline std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The seed of case `index` under `master`. Case 0 runs the master seed itself, so a failing
// case reproduces alone with TESSERA_SEED=<its seed> TESSERA_FUZZ_ITERATIONS=1.
inline std::uint64_t caseSeed(std::uint64_t master, int index) {
  if (index == 0) return master;
  std::uint64_t x = master ^ (static_cast<std::uint64_t>(index) * 0xd1b54a32d192ed03ULL);
  return splitmix64(x);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() { return splitmix64(state_); }
  // Uniform in [lo, hi] (inclusive); lo when hi < lo.
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(next() % span);
  }
  int upTo(int hi) { return static_cast<int>(between(0, hi)); }  // [0, hi]
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[static_cast<std::size_t>(between(0, static_cast<std::int64_t>(items.size()) - 1))];
  }
  // Index drawn with the given relative weights.
  std::size_t weighted(std::initializer_list<int> weights) {
    int total = 0;
    for (int w : weights) total += w;
    int x = static_cast<int>(between(0, total - 1));
    std::size_t i = 0;
    for (int w : weights) {
      if (x < w) return i;
      x -= w;
      ++i;
    }
    return i - 1;
  }

 private:
  std::uint64_t state_;
};

// ---- Vocabulary shared by nodes and requests -----------------------------------------------

// Labels, taints and tolerations are drawn from small pools so that selectors and
// tolerations match some nodes and miss others.
inline const std::vector<std::pair<std::string, std::string>>& labelPool() {
  static const std::vector<std::pair<std::string, std::string>> kPool = {
      {"zone", "a"},     {"zone", "b"},     {"zone", "c"},
      {"pool", "serve"}, {"pool", "batch"}, {"tier", "gold"}};
  return kPool;
}

inline const std::vector<model::Taint>& taintPool() {
  static const std::vector<model::Taint> kPool = {{"dedicated", "llm", "NoSchedule"},
                                                  {"spot", "true", "PreferNoSchedule"},
                                                  {"maintenance", "", "NoExecute"},
                                                  {"vendor", "nvidia", "NoSchedule"}};
  return kPool;
}

inline const std::vector<model::Toleration>& tolerationPool() {
  static const std::vector<model::Toleration> kPool = {{"dedicated", "Equal", "llm", "NoSchedule"},
                                                       {"dedicated", "Equal", "other", ""},
                                                       {"spot", "Exists", "", ""},
                                                       {"maintenance", "Exists", "", "NoExecute"},
                                                       {"vendor", "Equal", "nvidia", ""},
                                                       {"", "Exists", "", ""}};
  return kPool;
}

// ---- Clusters ------------------------------------------------------------------------------

struct ClusterShape {
  int minNodes = 1;
  int maxNodes = 40;
  int maxGpusPerNode = 8;
  // Catalogue names nodes are built from; empty: every catalogue type.
  std::vector<std::string> gpuTypes;
  double migProbability = 0.5;        // a MIG-capable GPU is in MIG mode
  double mixedNodeProbability = 0.1;  // a node mixes GPU types
  double unhealthyGpuProbability = 0.04;
  double timeSlicingProbability = 0.15;
  double taintProbability = 0.15;
  double cordonedProbability = 0.05;
};

// A legal random layout of MIG instances for `type` (possibly empty), as a node declares it.
inline std::vector<model::MigInstanceSpec> randomMigLayout(Rng& rng, const model::GpuType& type) {
  std::vector<model::MigPlacement> layout;
  if (!type.migCapable()) return {};
  const int attempts = rng.upTo(rng.chance(0.3) ? 8 : 3);
  for (int i = 0; i < attempts; ++i) {
    const int profile = rng.upTo(static_cast<int>(type.migProfiles.size()) - 1);
    const auto legal = model::legalMigPlacements(type, profile, layout);
    if (!legal.empty()) layout.push_back(rng.pick(legal));
  }
  std::vector<model::MigInstanceSpec> out;
  for (const auto& m : layout) {
    out.push_back({type.migProfiles[static_cast<std::size_t>(m.profile)].name, m.start});
  }
  return out;
}

inline model::GpuSpec randomGpu(Rng& rng, const model::GpuCatalog& catalog,
                                const std::string& typeName, int index, int gpuCount,
                                const ClusterShape& shape) {
  const model::GpuType& type = *catalog.find(typeName);
  model::GpuSpec g;
  g.id = std::to_string(index);
  g.type = rng.chance(0.1) && !type.aliases.empty() ? rng.pick(type.aliases) : type.name;
  if (rng.chance(0.1)) g.computeMilli = static_cast<std::int32_t>(rng.between(100, 1000));
  // Topology: unknown, one domain, halves or pairs.
  switch (rng.weighted({1, 3, 3, 2})) {
    case 0:
      g.nvlinkGroup = -1;
      break;
    case 1:
      g.nvlinkGroup = 0;
      break;
    case 2:
      g.nvlinkGroup = index * 2 / std::max(gpuCount, 1);
      break;
    default:
      g.nvlinkGroup = index / 2;
      break;
  }
  if (!type.nvlinkGBps && !type.opaque) g.nvlinkGroup = -1;  // no NVLink on this form factor
  g.numaNode = rng.chance(0.1) ? -1 : index * rng.between(1, 2) / std::max(gpuCount, 1);
  g.pcieSwitch = index / 4;
  g.migEnabled = type.migCapable() && rng.chance(shape.migProbability);
  if (g.migEnabled) g.migInstances = randomMigLayout(rng, type);
  if (!g.migEnabled && rng.chance(shape.timeSlicingProbability)) {
    g.timeSlicingReplicas = static_cast<int>(rng.between(1, 4));
  }
  g.healthy = !rng.chance(shape.unhealthyGpuProbability);
  return g;
}

inline model::NodeSpec randomNode(Rng& rng, const model::GpuCatalog& catalog,
                                  const std::string& name, const ClusterShape& shape) {
  std::vector<std::string> types = shape.gpuTypes;
  if (types.empty()) types = catalog.names();
  model::NodeSpec n;
  n.name = name;
  n.cpuMilli = rng.chance(0.1) ? rng.between(0, 4'000) : rng.between(8, 128) * 1'000;
  n.hostMemoryMib = rng.chance(0.1) ? rng.between(0, 16 * 1024) : rng.between(64, 1024) * 1024;
  const int gpus = rng.chance(0.04) ? 0 : static_cast<int>(rng.between(1, shape.maxGpusPerNode));
  const std::string mainType = rng.pick(types);
  const bool mixed = rng.chance(shape.mixedNodeProbability);
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back(randomGpu(rng, catalog, mixed ? rng.pick(types) : mainType, i, gpus, shape));
  }
  for (const auto& [key, value] : labelPool()) {
    if (rng.chance(0.3) && !n.labels.contains(key)) n.labels[key] = value;
  }
  if (rng.chance(shape.taintProbability)) {
    for (int i = rng.upTo(1); i >= 0; --i) n.taints.push_back(rng.pick(taintPool()));
  }
  n.healthy = !rng.chance(0.04);
  n.cordoned = rng.chance(shape.cordonedProbability);
  if (rng.chance(0.2)) n.rank = rng.between(0, 10);
  return n;
}

inline std::vector<model::NodeSpec> randomCluster(Rng& rng, const model::GpuCatalog& catalog,
                                                  const ClusterShape& shape) {
  // Mostly small clusters (cheap, and every node matters), sometimes the full range.
  const int hi = rng.chance(0.7) ? std::min(shape.maxNodes, shape.minNodes + 7) : shape.maxNodes;
  const int count = static_cast<int>(rng.between(shape.minNodes, hi));
  std::vector<model::NodeSpec> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back(randomNode(rng, catalog, "node-" + std::to_string(i), shape));
  }
  return nodes;
}

// ---- Deployments (request templates) -------------------------------------------------------

struct RequestShape {
  double invalidProbability = 0.02;
  double constraintProbability = 0.15;  // for each of gpuTypes, selector, tolerations
  int maxPriority = 3;
  // Relative weights of per-GPU memory 0-4, 4-16, 16-48, 48-100 and 100-160 GiB.
  std::array<int, 5> sizeWeights = {3, 6, 4, 2, 1};
  std::int32_t maxComputeMilli = 700;  // per GPU, for most requests
  // MIG profile floors requests may name (profiles of several cards, and one of none).
  std::vector<std::string> migProfiles = {"1g.5gb",  "1g.10gb", "2g.20gb", "3g.40gb", "1g.6gb",
                                          "2g.12gb", "1g.18gb", "7g.80gb", "bogus"};
};

// A request template with an empty replicaId: replicas of one deployment share everything
// else, which is what lets the batch planner reuse verdicts between them.
inline model::PlacementRequest randomDeployment(Rng& rng, const model::GpuCatalog& catalog,
                                                const std::string& name,
                                                const RequestShape& shape) {
  model::PlacementRequest r;
  model::ModelProfile& m = r.model;
  m.name = name;
  static constexpr int kGpuCounts[] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 4, 4, 5, 6, 7, 8, 8};
  m.gpusPerReplica = kGpuCounts[rng.upTo(static_cast<int>(std::size(kGpuCounts)) - 1)];
  // Memory per GPU before the safety factor: tiny, small, medium, large or huge.
  static constexpr std::int64_t kSizesMib[] = {0,         4 * 1024,   16 * 1024,
                                               48 * 1024, 100 * 1024, 160 * 1024};
  const auto& w = shape.sizeWeights;
  const std::size_t size = rng.weighted({w[0], w[1], w[2], w[3], w[4]});
  const std::int64_t perGpu = rng.between(kSizesMib[size], kSizesMib[size + 1]);
  const std::int64_t total = perGpu * std::max(m.gpusPerReplica, 1);
  m.overheadMib = std::min<std::int64_t>(total, rng.between(0, 2048));
  m.kvCacheMib = rng.between(0, (total - m.overheadMib) / 2);
  m.weightsMib = total - m.overheadMib - m.kvCacheMib;
  m.computeMilli =
      rng.chance(0.15) ? 0 : static_cast<std::int32_t>(rng.between(10, shape.maxComputeMilli));
  if (rng.chance(0.05)) m.computeMilli = 1000;
  m.memoryBandwidthGBps = rng.chance(0.6) ? 0.0 : static_cast<double>(rng.between(10, 1600));
  m.nvlinkRequired = rng.chance(0.3);
  m.numaAligned = rng.chance(0.2);
  m.priority = rng.upTo(shape.maxPriority);
  static constexpr model::SharingModes kModes[] = {7, 7, 7, 2, 1, 4, 6, 5, 3};
  m.sharing = kModes[rng.upTo(static_cast<int>(std::size(kModes)) - 1)];
  if (rng.chance(0.2)) m.migProfile = rng.pick(shape.migProfiles);
  m.cpuMilli = rng.chance(0.5) ? 0 : rng.between(100, 8'000);
  m.hostMemoryMib = rng.chance(0.5) ? 0 : rng.between(1, 64) * 1024;

  if (rng.chance(shape.constraintProbability)) {
    const auto names = catalog.names();
    for (int i = rng.upTo(1); i >= 0; --i) {
      const model::GpuType& t = *catalog.find(rng.pick(names));
      r.gpuTypes.push_back(rng.chance(0.2) && !t.aliases.empty() ? rng.pick(t.aliases) : t.name);
    }
    if (rng.chance(0.1)) r.gpuTypes.push_back("B200-not-in-catalogue");
  }
  if (rng.chance(shape.constraintProbability)) {
    const auto& [key, value] = rng.pick(labelPool());
    r.nodeSelector[key] = value;
  }
  if (rng.chance(shape.constraintProbability)) {
    for (int i = rng.upTo(2); i >= 0; --i) r.tolerations.push_back(rng.pick(tolerationPool()));
  }
  r.deployment = rng.chance(0.8) ? name : "";

  if (rng.chance(shape.invalidProbability)) {
    switch (rng.upTo(3)) {
      case 0:
        m.gpusPerReplica = rng.chance(0.5) ? -1 : 17;
        break;
      case 1:
        m.weightsMib = -1;
        break;
      case 2:
        m.computeMilli = 1001;
        break;
      default:
        m.sharing = 0;
        break;
    }
  }
  return r;
}

// ---- Telemetry -----------------------------------------------------------------------------

// What a node agent could report for one live GPU: per replica a usage around its estimate
// (sometimes above its reservation), foreign usage from other processes, sometimes a name
// that is not on the GPU, sometimes no attribution at all, rarely an unhealthy GPU.
inline GpuTelemetry randomTelemetry(Rng& rng, const ClusterState& state, GpuId gpu) {
  const GpuRecord& g = state.gpu(gpu);
  GpuTelemetry t;
  t.node = state.node(g.node).spec.name;
  t.gpuId = g.spec.id;
  t.utilizationMilli = static_cast<std::int32_t>(rng.between(0, 1000));
  t.healthy = !rng.chance(0.03);
  const bool attribute = rng.chance(0.75);
  std::int64_t used =
      rng.chance(0.5) ? 0 : rng.between(0, std::max<std::int64_t>(g.spec.memoryMib / 8, 1));
  for (ReplicaId r : g.replicas) {
    const ReplicaRecord& rec = state.replica(r);
    for (const GpuAssignment& a : rec.placement.gpus) {
      if (a.gpu != gpu) continue;
      // Nothing yet (loading), around the estimate, or more than was reserved for it.
      const std::int64_t usage =
          rng.chance(0.15)  ? 0
          : rng.chance(0.6) ? rng.between(a.estimateMib / 2, a.reservedMib)
                            : rng.between(a.reservedMib, a.reservedMib + a.reservedMib / 2);
      used += usage;
      if (attribute && rng.chance(0.85)) t.replicaUsedMib[rec.placement.replicaId] = usage;
    }
  }
  if (attribute && rng.chance(0.1)) t.replicaUsedMib["not-on-this-gpu"] = rng.between(0, 4096);
  t.usedMib = used;
  return t;
}

// ---- What a state holds now ------------------------------------------------------------

// The ids of the replicas the books hold, in record order.
inline std::vector<std::string> liveReplicaIds(const ClusterState& state) {
  std::vector<std::string> ids;
  for (const auto& r : state.replicas()) {
    if (!r.removed) ids.push_back(r.placement.replicaId);
  }
  return ids;
}
// The nodes not removed, in id order.
inline std::vector<NodeId> liveNodes(const ClusterState& state) {
  std::vector<NodeId> ids;
  for (NodeId n = 0; n < static_cast<NodeId>(state.nodes().size()); ++n) {
    if (!state.node(n).removed) ids.push_back(n);
  }
  return ids;
}

}  // namespace tessera::sched::testkit
