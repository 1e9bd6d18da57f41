// The contract every registered filter and score plugin keeps, checked over randomised
// cluster states, requests and options. A plugin added to registerBuiltinPlugins is covered
// without touching this file.
//
// Filters: the registered name is name(); why*() is non-empty exactly when pass*() is false,
// for nodes (removed ones included), GPUs and options; answers are deterministic.
// Scores: every option gets a raw score; the same state gives the same scores, also from a
// fresh instance (no hidden history); normalize() lands in 0..100; an empty batch is fine.
// Both: default and null arguments are accepted, unknown arguments are rejected.
//
// The seed is printed; rerun a failure with TESSERA_SEED=<seed>.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/mig.h"
#include "sched/plugin_test_support.h"

namespace tessera::sched {
namespace {

using testing::kGib;

// At least kRounds worlds, more (up to 8 times as many) where the first kRounds of a seed miss a
// kind of placement or trouble: see contractRounds().
constexpr int kRounds = 40;
constexpr int kRequestsPerRound = 4;

std::uint64_t contractSeed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = 0;
    if (const char* env = std::getenv("TESSERA_SEED"); env != nullptr && *env != '\0') {
      s = std::strtoull(env, nullptr, 10);
    } else {
      s = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    }
    std::cout << "plugin contract: TESSERA_SEED=" << s << std::endl;
    return s;
  }();
  return seed;
}

const PluginRegistry& builtins() {
  static const PluginRegistry registry = [] {
    PluginRegistry r;
    registerBuiltinPlugins(r);
    return r;
  }();
  return registry;
}

// ---- random worlds ------------------------------------------------------------------------

class Random {
 public:
  explicit Random(std::uint64_t seed) : rng_(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::int64_t uniform64(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

const std::vector<std::string> kTypes = {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB",
                                         "A30",       "L4",        "T4",        "G2"};
const std::vector<std::string> kModels = {"m0", "m1", "m2"};

model::NodeSpec randomNode(Random& r, const model::GpuCatalog& catalog, int index) {
  model::NodeSpec n;
  n.name = "n" + std::to_string(index);
  n.cpuMilli = r.uniform64(0, 64) * 1000;
  n.hostMemoryMib = r.uniform64(0, 512) * kGib;
  n.healthy = r.chance(0.9);
  n.cordoned = r.chance(0.1);
  if (r.chance(0.7)) n.labels["zone"] = r.chance(0.5) ? "a" : "b";
  if (r.chance(0.5)) n.labels["pool"] = r.chance(0.5) ? "x" : "y";
  if (r.chance(0.2)) n.taints.push_back({"dedicated", "x", "NoSchedule"});
  if (r.chance(0.1)) n.taints.push_back({"maint", "", "NoExecute"});
  if (r.chance(0.2)) n.taints.push_back({"spot", "yes", "PreferNoSchedule"});
  for (const auto& m : kModels) {
    if (r.chance(0.2)) n.cachedModels.push_back(m);
  }
  const std::string nodeType = r.pick(kTypes);
  const int gpus = r.chance(0.1) ? 0 : r.uniform(1, 8);
  for (int i = 0; i < gpus; ++i) {
    model::GpuSpec g =
        testing::gpuSpec(std::to_string(i), r.chance(0.9) ? nodeType : r.pick(kTypes));
    const model::GpuType& type = *catalog.find(g.type);
    if (r.chance(0.15)) g.memoryMib = r.uniform64(4, 96) * kGib;
    if (r.chance(0.2)) g.computeMilli = r.uniform(500, 1000);
    if (r.chance(0.2)) g.memoryBandwidthGBps = r.uniform(100, 4000);
    g.numaNode = r.uniform(-1, 1);
    g.nvlinkGroup = type.nvlinkGBps ? r.uniform(-1, 1) : -1;
    if (r.chance(0.2)) g.timeSlicingReplicas = r.uniform(1, 3);
    g.healthy = r.chance(0.9);
    if (type.migCapable() && r.chance(0.4)) {
      g.migEnabled = true;
      // A few pre-existing instances, kept only while the layout stays legal.
      for (int k = r.uniform(0, 3); k > 0; --k) {
        const model::MigProfile& p = r.pick(type.migProfiles);
        auto next = g.migInstances;
        next.push_back({p.name, r.pick(p.allowedStarts)});
        if (model::resolveMigInstances(type, next)) g.migInstances = std::move(next);
      }
    }
    n.gpus.push_back(std::move(g));
  }
  return n;
}

// Places a random replica somewhere on `node`; the state refuses what does not fit, and a
// refused event changes nothing, so failures are simply skipped.
void placeRandomReplica(Random& r, ClusterState& state, NodeId node, int serial) {
  const NodeRecord& n = state.node(node);
  Placement p;
  p.replicaId = "r" + std::to_string(serial);
  p.modelName = r.pick(kModels);
  p.deployment = r.chance(0.5) ? p.modelName : "d" + std::to_string(r.uniform(0, 1));
  p.node = node;
  p.cpuMilli = r.uniform64(0, 8) * 1000;
  p.hostMemoryMib = r.uniform64(0, 32) * kGib;
  if (n.gpuIds.empty() || r.chance(0.05)) {
    (void)state.apply(replicaPlaced(state, p, state.clock().nowMs()));
    return;
  }
  const GpuId first =
      n.gpuIds[static_cast<std::size_t>(r.uniform(0, static_cast<int>(n.gpuIds.size()) - 1))];
  const GpuRecord& g = state.gpu(first);
  if (g.spec.migEnabled) {
    model::PlacementRequest req;
    req.model.weightsMib = r.uniform64(0, 40) * kGib;
    const Needs needs = deriveNeeds(req, state.options());
    auto choice = chooseMigSlice(state, first, req, needs);
    if (!choice) return;
    const model::GpuType& type = state.catalog().at(g.typeIndex);
    const auto& prof = type.migProfiles[static_cast<std::size_t>(choice->profileIndex)];
    p.mode = model::SharingMode::kMig;
    GpuAssignment a;
    a.gpu = first;
    a.estimateMib = needs.estimateMib;
    a.reservedMib = prof.memoryMib;
    a.computeMilli = prof.computeSlices * g.spec.computeMilli / model::migComputeSlices(type);
    a.migProfile = choice->profileIndex;
    a.migStart = choice->start;
    p.gpus.push_back(a);
    (void)state.apply(replicaPlaced(state, p, state.clock().nowMs()));
    return;
  }
  const bool exclusive = g.replicas.empty() && r.chance(0.2);
  p.mode = exclusive ? model::SharingMode::kExclusive : model::SharingMode::kShared;
  std::vector<GpuId> gpus{first};
  if (!exclusive && r.chance(0.2)) {
    for (GpuId other : n.gpuIds) {
      if (other != first && !state.gpu(other).spec.migEnabled) {
        gpus.push_back(other);
        break;
      }
    }
  }
  for (GpuId gid : gpus) {
    const GpuRecord& rec = state.gpu(gid);
    GpuAssignment a;
    a.gpu = gid;
    const std::int64_t free = std::max<std::int64_t>(0, rec.freeMemoryMib());
    a.estimateMib = r.uniform64(0, free);
    a.reservedMib = exclusive ? free : std::min(free, a.estimateMib + a.estimateMib / 5);
    a.computeMilli =
        exclusive ? rec.freeComputeMilli() : r.uniform(0, std::max(0, rec.freeComputeMilli()));
    if (rec.spec.memoryBandwidthGBps > 0) {
      a.bandwidthGBps =
          r.uniform(0, 3) * (rec.spec.memoryBandwidthGBps - rec.bookedBandwidthGBps) / 4;
    }
    p.gpus.push_back(a);
  }
  (void)state.apply(replicaPlaced(state, p, state.clock().nowMs()));
}

model::PlacementRequest randomRequest(Random& r, int serial) {
  model::PlacementRequest q;
  q.replicaId = "q" + std::to_string(serial);
  q.model.name = r.chance(0.9) ? r.pick(kModels) : "";
  q.model.gpusPerReplica = r.chance(0.1) ? 0 : r.uniform(1, 4);
  q.model.weightsMib = r.uniform64(0, 120) * kGib;
  q.model.kvCacheMib = r.uniform64(0, 8) * kGib;
  q.model.computeMilli = r.uniform(0, 1000);
  q.model.memoryBandwidthGBps = r.chance(0.5) ? r.uniform(0, 2000) : 0;
  q.model.nvlinkRequired = r.chance(0.3);
  q.model.numaAligned = r.chance(0.3);
  q.model.sharing = static_cast<model::SharingModes>(r.uniform(1, 7));
  q.model.migProfile =
      r.pick(std::vector<std::string>{"", "", "1g.10gb", "3g.40gb", "2g.12gb", "x"});
  q.model.cpuMilli = r.uniform64(0, 16) * 1000;
  q.model.hostMemoryMib = r.uniform64(0, 64) * kGib;
  for (const char* t : {"a100-80gb", "NVIDIA L4", "H100-80GB", "B200"}) {
    if (r.chance(0.15)) q.gpuTypes.push_back(t);
  }
  if (r.chance(0.3)) q.nodeSelector["zone"] = r.chance(0.5) ? "a" : "b";
  if (r.chance(0.3)) q.tolerations.push_back({"dedicated", "Equal", "x", "NoSchedule"});
  if (r.chance(0.1)) q.tolerations.push_back({"", "Exists", "", ""});
  q.deployment = r.chance(0.5) ? "" : "d" + std::to_string(r.uniform(0, 1));
  return q;
}

// Options as the engine would assemble them (and a few it would not: MIG options without a
// chosen slice, exclusive options on busy GPUs) — plugins must cope with any option.
std::vector<Option> randomOptions(Random& r, const ClusterState& state,
                                  const model::PlacementRequest& request, const Needs& needs) {
  std::vector<Option> options;
  for (NodeId n = 0; n < static_cast<NodeId>(state.nodes().size()); ++n) {
    const NodeRecord& node = state.node(n);
    if (node.removed) continue;
    for (int k = r.uniform(0, 2); k > 0; --k) {
      Option o;
      o.node = n;
      std::vector<GpuId> gpus = node.gpuIds;
      std::shuffle(gpus.begin(), gpus.end(), r.engine());
      const int count = std::min<int>(needs.gpuCount, static_cast<int>(gpus.size()));
      o.gpuCount = static_cast<std::int8_t>(count);
      for (int i = 0; i < count; ++i)
        o.gpus[static_cast<std::size_t>(i)] = gpus[static_cast<std::size_t>(i)];
      o.mode = r.chance(0.7) ? model::SharingMode::kShared : model::SharingMode::kExclusive;
      if (count == 1 && state.gpu(o.gpus[0]).spec.migEnabled) {
        o.mode = model::SharingMode::kMig;
        if (auto c = chooseMigSlice(state, o.gpus[0], request, needs); c && r.chance(0.9)) {
          o.migProfile = c->profileIndex;
          o.migStart = c->start;
          o.migCreates = c->creates;
        }
      }
      options.push_back(o);
    }
  }
  return options;
}

// One randomised world: a state plus requests to ask about it.
struct World {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{0};
  ClusterState state{catalog, clock};
  std::vector<model::PlacementRequest> requests;

  explicit World(std::uint64_t seed) {
    Random r(seed);
    const int nodes = r.uniform(1, 6);
    for (int i = 0; i < nodes; ++i) (void)state.apply(NodeAdded{randomNode(r, catalog, i)});
    int serial = 0;
    for (int i = r.uniform(0, 40); i > 0; --i) {
      const auto n = static_cast<NodeId>(r.uniform(0, static_cast<int>(state.nodes().size()) - 1));
      if (state.node(n).removed) continue;
      placeRandomReplica(r, state, n, serial++);
      if (r.chance(0.15) && serial > 0) {
        (void)state.apply(ReplicaUnloaded{"r" + std::to_string(r.uniform(0, serial - 1))});
      }
      if (r.chance(0.1)) {
        clock.advance(r.uniform(0, 60'000));
        (void)state.apply(ReservationsExpired{clock.nowMs()});
      }
    }
    for (const GpuRecord& g : state.gpus()) {
      if (!r.chance(0.2)) continue;
      GpuTelemetry t;
      t.node = state.node(g.node).spec.name;
      t.gpuId = g.spec.id;
      t.usedMib = r.uniform64(0, std::max<std::int64_t>(0, g.spec.memoryMib));
      t.healthy = r.chance(0.95);
      t.atMs = clock.nowMs();
      (void)state.apply(t);
    }
    if (r.chance(0.2)) (void)state.apply(NodeRemoved{"n0", /*force=*/true});
    for (int i = 0; i < kRequestsPerRound; ++i) requests.push_back(randomRequest(r, i));
    EXPECT_TRUE(state.checkInvariants());
  }
};

std::string traceFor(int round) {
  return "TESSERA_SEED=" + std::to_string(contractSeed()) + " round " + std::to_string(round);
}

// What the worlds of rounds 0 .. rounds-1 hold.
struct WorldCoverage {
  int rounds = 0;
  int mig = 0, exclusive = 0, multiGpu = 0, removedNodes = 0, sickGpus = 0, tombstones = 0;

  void add(const World& world) {
    ++rounds;
    for (const ReplicaRecord& r : world.state.replicas()) {
      tombstones += r.removed ? 1 : 0;
      if (r.removed) continue;
      mig += r.placement.mode == model::SharingMode::kMig ? 1 : 0;
      exclusive += r.placement.mode == model::SharingMode::kExclusive ? 1 : 0;
      multiGpu += r.placement.gpus.size() > 1 ? 1 : 0;
    }
    for (const NodeRecord& n : world.state.nodes()) removedNodes += n.removed ? 1 : 0;
    for (const GpuRecord& g : world.state.gpus()) sickGpus += g.healthy() ? 0 : 1;
  }
  bool everyKind() const {
    return mig > 0 && exclusive > 0 && multiGpu > 0 && removedNodes > 0 && sickGpus > 0 &&
           tombstones > 0;
  }
};

// The worlds every contract test runs: kRounds, then more (up to 8 * kRounds) until they hold
// every kind RandomWorlds requires. A removed node is one world's 20 % chance, so some seeds
// reach none in 40 worlds (TESSERA_SEED=5404167528589261160).
const WorldCoverage& contractWorlds() {
  static const WorldCoverage coverage = [] {
    WorldCoverage c;
    while (c.rounds < 8 * kRounds && (c.rounds < kRounds || !c.everyKind())) {
      c.add(World(contractSeed() + static_cast<std::uint64_t>(c.rounds)));
    }
    return c;
  }();
  return coverage;
}

int contractRounds() {
  return contractWorlds().rounds;
}

// The contract is only as good as the worlds it runs on: they must hold every kind of
// placement and every kind of trouble the plugins look at.
TEST(RandomWorlds, CoverEverySharingModeAndFailure) {
  const WorldCoverage& c = contractWorlds();
  std::cout << c.rounds << " worlds: MIG " << c.mig << ", exclusive " << c.exclusive
            << ", multi-GPU " << c.multiGpu << ", removed nodes " << c.removedNodes
            << ", sick GPUs " << c.sickGpus << ", tombstones " << c.tombstones << std::endl;
  SCOPED_TRACE(traceFor(c.rounds));
  EXPECT_GT(c.mig, 0);
  EXPECT_GT(c.exclusive, 0);
  EXPECT_GT(c.multiGpu, 0);
  EXPECT_GT(c.removedNodes, 0);
  EXPECT_GT(c.sickGpus, 0);
  EXPECT_GT(c.tombstones, 0);
}

// ---- filters ------------------------------------------------------------------------------

class FilterContract : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<FilterPlugin> make(const PluginArgs& args = PluginArgs::object()) {
    auto p = builtins().makeFilter(GetParam(), args);
    EXPECT_TRUE(p) << p.error().message;
    return p ? std::move(*p) : nullptr;
  }
};

TEST_P(FilterContract, IsRegisteredUnderItsOwnName) {
  auto plugin = make();
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->name(), GetParam());
  EXPECT_NE(make(PluginArgs()), nullptr) << "null arguments mean defaults";
}

TEST_P(FilterContract, RejectsUnknownArguments) {
  auto p = builtins().makeFilter(GetParam(), PluginArgs{{"noSuchArgument", 1}});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("noSuchArgument"), std::string::npos) << p.error().message;
}

TEST_P(FilterContract, ExplainsExactlyWhatItRejects) {
  auto plugin = make();
  ASSERT_NE(plugin, nullptr);
  int rejections = 0;
  for (int round = 0; round < contractRounds(); ++round) {
    SCOPED_TRACE(traceFor(round));
    World world(contractSeed() + static_cast<std::uint64_t>(round));
    const ClusterState& state = world.state;
    Random r(contractSeed() ^ (0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(round + 1)));
    for (const auto& request : world.requests) {
      const Needs needs = deriveNeeds(request, state.options());
      const DecisionContext ctx{state, request, needs};
      for (NodeId n = 0; n < static_cast<NodeId>(state.nodes().size()); ++n) {
        const bool pass = plugin->passNode(ctx, n);
        const std::string why = plugin->whyNode(ctx, n);
        EXPECT_EQ(pass, why.empty()) << "node " << n << ": " << why;
        EXPECT_EQ(pass, plugin->passNode(ctx, n));
        EXPECT_EQ(why, plugin->whyNode(ctx, n));
        rejections += pass ? 0 : 1;
      }
      for (GpuId g = 0; g < static_cast<GpuId>(state.gpus().size()); ++g) {
        const bool pass = plugin->passGpu(ctx, g);
        const std::string why = plugin->whyGpu(ctx, g);
        EXPECT_EQ(pass, why.empty()) << "gpu " << g << ": " << why;
        EXPECT_EQ(pass, plugin->passGpu(ctx, g));
        rejections += pass ? 0 : 1;
      }
      for (const Option& o : randomOptions(r, state, request, needs)) {
        const bool pass = plugin->passOption(ctx, o);
        const std::string why = plugin->whyOption(ctx, o);
        EXPECT_EQ(pass, why.empty()) << "option on node " << o.node << ": " << why;
        EXPECT_EQ(pass, plugin->passOption(ctx, o));
        rejections += pass ? 0 : 1;
      }
    }
  }
  // Every built-in filter rejects something in the random worlds; if one never does, the
  // worlds no longer exercise its reasons.
  EXPECT_GT(rejections, 0) << GetParam() << " never rejected anything";
}

INSTANTIATE_TEST_SUITE_P(Builtins, FilterContract, ::testing::ValuesIn(builtins().filterNames()),
                         [](const auto& info) { return info.param; });

// ---- scores -------------------------------------------------------------------------------

class ScoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<ScorePlugin> make(const PluginArgs& args = PluginArgs::object()) {
    auto p = builtins().makeScore(GetParam(), args);
    EXPECT_TRUE(p) << p.error().message;
    return p ? std::move(*p) : nullptr;
  }
};

constexpr std::int64_t kUnwritten = std::numeric_limits<std::int64_t>::min() + 12345;

TEST_P(ScoreContract, IsRegisteredUnderItsOwnName) {
  auto plugin = make();
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->name(), GetParam());
  EXPECT_NE(make(PluginArgs()), nullptr) << "null arguments mean defaults";
}

TEST_P(ScoreContract, RejectsUnknownArguments) {
  auto p = builtins().makeScore(GetParam(), PluginArgs{{"noSuchArgument", 1}});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("noSuchArgument"), std::string::npos) << p.error().message;
}

TEST_P(ScoreContract, HandlesAnEmptyBatch) {
  auto plugin = make();
  ASSERT_NE(plugin, nullptr);
  World world(contractSeed());
  const Needs needs = deriveNeeds(world.requests[0], world.state.options());
  const DecisionContext ctx{world.state, world.requests[0], needs};
  plugin->score(ctx, {}, {});
  plugin->normalize({});
}

TEST_P(ScoreContract, ScoresEveryOptionDeterministicallyWithinRange) {
  auto plugin = make();
  ASSERT_NE(plugin, nullptr);
  for (int round = 0; round < contractRounds(); ++round) {
    SCOPED_TRACE(traceFor(round));
    World world(contractSeed() + static_cast<std::uint64_t>(round));
    Random r(contractSeed() ^ (0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(round + 1)));
    for (const auto& request : world.requests) {
      const Needs needs = deriveNeeds(request, world.state.options());
      const DecisionContext ctx{world.state, request, needs};
      const std::vector<Option> options = randomOptions(r, world.state, request, needs);
      std::vector<std::int64_t> first(options.size(), kUnwritten);
      plugin->score(ctx, options, first);
      for (std::size_t i = 0; i < first.size(); ++i) {
        EXPECT_NE(first[i], kUnwritten) << "option " << i << " has no score";
      }
      std::vector<std::int64_t> again(options.size(), kUnwritten);
      plugin->score(ctx, options, again);
      EXPECT_EQ(first, again) << "same state, same request, different scores";
      auto fresh = make();
      std::vector<std::int64_t> fromFresh(options.size(), kUnwritten);
      fresh->score(ctx, options, fromFresh);
      EXPECT_EQ(first, fromFresh) << "scores depend on what the instance saw before";

      plugin->normalize(first);
      for (std::size_t i = 0; i < first.size(); ++i) {
        EXPECT_GE(first[i], 0) << "option " << i;
        EXPECT_LE(first[i], 100) << "option " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, ScoreContract, ::testing::ValuesIn(builtins().scoreNames()),
                         [](const auto& info) { return info.param; });

// ---- the registry -------------------------------------------------------------------------

TEST(BuiltinPlugins, AreExactlyTheDocumentedOnes) {
  EXPECT_EQ(
      builtins().filterNames(),
      (std::vector<std::string>{"Bandwidth", "ComputeCap", "GpuTopology", "GpuType", "MemoryFit",
                                "MigSlice", "NodeHealth", "NodeResources", "NodeSelector",
                                "NumaAlignment", "TaintToleration", "TimeSlicing"}));
  EXPECT_EQ(
      builtins().scoreNames(),
      (std::vector<std::string>{"BestFit", "ComputeHeadroom", "Fragmentation", "ModelAffinity",
                                "NumaLocality", "ReplicaAntiAffinity", "Spread"}));
}

}  // namespace
}  // namespace tessera::sched
