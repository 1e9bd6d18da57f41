#include "model/mig.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/gpu_catalog.h"

namespace tessera::model {
namespace {

const GpuCatalog& migCatalog() {
  static const GpuCatalog kCatalog = GpuCatalog::builtin();
  return kCatalog;
}

const GpuType& migType(std::string_view name) {
  return *migCatalog().find(name);
}

// A placement by profile name, so that tests read like the MIG guide.
MigPlacement at(const GpuType& t, std::string_view profile, int start) {
  const int index = migProfileIndex(t, profile);
  EXPECT_GE(index, 0) << profile;
  return {index, start};
}

std::vector<int> starts(const std::vector<MigPlacement>& placements) {
  std::vector<int> out;
  for (const MigPlacement& p : placements) out.push_back(p.start);
  return out;
}

bool legal(const GpuType& t, const std::vector<MigPlacement>& layout) {
  auto result = checkMigLayout(t, layout);
  EXPECT_TRUE(result.has_value()) << result.error().message;
  return result.has_value();
}

std::string errorOf(const GpuType& t, const std::vector<MigPlacement>& layout) {
  auto result = checkMigLayout(t, layout);
  EXPECT_FALSE(result.has_value());
  return result ? "" : result.error().message;
}

TEST(MigTest, SliceMasks) {
  const GpuType& t = migType("A100-80GB");
  EXPECT_EQ(migSliceMask(*t.findMigProfile("1g.10gb"), 6), 0x40U);
  EXPECT_EQ(migSliceMask(*t.findMigProfile("1g.20gb"), 6), 0xC0U);
  EXPECT_EQ(migSliceMask(*t.findMigProfile("3g.40gb"), 4), 0xF0U);
  EXPECT_EQ(migSliceMask(*t.findMigProfile("7g.80gb"), 0), 0xFFU);
  EXPECT_EQ(migSliceMask(*t.findMigProfile("7g.80gb"), -1), 0U);
  EXPECT_EQ(migSliceMask(*t.findMigProfile("7g.80gb"), 25), 0U);
  MigProfile whole{"32 slices", 1, 1, 32, {0}, 1};
  EXPECT_EQ(migSliceMask(whole, 0), 0xFFFFFFFFU);
  EXPECT_EQ(migSliceMask(t, std::vector<MigPlacement>{at(t, "4g.40gb", 0), at(t, "1g.10gb", 5)}),
            0x2FU);
}

TEST(MigTest, EmptyA100OffersEveryAllowedStart) {
  const GpuType& t = migType("A100-80GB");
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "1g.10gb"), 0)),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "1g.20gb"), 0)),
            (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "2g.20gb"), 0)),
            (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "3g.40gb"), 0)),
            (std::vector<int>{0, 4}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "7g.80gb"), 0)), (std::vector<int>{0}));
  EXPECT_EQ(freeMigStarts(t, migProfileIndex(t, "1g.10gb"), 0), 0x7FU);
}

TEST(MigTest, OccupiedSlicesNarrowTheStarts) {
  const GpuType& t = migType("A100-80GB");
  const MigSliceMask fourG = migSliceMask(*t.findMigProfile("4g.40gb"), 0);
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "3g.40gb"), fourG)),
            (std::vector<int>{4}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "2g.20gb"), fourG)),
            (std::vector<int>{4}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "1g.20gb"), fourG)),
            (std::vector<int>{4, 6}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "1g.10gb"), fourG)),
            (std::vector<int>{4, 5, 6}));
  EXPECT_TRUE(freeMigPlacements(t, migProfileIndex(t, "4g.40gb"), fourG).empty());
  EXPECT_TRUE(freeMigPlacements(t, migProfileIndex(t, "7g.80gb"), fourG).empty());
  // Slice 7 alone is free but no 1-slice profile may start there.
  EXPECT_TRUE(freeMigPlacements(t, migProfileIndex(t, "1g.10gb"), 0x7F).empty());
}

TEST(MigTest, FreeStartsOfAnInvalidProfileIndexAreNone) {
  const GpuType& t = migType("A100-80GB");
  EXPECT_EQ(freeMigStarts(t, -1, 0), 0U);
  EXPECT_EQ(freeMigStarts(t, 7, 0), 0U);
  EXPECT_EQ(freeMigStarts(migType("T4"), 0, 0), 0U);
}

TEST(MigTest, FourTwoOneIsLegalOnA100) {
  const GpuType& t = migType("A100-80GB");
  const std::vector<MigPlacement> layout{at(t, "4g.40gb", 0), at(t, "2g.20gb", 4),
                                         at(t, "1g.10gb", 6)};
  auto result = checkMigLayout(t, layout);
  EXPECT_TRUE(result.has_value()) << result.error().message;
}

TEST(MigTest, FourPlusFourIsNot) {
  const GpuType& t = migType("A100-80GB");
  // The second 4g can only start at slice 0, which the first one holds.
  std::string message = errorOf(t, {at(t, "4g.40gb", 0), at(t, "4g.40gb", 0)});
  EXPECT_NE(message.find("overlaps"), std::string::npos) << message;
  message = errorOf(t, {at(t, "4g.40gb", 0), at(t, "4g.40gb", 4)});
  EXPECT_NE(message.find("not an allowed start"), std::string::npos) << message;
  EXPECT_NE(message.find("4g.40gb@4"), std::string::npos) << message;
  EXPECT_NE(message.find("A100-80GB"), std::string::npos) << message;
}

TEST(MigTest, OtherLayoutsFromTheGuide) {
  const GpuType& t = migType("A100-40GB");
  // 4g + 3g is legal since driver R510 (the guide's note on the A100 partitioning figure).
  EXPECT_TRUE(legal(t, {at(t, "4g.20gb", 0), at(t, "3g.20gb", 4)}));
  EXPECT_TRUE(legal(t, {at(t, "3g.20gb", 0), at(t, "3g.20gb", 4)}));
  // The guide's "3-2-1-1" example geometry.
  EXPECT_TRUE(
      legal(t, {at(t, "1g.5gb", 0), at(t, "1g.5gb", 1), at(t, "2g.10gb", 2), at(t, "3g.20gb", 4)}));
  // The guide's "2-1-1-1-1-1" example geometry.
  EXPECT_TRUE(legal(t, {at(t, "1g.5gb", 0), at(t, "1g.5gb", 1), at(t, "1g.5gb", 2),
                        at(t, "1g.5gb", 3), at(t, "2g.10gb", 4), at(t, "1g.5gb", 6)}));
  // Seven 1g instances fill the card; slice 7 can take no eighth.
  std::vector<MigPlacement> seven;
  for (int s = 0; s < 7; ++s) seven.push_back(at(t, "1g.5gb", s));
  EXPECT_TRUE(checkMigLayout(t, seven).has_value());
  seven.push_back(at(t, "1g.5gb", 7));
  EXPECT_NE(errorOf(t, seven).find("not an allowed start"), std::string::npos);
}

TEST(MigTest, MaxInstancesAndTheOneMediaEngine) {
  const GpuType& a100 = migType("A100-80GB");
  std::string message = errorOf(a100, {at(a100, "1g.10gb+me", 0), at(a100, "1g.10gb+me", 1)});
  EXPECT_NE(message.find("maxInstances"), std::string::npos) << message;

  // A30's two +me profiles each take its only OFA engine.
  const GpuType& a30 = migType("A30");
  message = errorOf(a30, {at(a30, "1g.6gb+me", 0), at(a30, "2g.12gb+me", 2)});
  EXPECT_NE(message.find("+me"), std::string::npos) << message;
  EXPECT_TRUE(legal(a30, {at(a30, "1g.6gb+me", 0), at(a30, "1g.6gb", 1), at(a30, "2g.12gb", 2)}));
}

TEST(MigTest, LegalPlacementsRespectCountsAndMedia) {
  const GpuType& t = migType("A100-80GB");
  const int me = migProfileIndex(t, "1g.10gb+me");
  const int one = migProfileIndex(t, "1g.10gb");
  const std::vector<MigPlacement> withMe{{me, 0}};
  EXPECT_TRUE(legalMigPlacements(t, me, withMe).empty());
  EXPECT_EQ(starts(legalMigPlacements(t, one, withMe)), (std::vector<int>{1, 2, 3, 4, 5, 6}));

  // 1g.20gb has four starts and maxInstances 4; after three, one start is left.
  const int twoSlice = migProfileIndex(t, "1g.20gb");
  const std::vector<MigPlacement> three{{twoSlice, 0}, {twoSlice, 2}, {twoSlice, 4}};
  EXPECT_EQ(legalMigPlacements(t, twoSlice, three), (std::vector<MigPlacement>{{twoSlice, 6}}));

  std::vector<MigPlacement> full;
  for (int s = 0; s < 7; ++s) full.push_back({one, s});
  EXPECT_TRUE(legalMigPlacements(t, one, full).empty());
  // An illegal starting layout offers nothing.
  EXPECT_TRUE(legalMigPlacements(t, one, std::vector<MigPlacement>{{one, 0}, {one, 0}}).empty());
}

TEST(MigTest, A30Geometry) {
  const GpuType& t = migType("A30");
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "1g.6gb"), 0)),
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "2g.12gb"), 0)),
            (std::vector<int>{0, 2}));
  EXPECT_EQ(starts(freeMigPlacements(t, migProfileIndex(t, "4g.24gb"), 0)), (std::vector<int>{0}));
  EXPECT_FALSE(checkMigLayout(t, std::vector<MigPlacement>{at(t, "2g.12gb", 1)}).has_value());
  EXPECT_EQ(migComputeSlices(t), 4);
}

TEST(MigTest, ComputeSlices) {
  EXPECT_EQ(migComputeSlices(migType("A100-40GB")), 7);
  EXPECT_EQ(migComputeSlices(migType("H200")), 7);
  EXPECT_EQ(migComputeSlices(migType("T4")), 0);
}

TEST(MigTest, MediaExtendedProfiles) {
  const GpuType& t = migType("H100-80GB");
  EXPECT_TRUE(isMediaExtended(*t.findMigProfile("1g.10gb+me")));
  EXPECT_FALSE(isMediaExtended(*t.findMigProfile("1g.10gb")));
  EXPECT_FALSE(isMediaExtended(MigProfile{"me", 1, 1, 1, {0}, 1}));
}

TEST(MigTest, LayoutsOnCardsWithoutMig) {
  const GpuType& t4 = migType("T4");
  EXPECT_TRUE(checkMigLayout(t4, std::vector<MigPlacement>{}).has_value());
  const std::string message = errorOf(t4, {{0, 0}});
  EXPECT_NE(message.find("T4"), std::string::npos) << message;
  EXPECT_NE(errorOf(migType("A100-80GB"), {{9, 0}}).find("index 9"), std::string::npos);
}

TEST(MigTest, ResolvesDeclaredInstances) {
  const GpuType& t = migType("H100-80GB");
  const std::vector<MigInstanceSpec> declared{{"3G.40GB", 4}, {"2g.20gb", 0}, {"1g.10gb", 2}};
  auto layout = resolveMigInstances(t, declared);
  ASSERT_TRUE(layout.has_value()) << layout.error().message;
  EXPECT_EQ(*layout, (std::vector<MigPlacement>{at(t, "3g.40gb", 4), at(t, "2g.20gb", 0),
                                                at(t, "1g.10gb", 2)}));

  auto unknown =
      resolveMigInstances(t, std::vector<MigInstanceSpec>{{"1g.10gb", 0}, {"1g.5gb", 1}});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("migInstances[1].profile"), std::string::npos)
      << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("7g.80gb"), std::string::npos);  // lists known ones

  auto overlap =
      resolveMigInstances(t, std::vector<MigInstanceSpec>{{"7g.80gb", 0}, {"1g.10gb", 3}});
  ASSERT_FALSE(overlap.has_value());
  EXPECT_NE(overlap.error().message.find("overlaps"), std::string::npos);
}

// Every layout the placement table allows, built by adding one legal placement at a time, is
// accepted by checkMigLayout and stays within the card's SM slices and memory: the placement
// table alone keeps compute within 7/7 (4/4 on A30), so checkMigLayout need not count it.
TEST(MigTest, EveryReachableLayoutFitsTheCard) {
  for (const char* name : {"A30", "A100-40GB", "A100-80GB", "H100-80GB", "H200"}) {
    const GpuType& t = migType(name);
    std::vector<MigPlacement> all;
    for (int p = 0; p < static_cast<int>(t.migProfiles.size()); ++p) {
      for (int s : t.migProfiles[static_cast<std::size_t>(p)].allowedStarts) all.push_back({p, s});
    }
    int layouts = 0;
    std::vector<MigPlacement> layout;
    // Depth-first over subsets in index order, so that each set is visited once.
    auto visit = [&](auto&& self, std::size_t from) -> void {
      ++layouts;
      int compute = 0;
      std::int64_t memory = 0;
      for (const MigPlacement& p : layout) {
        compute += t.migProfiles[static_cast<std::size_t>(p.profile)].computeSlices;
        memory += t.migProfiles[static_cast<std::size_t>(p.profile)].memoryMib;
      }
      EXPECT_LE(compute, migComputeSlices(t)) << name;
      EXPECT_LE(memory, *t.memoryMib) << name;
      for (std::size_t i = from; i < all.size(); ++i) {
        const auto legal = legalMigPlacements(t, all[i].profile, layout);
        if (std::find(legal.begin(), legal.end(), all[i]) == legal.end()) continue;
        layout.push_back(all[i]);
        EXPECT_TRUE(checkMigLayout(t, layout).has_value()) << name;
        self(self, i + 1);
        layout.pop_back();
      }
    };
    visit(visit, 0);
    EXPECT_GT(layouts, 20) << name;
  }
}

}  // namespace
}  // namespace tessera::model
