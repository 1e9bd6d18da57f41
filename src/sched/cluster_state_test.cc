#include "sched/cluster_state.h"

#include <gtest/gtest.h>

#include "model/gpu_catalog.h"
#include "sched/plugin_test_support.h"

namespace tessera::sched {
namespace {

using testing::kGib;

model::NodeSpec node(const std::string& name, const std::string& type, int gpus,
                     std::int64_t cpuMilli = 64'000) {
  model::NodeSpec n;
  n.name = name;
  n.cpuMilli = cpuMilli;
  n.hostMemoryMib = 512 * kGib;
  for (int i = 0; i < gpus; ++i) {
    model::GpuSpec g;
    g.id = std::to_string(i);
    g.type = type;
    // Only form factors with NVLink have a group (an L4's would be refused).
    g.nvlinkGroup = type.starts_with("A100") || type.starts_with("H100") ? 0 : -1;
    g.numaNode = i < gpus / 2 ? 0 : 1;
    n.gpus.push_back(g);
  }
  return n;
}

Placement shared(const ClusterState& st, const std::string& id, const std::string& nodeName,
                 const std::string& gpuId, std::int64_t estimate, std::int64_t reserved,
                 int computeMilli = 100) {
  Placement p;
  p.replicaId = id;
  p.deployment = "dep";
  p.modelName = "llama";
  p.mode = model::SharingMode::kShared;
  p.node = *st.findNode(nodeName);
  GpuAssignment a;
  a.gpu = *st.findGpu(nodeName, gpuId);
  a.estimateMib = estimate;
  a.reservedMib = reserved;
  a.computeMilli = computeMilli;
  p.gpus.push_back(a);
  return p;
}

class ClusterStateTest : public ::testing::Test {
 protected:
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1'000};
  ClusterState state_{catalog_, clock_};

  void SetUp() override { ASSERT_TRUE(state_.apply(NodeAdded{node("n1", "A100-80GB", 4)})); }
  std::int64_t freeMib(const std::string& gpu) const {
    return state_.gpu(*state_.findGpu("n1", gpu)).freeMemoryMib();
  }
};

TEST_F(ClusterStateTest, NodeCapacityComesFromTheCatalogue) {
  const GpuRecord& g = state_.gpu(*state_.findGpu("n1", "0"));
  EXPECT_EQ(g.spec.memoryMib, 80 * kGib);
  EXPECT_EQ(g.spec.smCount, 108);
  EXPECT_EQ(g.spec.computeMilli, 1000);
  EXPECT_EQ(state_.liveGpuCount(), 4);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, RejectsDuplicateAndBadNodes) {
  auto dup = state_.apply(NodeAdded{node("n1", "A100-80GB", 1)});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  auto unknown = state_.apply(NodeAdded{node("n2", "Z9000", 1)});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("Z9000"), std::string::npos);
  EXPECT_FALSE(state_.findNode("n2"));
  EXPECT_EQ(state_.liveNodeCount(), 1);
}

TEST_F(ClusterStateTest, ReservationHoldsUntilTelemetryShowsRealUsage) {
  ASSERT_TRUE(state_.apply(replicaPlaced(
      state_, shared(state_, "r1", "n1", "0", 20 * kGib, 24 * kGib), clock_.nowMs())));
  EXPECT_EQ(freeMib("0"), 56 * kGib);
  EXPECT_EQ(state_.activeReservationCount(), 1);
  // Telemetry while loading: 10 GiB attributed so far; the reservation still holds 24.
  GpuTelemetry t{"n1", "0", 10 * kGib, 300, {{"r1", 10 * kGib}}, true, clock_.nowMs()};
  ASSERT_TRUE(state_.apply(t));
  EXPECT_EQ(freeMib("0"), 56 * kGib);
  // Loaded, then telemetry with the real figure: the reservation settles to 21 GiB.
  ASSERT_TRUE(state_.apply(ReplicaLoaded{"r1"}));
  t.usedMib = 21 * kGib;
  t.replicaUsedMib["r1"] = 21 * kGib;
  ASSERT_TRUE(state_.apply(t));
  EXPECT_EQ(state_.activeReservationCount(), 0);
  EXPECT_EQ(freeMib("0"), 59 * kGib);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, ForeignUsageIsCountedOnceNextToReservations) {
  ASSERT_TRUE(state_.apply(replicaPlaced(
      state_, shared(state_, "r1", "n1", "0", 20 * kGib, 24 * kGib), clock_.nowMs())));
  // 6 GiB used by something Tessera did not place, 4 GiB already loaded by r1.
  ASSERT_TRUE(state_.apply(
      GpuTelemetry{"n1", "0", 10 * kGib, 0, {{"r1", 4 * kGib}}, true, clock_.nowMs()}));
  EXPECT_EQ(freeMib("0"), 80 * kGib - 24 * kGib - 6 * kGib);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, ReservationLapsesExactlyAtTtlToTheEstimate) {
  ASSERT_TRUE(state_.apply(replicaPlaced(
      state_, shared(state_, "r1", "n1", "0", 20 * kGib, 24 * kGib), clock_.nowMs())));
  EXPECT_EQ(state_.nextReservationExpiryMs(), 1'000 + 30'000);
  clock_.advance(29'999);
  ASSERT_TRUE(state_.apply(ReservationsExpired{clock_.nowMs()}));
  EXPECT_EQ(state_.activeReservationCount(), 1);
  EXPECT_EQ(freeMib("0"), 56 * kGib);
  clock_.advance(1);
  ASSERT_TRUE(state_.apply(ReservationsExpired{clock_.nowMs()}));
  EXPECT_EQ(state_.activeReservationCount(), 0);
  EXPECT_EQ(freeMib("0"), 60 * kGib);  // the raw estimate stays booked
  EXPECT_FALSE(state_.nextReservationExpiryMs());
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, RefusesOverCommitInEveryDimension) {
  ASSERT_TRUE(state_.apply(replicaPlaced(
      state_, shared(state_, "r1", "n1", "0", 50 * kGib, 60 * kGib, 700), clock_.nowMs())));
  auto memory = state_.apply(replicaPlaced(
      state_, shared(state_, "r2", "n1", "0", 18 * kGib, 21 * kGib, 100), clock_.nowMs()));
  ASSERT_FALSE(memory);
  EXPECT_EQ(memory.error().code, ErrorCode::kResourceExhausted);
  auto compute = state_.apply(replicaPlaced(
      state_, shared(state_, "r3", "n1", "0", 1 * kGib, 1 * kGib, 400), clock_.nowMs()));
  ASSERT_FALSE(compute);
  Placement cpu = shared(state_, "r4", "n1", "1", kGib, kGib);
  cpu.cpuMilli = 65'000;
  ASSERT_FALSE(state_.apply(replicaPlaced(state_, cpu, clock_.nowMs())));
  // Nothing of the refused placements stuck.
  EXPECT_EQ(state_.liveReplicaCount(), 1);
  EXPECT_EQ(freeMib("0"), 20 * kGib);
  EXPECT_EQ(state_.gpu(*state_.findGpu("n1", "0")).bookedComputeMilli, 700);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, ExclusiveGpuTakesNoOtherReplica) {
  Placement p = shared(state_, "big", "n1", "2", 70 * kGib, 80 * kGib, 1000);
  p.mode = model::SharingMode::kExclusive;
  ASSERT_TRUE(state_.apply(replicaPlaced(state_, p, clock_.nowMs())));
  EXPECT_FALSE(state_.apply(
      replicaPlaced(state_, shared(state_, "small", "n1", "2", 0, 0, 0), clock_.nowMs())));
  ASSERT_TRUE(state_.apply(ReplicaUnloaded{"big"}));
  EXPECT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "small", "n1", "2", 0, 0, 0), clock_.nowMs())));
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, UnloadFreesEverythingAndIdCanBeReused) {
  ASSERT_TRUE(state_.apply(replicaPlaced(
      state_, shared(state_, "r1", "n1", "1", 20 * kGib, 24 * kGib), clock_.nowMs())));
  ASSERT_TRUE(state_.apply(ReplicaUnloaded{"r1"}));
  EXPECT_EQ(freeMib("1"), 80 * kGib);
  EXPECT_EQ(state_.activeReservationCount(), 0);
  EXPECT_FALSE(state_.apply(ReplicaUnloaded{"r1"}));
  EXPECT_TRUE(state_.apply(replicaPlaced(
      state_, shared(state_, "r1", "n1", "1", 20 * kGib, 24 * kGib), clock_.nowMs())));
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, CapacityIndexOrdersGpusByPlaceableMemory) {
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "a", "n1", "0", 50 * kGib, 60 * kGib), clock_.nowMs())));
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "b", "n1", "1", 10 * kGib, 30 * kGib), clock_.nowMs())));
  std::vector<std::string> seen;
  state_.forEachGpuWithPlaceableMemory(25 * kGib, [&](GpuId g) {
    seen.push_back(state_.gpu(g).spec.id);
    return true;
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "2", "3"}));
  // Unhealthy GPUs leave the index.
  ASSERT_TRUE(state_.apply(GpuTelemetry{"n1", "2", 0, 0, {}, false, clock_.nowMs()}));
  seen.clear();
  state_.forEachGpuWithPlaceableMemory(0, [&](GpuId g) {
    seen.push_back(state_.gpu(g).spec.id);
    return true;
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"0", "1", "3"}));
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, NodeRemovalNeedsDrainOrForce) {
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "r1", "n1", "0", kGib, kGib), clock_.nowMs())));
  auto refused = state_.apply(NodeRemoved{"n1", false});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(state_.apply(NodeRemoved{"n1", true}));
  EXPECT_EQ(state_.liveNodeCount(), 0);
  EXPECT_EQ(state_.liveGpuCount(), 0);
  EXPECT_EQ(state_.liveReplicaCount(), 0);
  int indexed = 0;
  state_.forEachGpuWithPlaceableMemory(0, [&](GpuId) { return ++indexed, true; });
  EXPECT_EQ(indexed, 0);
  EXPECT_TRUE(state_.checkInvariants());
  // The name is free again.
  EXPECT_TRUE(state_.apply(NodeAdded{node("n1", "L4", 2)}));
}

TEST_F(ClusterStateTest, NodeUpdateChangesHealthButNotCapacityUnderReplicas) {
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "r1", "n1", "0", kGib, kGib), clock_.nowMs())));
  model::NodeSpec upd = node("n1", "A100-80GB", 4);
  upd.cordoned = true;
  upd.taints.push_back({"gpu", "maintenance", "NoSchedule"});
  ASSERT_TRUE(state_.apply(NodeUpdated{upd}));
  EXPECT_TRUE(state_.node(*state_.findNode("n1")).spec.cordoned);
  upd.gpus[0].memoryMib = 40 * kGib;
  EXPECT_FALSE(state_.apply(NodeUpdated{upd}));
  upd.gpus.pop_back();
  EXPECT_FALSE(state_.apply(NodeUpdated{upd}));
  EXPECT_TRUE(state_.checkInvariants());
}

// Issue 14, item 12: a GPU's NVLink group, NUMA node or PCIe switch stays as it was while a
// replica holds it; an idle GPU may change.
TEST_F(ClusterStateTest, NodeUpdateKeepsTheTopologyOfGpusThatHoldReplicas) {
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "r1", "n1", "0", kGib, kGib), clock_.nowMs())));
  for (int field = 0; field < 3; ++field) {
    model::NodeSpec upd = node("n1", "A100-80GB", 4);
    if (field == 0) upd.gpus[0].nvlinkGroup = 3;
    if (field == 1) upd.gpus[0].numaNode = 1;
    if (field == 2) upd.gpus[0].pcieSwitch = 7;
    auto refused = state_.apply(NodeUpdated{upd});
    ASSERT_FALSE(refused) << "field " << field;
    EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
    EXPECT_NE(refused.error().message.find("gpu 0"), std::string::npos) << refused.error().message;
  }
  EXPECT_EQ(state_.gpu(*state_.findGpu("n1", "0")).spec.nvlinkGroup, 0);
  model::NodeSpec idle = node("n1", "A100-80GB", 4);
  idle.gpus[3].nvlinkGroup = 1;  // GPU 3 holds nothing
  ASSERT_TRUE(state_.apply(NodeUpdated{idle}));
  EXPECT_EQ(state_.gpu(*state_.findGpu("n1", "3")).spec.nvlinkGroup, 1);
  EXPECT_TRUE(state_.checkInvariants());
}

// Issue 14, bug 3: an L4 has no NVLink; an inventory that says it has is refused, naming the
// GPU, rather than letting GpuTopology accept a "NVLink-connected" pair of L4s.
TEST_F(ClusterStateTest, AnNvlinkGroupOnATypeWithoutNvlinkIsRefused) {
  model::NodeSpec linked = node("l4", "L4", 2);
  for (auto& g : linked.gpus) g.nvlinkGroup = 0;
  auto refused = state_.apply(NodeAdded{linked});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("node l4 gpu 0"), std::string::npos);
  EXPECT_NE(refused.error().message.find("no NVLink"), std::string::npos);
  model::NodeSpec plain = node("l4", "L4", 2);
  for (auto& g : plain.gpus) g.nvlinkGroup = -1;
  EXPECT_TRUE(state_.apply(NodeAdded{plain}));
}

TEST_F(ClusterStateTest, MigSlicesAreCreatedAtLegalStartsAndFreedWithTheirReplica) {
  model::NodeSpec n = node("mig", "A100-80GB", 1);
  n.gpus[0].migEnabled = true;
  n.gpus[0].migInstances.push_back({"3g.40gb", 4});  // declared by the operator
  ASSERT_TRUE(state_.apply(NodeAdded{n}));
  const GpuId g = *state_.findGpu("mig", "0");
  const model::GpuType& type = catalog_.at(state_.gpu(g).typeIndex);
  const auto idx = [&](const char* name) {
    return static_cast<std::int16_t>(type.findMigProfile(name) - type.migProfiles.data());
  };
  // Slices 4-7 are taken, so the largest new instance is a 4g.40gb at 0.
  EXPECT_EQ(state_.placeableMemoryMib(g), 40 * kGib);

  Placement p;
  p.replicaId = "m1";
  p.modelName = "small";
  p.mode = model::SharingMode::kMig;
  p.node = *state_.findNode("mig");
  GpuAssignment a;
  a.gpu = g;
  a.estimateMib = 8 * kGib;
  a.reservedMib = 10 * kGib;
  a.migProfile = idx("1g.10gb");
  a.migStart = 5;  // inside the declared 3g instance: illegal
  p.gpus = {a};
  EXPECT_FALSE(state_.apply(replicaPlaced(state_, p, clock_.nowMs())));
  p.gpus[0].migStart = 7;  // 1g.10gb may not start at 7
  EXPECT_FALSE(state_.apply(replicaPlaced(state_, p, clock_.nowMs())));
  p.gpus[0].migStart = 0;
  ASSERT_TRUE(state_.apply(replicaPlaced(state_, p, clock_.nowMs())));
  EXPECT_EQ(state_.gpu(g).migInstances.size(), 2u);
  EXPECT_EQ(state_.placeableMemoryMib(g), 40 * kGib);  // the free declared 3g.40gb
  EXPECT_TRUE(state_.checkInvariants());

  // The declared instance can be occupied as it is.
  Placement q = p;
  q.replicaId = "m2";
  q.gpus[0].migProfile = idx("3g.40gb");
  q.gpus[0].migStart = 4;
  q.gpus[0].reservedMib = 40 * kGib;
  ASSERT_TRUE(state_.apply(replicaPlaced(state_, q, clock_.nowMs())));
  EXPECT_EQ(state_.gpu(g).migInstances.size(), 2u);

  ASSERT_TRUE(state_.apply(ReplicaUnloaded{"m1"}));  // dynamic instance disappears
  ASSERT_TRUE(state_.apply(ReplicaUnloaded{"m2"}));  // declared instance stays, free
  EXPECT_EQ(state_.gpu(g).migInstances.size(), 1u);
  EXPECT_EQ(state_.gpu(g).migSlotsUsed, 0xF0u);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(ClusterStateTest, IllegalDeclaredMigLayoutIsRejected) {
  model::NodeSpec n = node("mig", "A100-80GB", 1);
  n.gpus[0].migEnabled = true;
  n.gpus[0].migInstances = {{"4g.40gb", 0}, {"3g.40gb", 0}};
  auto r = state_.apply(NodeAdded{n});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("3g.40gb"), std::string::npos);
  model::NodeSpec l4 = node("l4", "L4", 1);
  l4.gpus[0].migEnabled = true;
  EXPECT_FALSE(state_.apply(NodeAdded{l4}));
}

TEST_F(ClusterStateTest, TimeSlicingLimitsReplicaCount) {
  model::NodeSpec n = node("ts", "L4", 1);
  n.gpus[0].timeSlicingReplicas = 2;
  ASSERT_TRUE(state_.apply(NodeAdded{n}));
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "a", "ts", "0", kGib, kGib, 10), clock_.nowMs())));
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "b", "ts", "0", kGib, kGib, 10), clock_.nowMs())));
  EXPECT_FALSE(state_.apply(
      replicaPlaced(state_, shared(state_, "c", "ts", "0", kGib, kGib, 10), clock_.nowMs())));
}

TEST_F(ClusterStateTest, ActivityFeedsLeastRecentlyUsedOrder) {
  ASSERT_TRUE(state_.apply(
      replicaPlaced(state_, shared(state_, "r1", "n1", "0", kGib, kGib), clock_.nowMs())));
  ASSERT_TRUE(state_.apply(ReplicaActivity{"r1", 5'000}));
  ASSERT_TRUE(state_.apply(ReplicaActivity{"r1", 4'000}));  // out of order: keeps the latest
  EXPECT_EQ(state_.replica(*state_.findReplica("r1")).lastActiveMs, 5'000);
  EXPECT_FALSE(state_.apply(ReplicaActivity{"nope", 1}));
}

TEST_F(ClusterStateTest, BadTelemetryChangesNothing) {
  EXPECT_FALSE(state_.apply(GpuTelemetry{"n1", "9", 0, 0, {}, true, clock_.nowMs()}));
  EXPECT_FALSE(state_.apply(GpuTelemetry{"n1", "0", -1, 0, {}, true, clock_.nowMs()}));
  EXPECT_FALSE(state_.apply(GpuTelemetry{"n1", "0", 0, 1001, {}, true, clock_.nowMs()}));
  EXPECT_FALSE(state_.gpu(*state_.findGpu("n1", "0")).hasTelemetry);
}

// A replica put back as it was booked: placed when it was (its reservation lapses 30 s from
// then, or has lapsed), not refused for memory that telemetry had let it share, refused for
// anything booked by request that would over-book the card.
TEST_F(ClusterStateTest, ARestoredReplicaKeepsItsPlacementTimeAndIsNotRefusedForMemory) {
  const std::int64_t card = 80 * kGib;
  ASSERT_TRUE(
      state_.apply(ReplicaRestored{state_.named(shared(state_, "old", "n1", "0", 40'000, 48'000)),
                                   -29'000,
                                   true,
                                   true,
                                   {},
                                   clock_.nowMs()}));
  ASSERT_TRUE(
      state_.apply(ReplicaRestored{state_.named(shared(state_, "new", "n1", "0", 40'000, 48'000)),
                                   0,
                                   true,
                                   false,
                                   {},
                                   clock_.nowMs()}));
  const ReplicaRecord& old = state_.replica(*state_.findReplica("old"));
  EXPECT_EQ(old.placedAtMs, -29'000);
  EXPECT_FALSE(old.reservationActive);  // 30 s after -29 s had passed at 1 s
  EXPECT_EQ(old.phase, ReplicaPhase::kLoaded);
  EXPECT_TRUE(state_.replica(*state_.findReplica("new")).reservationActive);
  EXPECT_EQ(freeMib("0"), card - 40'000 - 48'000);  // over-committed, and shown
  EXPECT_TRUE(state_.checkInvariants());
  // Nothing new goes there, and compute is still checked.
  EXPECT_FALSE(
      state_.apply(replicaPlaced(state_, shared(state_, "more", "n1", "0", 1, 1), clock_.nowMs())));
  auto compute =
      state_.apply(ReplicaRestored{state_.named(shared(state_, "busy", "n1", "0", 1, 1, 900)),
                                   0,
                                   true,
                                   false,
                                   {},
                                   clock_.nowMs()});
  ASSERT_FALSE(compute);
  EXPECT_NE(compute.error().message.find("compute"), std::string::npos);
  clock_.set(31'000);
  ASSERT_TRUE(state_.apply(ReservationsExpired{clock_.nowMs()}));
  EXPECT_FALSE(state_.replica(*state_.findReplica("new")).reservationActive);
  EXPECT_EQ(freeMib("0"), card - 80'000);
  EXPECT_TRUE(state_.checkInvariants());
}

}  // namespace
}  // namespace tessera::sched
