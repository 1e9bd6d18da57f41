#include "sched/mig_choice.h"

#include <gtest/gtest.h>

#include "sched/plugin_test_support.h"

namespace tessera::sched {
namespace {

using testing::kGib;
using testing::makeRequest;
using testing::nodeSpec;

class MigChoiceTest : public testing::PluginTest {
 protected:
  GpuId addMigGpu(const std::string& type, std::vector<model::MigInstanceSpec> instances = {}) {
    auto spec = nodeSpec("m" + std::to_string(state_.nodes().size()), type, 1);
    spec.gpus[0].migEnabled = true;
    spec.gpus[0].migInstances = std::move(instances);
    const NodeId n = addNode(spec);
    return state_.node(n).gpuIds[0];
  }
  std::string nameOf(GpuId g, const MigChoice& c) const {
    const auto& type = catalog_.at(state_.gpu(g).typeIndex);
    return type.migProfiles[static_cast<std::size_t>(c.profileIndex)].name + "@" +
           std::to_string(c.start) + (c.creates ? "+create" : "");
  }
  std::optional<MigChoice> choose(GpuId g, const model::PlacementRequest& r) const {
    return chooseMigSlice(state_, g, r, needsOf(r));
  }
};

TEST_F(MigChoiceTest, SmallSliceGoesToTheTopOfAnEmptyCard) {
  const GpuId g = addMigGpu("A100-40GB");
  auto c = choose(g, makeRequest("r", 4 * kGib));  // 4916 MiB: 1g.5gb
  ASSERT_TRUE(c);
  // Slice 6 keeps slices 0-3 for a 4g.20gb (allowed only at 0) and 0-5 for 2g/1g.10gb pairs.
  EXPECT_EQ(nameOf(g, *c), "1g.5gb@6+create");
  EXPECT_EQ(migPlaceableAfterMib(state_, g, *c), 20480);
}

TEST_F(MigChoiceTest, RepeatedSmallSlicesKeepTheBigProfileCreatable) {
  const GpuId g = addMigGpu("A100-40GB");
  const auto r = makeRequest("r", 4 * kGib);
  for (int i = 0; i < 3; ++i) placeMig("s" + std::to_string(i), g, r);
  // Three 1g slices in slices 4-7 leave 0-3 whole: a 4g.20gb still fits.
  EXPECT_EQ(state_.placeableMemoryMib(g), 20480);
  EXPECT_EQ(state_.gpu(g).migSlotsUsed & 0x0Fu, 0u);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(MigChoiceTest, ReusesAFreeInstanceUnlessASmallerOneCanBeMade) {
  const GpuId g = addMigGpu("A100-40GB", {{"3g.20gb", 4}, {"2g.10gb", 0}});
  // 4 GiB fits a 1g.5gb, which slices 2-3 can still hold: carve it, keep the 2g.10gb free.
  auto small = choose(g, makeRequest("r", 4 * kGib));
  ASSERT_TRUE(small);
  EXPECT_TRUE(small->creates);
  EXPECT_EQ(nameOf(g, *small).rfind("1g.5gb@", 0), 0u) << nameOf(g, *small);
  // 7 GiB (8.4 GiB with the safety factor) needs a 10 GiB slice: a 1g.10gb has the memory of
  // the free 2g.10gb with half its SMs, so it is carved and the 2g stays for a bigger model.
  auto mid = choose(g, makeRequest("m", 7 * kGib));
  ASSERT_TRUE(mid);
  EXPECT_EQ(nameOf(g, *mid), "1g.10gb@2+create");
  placeMig("a", g, makeRequest("a", 7 * kGib));
  // Now nothing can be carved: the next 10 GiB model reuses the free 2g.10gb.
  auto reuse = choose(g, makeRequest("c", 7 * kGib));
  ASSERT_TRUE(reuse);
  EXPECT_EQ(nameOf(g, *reuse), "2g.10gb@0");
  EXPECT_EQ(migPlaceableAfterMib(state_, g, *reuse), 20480);  // the 3g.20gb stays free
  // 12 GiB needs 20 GiB: only the declared 3g.20gb at slice 4 holds it.
  auto big = choose(g, makeRequest("b", 12 * kGib));
  ASSERT_TRUE(big);
  EXPECT_EQ(nameOf(g, *big), "3g.20gb@4");
}

TEST_F(MigChoiceTest, HonoursTheModelsProfileFloor) {
  const GpuId g = addMigGpu("A100-40GB");
  auto r = makeRequest("r", 1 * kGib);
  r.model.migProfile = "2g.10gb";  // a profile of this card: at least its memory and SMs
  auto c = choose(g, r);
  ASSERT_TRUE(c);
  EXPECT_EQ(catalog_.at(state_.gpu(g).typeIndex)
                .migProfiles[static_cast<std::size_t>(c->profileIndex)]
                .name,
            "2g.10gb");

  r.model.migProfile = "1g.20gb";  // an 80 GB card's name: compared by its figures
  c = choose(g, r);
  ASSERT_TRUE(c);
  EXPECT_EQ(nameOf(g, *c), "3g.20gb@4+create");

  r.model.migProfile = "huge";  // unreadable: nothing qualifies
  EXPECT_FALSE(choose(g, r));
}

TEST_F(MigChoiceTest, NothingOnAFullOrNonMigCard) {
  const GpuId g = addMigGpu("A100-40GB");
  placeMig("all", g, makeRequest("all", 30 * kGib));
  EXPECT_FALSE(choose(g, makeRequest("r", 1 * kGib)));
  EXPECT_EQ(migAvailability(state_, g).largestCreatableMib, 0);

  const NodeId plain = addNode(nodeSpec("p", "A100-40GB", 1));
  EXPECT_FALSE(choose(state_.node(plain).gpuIds[0], makeRequest("r", 1 * kGib)));
}

TEST_F(MigChoiceTest, AvailabilitySeparatesFreeFromCreatable) {
  const GpuId g = addMigGpu("A100-80GB", {{"1g.10gb", 0}});
  const MigAvailability a = migAvailability(state_, g);
  EXPECT_EQ(a.largestFreeMib, 10240);
  EXPECT_EQ(a.largestCreatableMib, 40960);  // 3g.40gb at 4
}

// EngineOptions::migCreation false (a DRA cluster publishes the instances that exist): only a
// free existing instance is chosen, nothing counts as creatable, and the books refuse a
// placement that would make one.
TEST_F(MigChoiceTest, WithoutCreationOnlyFreeInstancesAreChosen) {
  EngineOptions noCreate;
  noCreate.migCreation = false;
  ClusterState s(catalog_, clock_, noCreate);
  auto spec = nodeSpec("fixed", "A100-80GB", 1);
  spec.gpus[0].migEnabled = true;
  spec.gpus[0].migInstances = {{"3g.40gb", 0}};
  ASSERT_TRUE(s.apply(NodeAdded{spec}));
  const GpuId g = s.node(*s.findNode("fixed")).gpuIds[0];
  const model::PlacementRequest small = makeRequest("small", 5 * kGib);
  // With creation a 1g slice would be carved; without, the free 3g.40gb is the only choice.
  const auto c = chooseMigSlice(s, g, small, needsOf(small));
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->creates);
  EXPECT_EQ(c->start, 0);
  EXPECT_EQ(
      catalog_.at(s.gpu(g).typeIndex).migProfiles[static_cast<std::size_t>(c->profileIndex)].name,
      "3g.40gb");
  EXPECT_EQ(migAvailability(s, g).largestCreatableMib, 0);
  EXPECT_EQ(s.placeableMemoryMib(g), 40960);
  // Once it is taken, nothing is left, although the card has unused memory slices.
  Placement p;
  p.replicaId = "small";
  p.mode = model::SharingMode::kMig;
  p.node = s.gpu(g).node;
  p.gpus.push_back({g, 5 * 1024, 6 * 1024, 0, 0, c->profileIndex, c->start});
  ASSERT_TRUE(s.apply(replicaPlaced(s, p, s.clock().nowMs())));
  EXPECT_FALSE(chooseMigSlice(s, g, small, needsOf(small)));
  EXPECT_EQ(s.placeableMemoryMib(g), 0);
  // And a placement that would create an instance is refused by the books.
  Placement made = p;
  made.replicaId = "made";
  made.gpus[0].migProfile = 0;
  made.gpus[0].migStart = 6;
  auto refused = s.apply(replicaPlaced(s, made, s.clock().nowMs()));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("is not available"), std::string::npos)
      << refused.error().message;
}

TEST_F(MigChoiceTest, ProfileFloorHelper) {
  const auto& type = *catalog_.find("A100-80GB");
  const auto idx = [&](const char* name) {
    return static_cast<int>(type.findMigProfile(name) - type.migProfiles.data());
  };
  EXPECT_TRUE(migProfileAtLeast(type, idx("3g.40gb"), ""));
  EXPECT_TRUE(migProfileAtLeast(type, idx("3g.40gb"), "2g.20gb"));
  EXPECT_FALSE(migProfileAtLeast(type, idx("1g.20gb"), "2g.20gb"));
  EXPECT_TRUE(migProfileAtLeast(type, idx("4g.40gb"), "3g.35gb"));  // not this card's name
  EXPECT_FALSE(migProfileAtLeast(type, -1, ""));
}

}  // namespace
}  // namespace tessera::sched
