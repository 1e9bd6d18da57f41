// Randomised invariant tests of the cluster state and the placement engine: random clusters
// driven by random event streams, every event followed by ClusterState::checkInvariants and
// by independent checks that recompute the books and model the memory accounting by hand
// (testing/book_checks.h); every decision checked against the request's constraints, a
// hand-written oracle and a node-by-node search when nothing fits (testing/decision_checks.h).
// The cases live in invariant_cases_test.cc; this file says which mixes run and what they
// must reach.
//
// Each test prints its master seed; TESSERA_SEED=<seed> runs it again. A failure names its
// case's seed, which reproduces that case alone with TESSERA_FUZZ_ITERATIONS=1.
// TESSERA_FUZZ_ITERATIONS=<n> runs n cases per test instead of the default (a few hundred in
// all, sized for a Debug+ASan build on one slow core); use thousands for a soak.

#include <gtest/gtest.h>

#include "sched/invariant_cases.h"
#include "sched/testing/random_cluster.h"

namespace tessera::sched::invariants {
namespace {

TEST(PlacementInvariants, RandomClustersAndEventStreams) {
  const auto c = runCases("RandomClustersAndEventStreams", {}, {}, Mix{}, 100, 40);
  if (!c) return;
  EXPECT_GT(c->placed, 0);
  EXPECT_GT(c->unplaceable, 0);
  EXPECT_GT(c->placedMultiGpu, 0);
  EXPECT_GT(c->handAccepted, 0);
  EXPECT_GT(c->handRefused, 0);
  EXPECT_GT(c->refusedEvents, 0);
}

TEST(PlacementInvariants, MigHeavyClusters) {
  testkit::ClusterShape cluster;
  cluster.gpuTypes = {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "A30", "L4"};
  cluster.migProbability = 0.85;
  cluster.maxNodes = 12;
  Mix mix;
  mix.handPlace = 15;
  const auto c = runCases("MigHeavyClusters", cluster, {}, mix, 60, 40);
  if (!c) return;
  EXPECT_GT(c->placedMig, 0);
  EXPECT_GT(c->handAccepted, 0);
}

TEST(PlacementInvariants, ReservationsAndTelemetry) {
  const Mix mix{.place = 20,
                .handPlace = 4,
                .loaded = 15,
                .unloaded = 3,
                .activity = 2,
                .telemetry = 25,
                .clock = 25,
                .nodeUpdate = 1,
                .nodeRemove = 1,
                .nodeAdd = 1,
                .eviction = 0,
                .batch = 0};
  testkit::ClusterShape cluster;
  cluster.maxNodes = 6;
  const auto c = runCases("ReservationsAndTelemetry", cluster, {}, mix, 80, 50);
  if (!c) return;
  EXPECT_GT(c->lapsedAtTtl, 0);
  EXPECT_GT(c->settledEarly, 0);
}

// Few, small nodes fill up, so that evictions are needed and victims weigh exactly.
struct EvictionSetup {
  Mix mix{.place = 40,
          .handPlace = 4,
          .loaded = 8,
          .unloaded = 2,
          .activity = 6,
          .telemetry = 12,
          .clock = 4,
          .nodeUpdate = 0,
          .nodeRemove = 0,
          .nodeAdd = 0,
          .eviction = 25,
          .batch = 0};
  testkit::ClusterShape cluster;
  testkit::RequestShape requests;
  EvictionSetup() {
    cluster.maxNodes = 6;
    cluster.maxGpusPerNode = 4;
    requests.sizeWeights = {6, 6, 2, 1, 0};  // many small replicas per GPU: several victims
    requests.maxComputeMilli = 200;
  }
};

TEST(PlacementInvariants, EvictionPlans) {
  const EvictionSetup e;
  const auto c = runCases("EvictionPlans", e.cluster, e.requests, e.mix, 60, 40);
  if (!c) return;
  EXPECT_GT(c->evictionsWithVictims, 0);
  EXPECT_GT(c->evictionsImpossible, 0);
}

// Cases random seeds once failed on, kept: 16936636773867882599 advised growing a node's host
// resources from the eviction search's scratch copy, which booked less than the real state
// (the victims it put back), so the advice did not hold on the real one.
TEST(PlacementInvariants, EvictionPlansOnceFailingSeeds) {
  const EvictionSetup e;
  for (const std::uint64_t seed : {16936636773867882599ULL}) {
    runCases("EvictionPlans", e.cluster, e.requests, e.mix, 1, 40, seed);
  }
}

TEST(PlacementInvariants, BatchPlans) {
  const Mix mix{.place = 10,
                .handPlace = 2,
                .loaded = 4,
                .unloaded = 4,
                .activity = 0,
                .telemetry = 4,
                .clock = 4,
                .nodeUpdate = 0,
                .nodeRemove = 0,
                .nodeAdd = 0,
                .eviction = 0,
                .batch = 20};
  testkit::ClusterShape cluster;
  cluster.maxNodes = 16;
  const auto c = runCases("BatchPlans", cluster, {}, mix, 40, 25);
  if (!c) return;
  EXPECT_GT(c->batchAssigned, 0);
  EXPECT_GT(c->batchUnplaceable, 0);
}

}  // namespace
}  // namespace tessera::sched::invariants
