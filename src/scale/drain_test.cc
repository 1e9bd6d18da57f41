// The drain lifecycle: drain (fixed) → flush (until empty or the timeout) → free → gone.

#include "scale/drain.h"

#include <gtest/gtest.h>

namespace tessera::scale {
namespace {

TEST(Drain, FlushEndsWhenInFlightReachesZero) {
  ReplicaLifecycle life("r1", 1'000);
  EXPECT_EQ(life.phase(), DrainPhase::kDraining);
  EXPECT_EQ(*life.nextDeadlineMs(), 11'000);
  EXPECT_EQ(life.advance(5'000, 3), DrainPhase::kDraining);
  EXPECT_EQ(life.advance(11'000, 3), DrainPhase::kFlushing);
  EXPECT_EQ(*life.flushStartMs(), 11'000);
  EXPECT_EQ(*life.nextDeadlineMs(), 71'000);
  EXPECT_EQ(life.advance(20'000, 1), DrainPhase::kFlushing);
  EXPECT_EQ(life.advance(24'000, 0), DrainPhase::kFreeing);
  EXPECT_EQ(*life.freeStartMs(), 24'000);
  EXPECT_TRUE(life.holdsGpuMemory());
  EXPECT_EQ(*life.nextDeadlineMs(), 25'000);
  EXPECT_EQ(life.advance(24'999, 0), DrainPhase::kFreeing);
  EXPECT_EQ(life.advance(25'000, 0), DrainPhase::kGone);
  EXPECT_EQ(*life.goneMs(), 25'000);
  EXPECT_FALSE(life.holdsGpuMemory());
  EXPECT_FALSE(life.nextDeadlineMs());
  EXPECT_EQ(life.cutRequests(), 0);
}

TEST(Drain, DrainPhaseIsFixedEvenWhenEmpty) {
  ReplicaLifecycle life("r1", 0);
  EXPECT_EQ(life.advance(9'999, 0), DrainPhase::kDraining);  // routers may still send
  // empty when the drain ends: the flush ends at once
  EXPECT_EQ(life.advance(10'000, 0), DrainPhase::kFreeing);
  EXPECT_EQ(*life.flushStartMs(), 10'000);
  EXPECT_EQ(*life.freeStartMs(), 10'000);
}

TEST(Drain, FlushTimesOutAndCutsTheRest) {
  ReplicaLifecycle life("r1", 0);
  EXPECT_EQ(life.advance(10'000, 5), DrainPhase::kFlushing);
  EXPECT_EQ(life.advance(69'999, 2), DrainPhase::kFlushing);
  EXPECT_EQ(life.advance(70'000, 2), DrainPhase::kFreeing);
  EXPECT_EQ(life.cutRequests(), 2);
  EXPECT_EQ(*life.freeStartMs(), 70'000);
  EXPECT_EQ(life.advance(71'000, 0), DrainPhase::kGone);
}

TEST(Drain, OneLateCallCrossesEveryPhaseAtItsOwnTime) {
  ReplicaLifecycle life("r1", 0);
  EXPECT_EQ(life.advance(100'000, 4), DrainPhase::kGone);
  EXPECT_EQ(*life.flushStartMs(), 10'000);
  EXPECT_EQ(*life.freeStartMs(), 70'000);  // the flush timed out at 10 s + 60 s
  EXPECT_EQ(*life.goneMs(), 71'000);
  EXPECT_EQ(life.cutRequests(), 4);
}

TEST(Drain, CustomPlanAndTimeNeverGoesBack) {
  ReplicaLifecycle life("r1", 0, DrainPlan{.drainMs = 2'000, .maxFlushMs = 5'000, .freeMs = 0});
  EXPECT_EQ(life.advance(3'000, 1), DrainPhase::kFlushing);
  EXPECT_EQ(life.advance(1'000, 0), DrainPhase::kFlushing);  // earlier time: ignored
  EXPECT_EQ(life.advance(4'000, 0), DrainPhase::kGone);      // free takes no time
  EXPECT_EQ(*life.goneMs(), 4'000);
}

TEST(Drain, NeverCapacityNeverRoutable) {
  ReplicaLifecycle life("r1", 0);
  for (Millis t : {0, 10'000, 30'000, 80'000}) {
    life.advance(t, t < 30'000 ? 3 : 0);
    EXPECT_FALSE(life.countsAsCapacity()) << drainPhaseName(life.phase());
    EXPECT_FALSE(life.acceptsRequests()) << drainPhaseName(life.phase());
  }
  EXPECT_EQ(life.phase(), DrainPhase::kGone);
}

TEST(Drain, PlanIsValidated) {
  EXPECT_TRUE(validateDrainPlan({}));
  auto bad = validateDrainPlan({.drainMs = 0, .maxFlushMs = -1, .freeMs = 0});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("maxFlushMs"), std::string::npos);
}

}  // namespace
}  // namespace tessera::scale
