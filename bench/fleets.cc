#include "fleets.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "model/mig.h"
#include "sched/mig_choice.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kGib = 1024;
constexpr int kGpusPerNode = 8;

// splitmix64: tiny, fast and identical on every standard library (std::*_distribution is not).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  // Index drawn in proportion to `weights`.
  template <std::size_t N>
  std::size_t pick(const std::array<int, N>& weights) {
    int total = 0;
    for (int w : weights) total += w;
    int r = below(total);
    for (std::size_t i = 0; i < N; ++i) {
      if (r < weights[i]) return i;
      r -= weights[i];
    }
    return N - 1;
  }

 private:
  std::uint64_t state_;
};

// ---- Synthetic fleet ------------------------------------------------------------------------

struct NodeKind {
  const char* type;
  bool nvswitch;  // SXM board: all 8 GPUs in one NVLink domain
  bool migCapable;
  std::int64_t cpuMilli;
  std::int64_t hostMemoryMib;
};
constexpr std::array<NodeKind, 8> kNodeKinds{{
    {"H200-141GB", true, true, 192'000, 2048 * kGib},
    {"H100-80GB", true, true, 192'000, 2048 * kGib},
    {"A100-80GB", true, true, 128'000, 1024 * kGib},
    {"A100-40GB", true, true, 128'000, 1024 * kGib},
    {"L40S", false, false, 128'000, 1024 * kGib},
    {"A10", false, false, 64'000, 512 * kGib},
    {"L4", false, false, 64'000, 512 * kGib},
    {"T4", false, false, 64'000, 256 * kGib},
}};
constexpr std::array<int, 8> kNodeKindWeights{5, 20, 20, 15, 15, 10, 10, 5};

// Replicas already running before the benchmarked decision: estimate per GPU, GPUs, compute.
struct FillModel {
  const char* name;
  std::int64_t estimateMib;
  int gpus;
  std::int32_t computeMilli;
};
constexpr std::array<FillModel, 6> kFillModels{{
    {"llama-3.2-1b", 3 * kGib, 1, 100},
    {"qwen2.5-3b", 7 * kGib, 1, 150},
    {"mistral-7b", 16 * kGib, 1, 250},
    {"llama-3.1-8b", 18 * kGib, 1, 300},
    {"phi-3-medium-14b", 30 * kGib, 1, 400},
    {"llama-2-13b-tp2", 15 * kGib, 2, 350},
}};

model::NodeSpec makeNode(int index, const NodeKind& kind, Rng& rng) {
  model::NodeSpec node;
  char name[32];
  std::snprintf(name, sizeof name, "node-%06d", index);
  node.name = name;
  node.cpuMilli = kind.cpuMilli;
  node.hostMemoryMib = kind.hostMemoryMib;
  node.labels = {{"topology.kubernetes.io/zone", "zone-" + std::string(1, "abc"[index % 3])},
                 {"tessera.io/gpu-type", kind.type}};
  if (rng.chance(0.03)) node.taints.push_back({"dedicated", "training", "NoSchedule"});
  node.cordoned = rng.chance(0.01);
  if (rng.chance(0.3))
    node.cachedModels = {kFillModels[static_cast<std::size_t>(rng.below(6))].name};
  const bool mig = kind.migCapable && rng.chance(1.0 / 16);
  for (int g = 0; g < kGpusPerNode; ++g) {
    model::GpuSpec gpu;
    gpu.id = std::to_string(g);
    gpu.type = kind.type;
    gpu.numaNode = g < kGpusPerNode / 2 ? 0 : 1;
    gpu.nvlinkGroup = kind.nvswitch ? 0 : -1;
    gpu.pcieSwitch = g / 2;
    gpu.migEnabled = mig;
    node.gpus.push_back(std::move(gpu));
  }
  return node;
}

class Filler {
 public:
  Filler(Fleet& fleet, Rng& rng) : fleet_(fleet), st_(*fleet.state), rng_(rng) {}

  // One more replica on `gpu` (and its right-hand neighbour for a 2-GPU model) whose charge
  // stays within the GPU's target; false when none fits.
  std::int64_t tryAdd(sched::GpuId gpu, double target) {
    const sched::GpuRecord& g = st_.gpu(gpu);
    const auto room = static_cast<std::int64_t>(target * static_cast<double>(g.spec.memoryMib)) -
                      g.chargedMib - g.foreignMib;
    std::array<std::size_t, kFillModels.size()> fits{};
    std::size_t n = 0;
    for (std::size_t m = 0; m < kFillModels.size(); ++m) {
      const FillModel& fm = kFillModels[m];
      if (fm.estimateMib > room || g.bookedComputeMilli + fm.computeMilli > 1000) continue;
      if (fm.gpus == 2) {
        if (g.spec.migEnabled || g.indexInNode % 2 != 0) continue;
        const sched::GpuRecord& right = st_.gpu(gpu + 1);
        if (right.freeMemoryMib() < fm.estimateMib ||
            right.bookedComputeMilli + fm.computeMilli > 1000) {
          continue;
        }
      }
      fits[n++] = m;
    }
    if (n == 0) return 0;
    const FillModel& fm =
        kFillModels[fits[static_cast<std::size_t>(rng_.below(static_cast<int>(n)))]];
    sched::Placement p;
    p.replicaId = "fill-" + std::to_string(next_++);
    p.deployment = fm.name;
    p.modelName = fm.name;
    p.priority = rng_.below(3);
    p.node = g.node;
    p.cpuMilli = 2000 * fm.gpus;
    p.hostMemoryMib = 16 * kGib * fm.gpus;
    if (g.spec.migEnabled) {
      model::PlacementRequest request;
      request.model.name = fm.name;
      sched::Needs needs;
      needs.memoryMib = fm.estimateMib;
      auto choice = sched::chooseMigSlice(st_, gpu, request, needs);
      if (!choice) return 0;
      const model::GpuType& type = st_.catalog().at(g.typeIndex);
      const model::MigProfile& prof =
          type.migProfiles[static_cast<std::size_t>(choice->profileIndex)];
      p.mode = model::SharingMode::kMig;
      sched::GpuAssignment a;
      a.gpu = gpu;
      a.estimateMib = fm.estimateMib;
      a.reservedMib = prof.memoryMib;
      a.computeMilli = prof.computeSlices * g.spec.computeMilli / model::migComputeSlices(type);
      a.migProfile = choice->profileIndex;
      a.migStart = choice->start;
      p.gpus.push_back(a);
    } else {
      p.mode = model::SharingMode::kShared;
      for (int i = 0; i < fm.gpus; ++i) {
        // Reserved = estimate: the replica is settled, its charge is what it uses.
        p.gpus.push_back({gpu + i, fm.estimateMib, fm.estimateMib, fm.computeMilli, 0, -1, -1});
      }
    }
    const std::int64_t before = chargedOn(p);
    if (!st_.apply(sched::replicaPlaced(st_, p, fleet_.clock.nowMs()))) return 0;
    ids_.push_back(p.replicaId);
    return chargedOn(p) - before;
  }

  // Marks every replica loaded and lets the reservations lapse: the books then hold each
  // replica's estimate, as after telemetry settled in a running cluster.
  void settle() {
    for (const auto& id : ids_) (void)st_.apply(sched::ReplicaLoaded{id});
    fleet_.clock.advance(st_.options().reservationTtlMs + 1);
    (void)st_.apply(sched::ReservationsExpired{fleet_.clock.nowMs()});
  }

 private:
  std::int64_t chargedOn(const sched::Placement& p) const {
    std::int64_t sum = 0;
    for (const auto& a : p.gpus) sum += st_.gpu(a.gpu).chargedMib;
    return sum;
  }

  Fleet& fleet_;
  sched::ClusterState& st_;
  Rng& rng_;
  std::vector<std::string> ids_;
  int next_ = 0;
};

void summarize(Fleet& fleet) {
  std::int64_t capacity = 0, charged = 0;
  std::set<std::string> types;
  for (const sched::GpuRecord& g : fleet.state->gpus()) {
    capacity += g.spec.memoryMib;
    charged += g.chargedMib;
    types.insert(fleet.catalog.at(g.typeIndex).name);
  }
  fleet.memoryUsedFraction =
      capacity > 0 ? static_cast<double>(charged) / static_cast<double>(capacity) : 0;
  fleet.residentReplicas = fleet.state->liveReplicaCount();
  fleet.gpuTypes.assign(types.begin(), types.end());
}

// ---- Requests -------------------------------------------------------------------------------

model::ModelProfile profileOf(std::string name, std::int64_t weightsMib, std::int64_t kvMib,
                              std::int64_t overheadMib, int gpus, std::int32_t computeMilli) {
  model::ModelProfile m;
  m.name = std::move(name);
  m.weightsMib = weightsMib;
  m.kvCacheMib = kvMib;
  m.overheadMib = overheadMib;
  m.gpusPerReplica = gpus;
  m.computeMilli = computeMilli;
  m.cpuMilli = 2000 + 1000 * gpus;
  m.hostMemoryMib = std::min<std::int64_t>(64 * kGib, std::max<std::int64_t>(8 * kGib, weightsMib));
  return m;
}

struct MixClass {
  const char* family;
  int variants;
  std::int64_t weightsMib;  // of variant 0; each further variant adds `stepMib`
  std::int64_t stepMib;
  std::int64_t kvMib;
  std::int64_t overheadMib;
  int gpus;
  std::int32_t computeMilli;
  bool exclusiveOnly;
};
constexpr std::array<MixClass, 7> kMixClasses{{
    {"small", 12, 1536, 256, 1024, 512, 1, 100, false},
    {"int4-7b", 8, 4 * kGib, 0, 1536, 512, 1, 150, false},
    {"fp16-7b", 10, 13824, 512, 2 * kGib, 512, 1, 250, false},
    {"fp16-13b-tp2", 6, 24 * kGib, 0, 4 * kGib, 1 * kGib, 2, 300, false},
    {"fp16-34b-tp4", 4, 63 * kGib, 0, 8 * kGib, 2 * kGib, 4, 350, false},
    {"fp16-70b-tp8", 3, 131 * kGib, 0, 16 * kGib, 4 * kGib, 8, 400, false},
    {"dedicated-12b", 2, 22 * kGib, 0, 2 * kGib, 1 * kGib, 1, 500, true},
}};
constexpr std::array<int, 7> kMixWeights{40, 15, 25, 10, 5, 2, 3};

}  // namespace

std::string sharedDir() {
  if (const char* env = std::getenv("TESSERA_SHARED_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef TESSERA_SHARED_DIR
  return TESSERA_SHARED_DIR;
#else
  return "../shared";
#endif
}

std::uint64_t benchSeed() {
  if (const char* env = std::getenv("TESSERA_BENCH_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  return 20240601;
}

std::unique_ptr<Fleet> syntheticFleet(const SyntheticOptions& options) {
  auto fleet = std::make_unique<Fleet>();
  fleet->state = std::make_unique<sched::ClusterState>(fleet->catalog, fleet->clock);
  sched::ClusterState& st = *fleet->state;
  Rng rng(options.seed);
  const int nodes = (options.gpus + kGpusPerNode - 1) / kGpusPerNode;
  for (int n = 0; n < nodes; ++n) {
    const NodeKind& kind = kNodeKinds[rng.pick(kNodeKindWeights)];
    model::NodeSpec spec = makeNode(n, kind, rng);
    spec.gpus.resize(
        static_cast<std::size_t>(std::min(kGpusPerNode, options.gpus - n * kGpusPerNode)));
    if (auto ok = st.apply(sched::NodeAdded{std::move(spec)}); !ok) {
      std::fprintf(stderr, "placement_bench: synthetic node rejected: %s\n",
                   ok.error().message.c_str());
      std::abort();
    }
  }
  // Per-GPU fill targets: a node-wide load level (a tenth of the nodes are fresh and empty)
  // plus per-GPU noise, so that free memory is spread the way a busy fleet spreads it.
  const auto gpuCount = static_cast<sched::GpuId>(st.gpus().size());
  std::vector<double> target(static_cast<std::size_t>(gpuCount));
  std::int64_t capacity = 0;
  for (sched::NodeId n = 0; n < nodes; ++n) {
    const double level = options.saturate ? 1.0 : rng.chance(0.1) ? 0.0 : 0.5 + 0.5 * rng.unit();
    for (sched::GpuId g : st.node(n).gpuIds) {
      target[static_cast<std::size_t>(g)] =
          level == 0.0 || options.saturate ? level
                                           : std::clamp(level + 0.2 * (rng.unit() - 0.5), 0.0, 1.0);
      capacity += st.gpu(g).spec.memoryMib;
    }
  }
  std::vector<sched::GpuId> order(static_cast<std::size_t>(gpuCount));
  for (sched::GpuId g = 0; g < gpuCount; ++g) order[static_cast<std::size_t>(g)] = g;
  for (std::size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[static_cast<std::size_t>(rng.below(static_cast<int>(i)))]);
  }
  // Round-robin, one replica per GPU per pass, until the fleet holds its share of memory.
  Filler filler(*fleet, rng);
  const auto goal = static_cast<std::int64_t>(options.memoryFill * static_cast<double>(capacity));
  std::int64_t used = 0;
  for (bool progress = true; progress && used < goal;) {
    progress = false;
    for (sched::GpuId g : order) {
      if (used >= goal) break;
      const std::int64_t added = filler.tryAdd(g, target[static_cast<std::size_t>(g)]);
      used += added;
      progress = progress || added > 0;
    }
  }
  filler.settle();
  summarize(*fleet);
  return fleet;
}

Result<std::unique_ptr<Fleet>> alibabaFleet(const std::string& csvPath) {
  std::ifstream in(csvPath);
  if (!in) return fail(Error::notFound("cannot open " + csvPath));
  auto fleet = std::make_unique<Fleet>();
  fleet->state = std::make_unique<sched::ClusterState>(fleet->catalog, fleet->clock);
  std::string line;
  std::getline(in, line);
  if (line.rfind("sn,cpu_milli,memory_mib,gpu,model", 0) != 0) {
    return fail(Error::invalid(csvPath + ": unexpected header '" + line + "'"));
  }
  int lineNo = 1;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, ',');) cols.push_back(col);
    const std::string where = csvPath + ":" + std::to_string(lineNo);
    if (cols.size() != 5) return fail(Error::invalid(where + ": expected 5 columns"));
    model::NodeSpec node;
    node.name = cols[0];
    node.cpuMilli = std::strtoll(cols[1].c_str(), nullptr, 10);
    node.hostMemoryMib = std::strtoll(cols[2].c_str(), nullptr, 10);
    const int gpus = std::atoi(cols[3].c_str());
    for (int g = 0; g < gpus; ++g) {
      model::GpuSpec gpu;
      gpu.id = std::to_string(g);
      gpu.type = cols[4];
      if (cols[4] == "G2") gpu.memoryMib = kG2MemoryMib;
      if (cols[4] == "G3") gpu.memoryMib = kG3MemoryMib;
      node.gpus.push_back(std::move(gpu));
    }
    if (auto ok = fleet->state->apply(sched::NodeAdded{std::move(node)}); !ok) {
      return fail(Error::invalid(where + ": " + ok.error().message));
    }
  }
  summarize(*fleet);
  return fleet;
}

model::PlacementRequest small7bRequest(std::string replicaId) {
  model::PlacementRequest r;
  r.replicaId = std::move(replicaId);
  r.model = profileOf("mistral-7b", 13824, 2 * kGib, 512, 1, 250);
  r.deployment = "mistral-7b";
  return r;
}

model::PlacementRequest tp70bRequest(std::string replicaId) {
  model::PlacementRequest r;
  r.replicaId = std::move(replicaId);
  r.model = profileOf("llama-3.1-70b", 134'656, 16 * kGib, 4 * kGib, 4, 600);
  r.model.nvlinkRequired = true;
  r.deployment = "llama-3.1-70b";
  return r;
}

std::vector<model::PlacementRequest> inferenceMix(int count,
                                                  const std::vector<std::string>& gpuTypes,
                                                  std::uint64_t seed) {
  Rng rng(seed ^ 0x6d69782d72657173ULL);
  struct Deployment {
    model::ModelProfile profile;
    std::vector<std::string> gpuTypes;
  };
  // Deployments per class, each with a fixed priority and (for a tenth) a GPU-type pin.
  std::vector<std::vector<Deployment>> byClass(kMixClasses.size());
  for (std::size_t c = 0; c < kMixClasses.size(); ++c) {
    const MixClass& mc = kMixClasses[c];
    for (int v = 0; v < mc.variants; ++v) {
      Deployment d;
      d.profile = profileOf(std::string(mc.family) + "-" + std::to_string(v),
                            mc.weightsMib + mc.stepMib * v, mc.kvMib, mc.overheadMib, mc.gpus,
                            mc.computeMilli);
      d.profile.priority = rng.below(4);
      if (mc.exclusiveOnly)
        d.profile.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
      if (!gpuTypes.empty() && rng.chance(0.1)) {
        d.gpuTypes.push_back(
            gpuTypes[static_cast<std::size_t>(rng.below(static_cast<int>(gpuTypes.size())))]);
        if (rng.chance(0.5)) {
          d.gpuTypes.push_back(
              gpuTypes[static_cast<std::size_t>(rng.below(static_cast<int>(gpuTypes.size())))]);
        }
      }
      byClass[c].push_back(std::move(d));
    }
  }
  std::vector<model::PlacementRequest> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const auto& pool = byClass[rng.pick(kMixWeights)];
    const Deployment& d = pool[static_cast<std::size_t>(rng.below(static_cast<int>(pool.size())))];
    model::PlacementRequest r;
    r.replicaId = d.profile.name + "-r" + std::to_string(i);
    r.model = d.profile;
    r.deployment = d.profile.name;
    r.gpuTypes = d.gpuTypes;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tessera::bench
