#include "model/inventory.h"

#include <gtest/gtest.h>

#include "model/workload.h"

namespace tessera::model {
namespace {

const Taint kGpuNoSchedule{"nvidia.com/gpu", "present", "NoSchedule"};
const Taint kGpuNoExecute{"nvidia.com/gpu", "present", "NoExecute"};
const Taint kDedicated{"dedicated", "inference", "PreferNoSchedule"};

TEST(TolerationTest, EqualMatchesKeyAndValue) {
  const Toleration t{"nvidia.com/gpu", "Equal", "present", "NoSchedule"};
  EXPECT_TRUE(t.tolerates(kGpuNoSchedule));
  EXPECT_FALSE(t.tolerates({"nvidia.com/gpu", "absent", "NoSchedule"}));
  EXPECT_FALSE(t.tolerates({"other", "present", "NoSchedule"}));
}

TEST(TolerationTest, EmptyOperatorMeansEqual) {
  const Toleration t{"nvidia.com/gpu", "", "present", ""};
  EXPECT_TRUE(t.tolerates(kGpuNoSchedule));
  EXPECT_FALSE(t.tolerates({"nvidia.com/gpu", "other", "NoSchedule"}));
}

TEST(TolerationTest, ExistsIgnoresTheValue) {
  const Toleration t{"nvidia.com/gpu", "Exists", "whatever", "NoSchedule"};
  EXPECT_TRUE(t.tolerates(kGpuNoSchedule));
  EXPECT_TRUE(t.tolerates({"nvidia.com/gpu", "", "NoSchedule"}));
  EXPECT_FALSE(t.tolerates(kDedicated));
}

TEST(TolerationTest, EmptyKeyWithExistsToleratesEverything) {
  const Toleration t{"", "Exists", "", ""};
  EXPECT_TRUE(t.tolerates(kGpuNoSchedule));
  EXPECT_TRUE(t.tolerates(kGpuNoExecute));
  EXPECT_TRUE(t.tolerates(kDedicated));
  EXPECT_TRUE(t.tolerates({"", "", ""}));
}

TEST(TolerationTest, EmptyEffectMatchesEveryEffect) {
  const Toleration t{"nvidia.com/gpu", "Exists", "", ""};
  EXPECT_TRUE(t.tolerates(kGpuNoSchedule));
  EXPECT_TRUE(t.tolerates(kGpuNoExecute));
  EXPECT_TRUE(t.tolerates({"nvidia.com/gpu", "present", "PreferNoSchedule"}));
}

TEST(TolerationTest, AGivenEffectMustMatch) {
  const Toleration t{"nvidia.com/gpu", "Exists", "", "NoExecute"};
  EXPECT_TRUE(t.tolerates(kGpuNoExecute));
  EXPECT_FALSE(t.tolerates(kGpuNoSchedule));
  // Even the tolerate-everything form is limited by its effect.
  EXPECT_FALSE((Toleration{"", "Exists", "", "NoExecute"}).tolerates(kGpuNoSchedule));
}

// As in Kubernetes, an empty key matches every key; with Equal the values must still match.
// (Kubernetes' API validation refuses this form; the matcher itself does not.)
TEST(TolerationTest, EmptyKeyWithEqualComparesValuesOnly) {
  const Toleration t{"", "Equal", "present", ""};
  EXPECT_TRUE(t.tolerates(kGpuNoSchedule));
  EXPECT_FALSE(t.tolerates(kDedicated));
}

TEST(TolerationTest, UnknownOperatorToleratesNothing) {
  EXPECT_FALSE((Toleration{"nvidia.com/gpu", "exists", "", ""}).tolerates(kGpuNoSchedule));
  EXPECT_FALSE((Toleration{"", "Gt", "", ""}).tolerates(kGpuNoSchedule));
}

TEST(TolerationTest, DefaultsAreEqualWithEmptyFields) {
  const Toleration t;
  EXPECT_EQ(t.op, "Equal");
  // Matches only a taint whose value is empty, on any key: the Kubernetes rule above.
  EXPECT_TRUE(t.tolerates({"any", "", "NoSchedule"}));
  EXPECT_FALSE(t.tolerates(kGpuNoSchedule));
}

TEST(SharingModeTest, Names) {
  EXPECT_STREQ(sharingModeName(SharingMode::kExclusive), "exclusive");
  EXPECT_STREQ(sharingModeName(SharingMode::kShared), "shared");
  EXPECT_STREQ(sharingModeName(SharingMode::kMig), "mig");
}

TEST(SharingModeTest, AllowsReadsTheBitSet) {
  EXPECT_TRUE(allows(kAllSharingModes, SharingMode::kMig));
  const SharingModes exclusiveOnly = static_cast<SharingModes>(SharingMode::kExclusive);
  EXPECT_TRUE(allows(exclusiveOnly, SharingMode::kExclusive));
  EXPECT_FALSE(allows(exclusiveOnly, SharingMode::kShared));
  EXPECT_FALSE(allows(exclusiveOnly, SharingMode::kMig));
}

TEST(ModelProfileTest, MemoryPerGpuRoundsUp) {
  ModelProfile p;
  p.weightsMib = 10000;
  p.kvCacheMib = 2001;
  p.overheadMib = 0;
  p.gpusPerReplica = 4;
  EXPECT_EQ(p.memoryPerGpuMib(), 3001);  // 12001 / 4 rounded up
  p.gpusPerReplica = 0;                  // treated as one GPU rather than dividing by zero
  EXPECT_EQ(p.memoryPerGpuMib(), 12001);
}

}  // namespace
}  // namespace tessera::model
