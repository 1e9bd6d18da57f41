// The reconciler (scale/reconcile.h): what a decision places and retires, and the share rule.

#include "scale/reconcile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "scale/queueing.h"
#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::Rep;

Decision wants(int desired, int warm = 0, std::vector<std::string> victims = {}) {
  Decision d;
  d.desiredReplicas = d.recommendedReplicas = desired;
  d.warmReplicas = warm;
  d.victims = std::move(victims);
  return d;
}

ReplicaSignals unplaced(const std::string& id) {
  ReplicaSignals r = Rep(id).loading();
  r.unplaced = true;
  return r;
}

TEST(Reconcile, PlacesDesiredPlusWarmCountingOnlyPlacedReplicas) {
  // 2 placed (one ready, one loading); a draining one and an unplaced one do not count.
  const DeploymentSignals s =
      testing::at(0, {Rep("a"), Rep("b").loading(), Rep("c").draining(), unplaced("d")});
  const ReconcilePlan p = planReconcile(wants(3, 1), s);
  EXPECT_EQ(p.target, 4);
  EXPECT_EQ(p.placed, 2);
  EXPECT_EQ(p.place, 2);
  EXPECT_TRUE(p.retire.empty());
  EXPECT_FALSE(p.share);  // no share rule asked for
}

TEST(Reconcile, TheLimitCapsTheTarget) {
  const ReconcilePlan p = planReconcile(wants(10, 2), testing::at(0, {Rep("a")}), {.limit = 4, .share = std::nullopt});
  EXPECT_EQ(p.target, 4);
  EXPECT_EQ(p.place, 3);
  // Above the limit already: retire down to it.
  const ReconcilePlan q =
      planReconcile(wants(10), testing::at(0, {Rep("a"), Rep("b"), Rep("c")}), {.limit = 2, .share = std::nullopt});
  EXPECT_EQ(q.retire.size(), 1u);
}

TEST(Reconcile, RetiresTheDecisionsVictimsFirstThenByPriorityLoadAndAge) {
  const DeploymentSignals s = testing::at(
      0, {Rep("busy").running(9).created(1), Rep("idle-old").created(2),
          Rep("idle-new").created(3), Rep("loading").loading().created(4), Rep("gone").draining(),
          unplaced("pending")});
  // Victims that are not placed (draining, unplaced, unknown) are skipped, duplicates once.
  const ReconcilePlan p =
      planReconcile(wants(1, 0, {"gone", "pending", "nobody", "busy", "busy"}), s);
  EXPECT_EQ(p.placed, 4);
  EXPECT_EQ(p.place, 0);
  EXPECT_EQ(p.retire, (std::vector<std::string>{"busy", "loading", "idle-new"}));
  // No victims named: chooseVictims' order.
  EXPECT_EQ(planReconcile(wants(2), s).retire, (std::vector<std::string>{"loading", "idle-new"}));
  EXPECT_TRUE(planReconcile(wants(4), s).retire.empty());
}

// λ = 2 / s; prompts take 100 ms on replicas holding half a GPU: 50 ms on a whole one.
DeploymentSignals measured(double rate, double meanPrefillMs, double p99PrefillMs,
                           double fraction = 0.5) {
  ReplicaSignals r = Rep("a");
  r.gpuFraction = fraction;
  ReplicaSignals loading = Rep("b").loading();
  loading.gpuFraction = fraction;
  DeploymentSignals s = testing::at(0, {r, loading});
  s.arrivalRatePerSec = rate;
  s.meanPrefillMs = meanPrefillMs;
  s.prefillP99Ms = p99PrefillMs;
  return s;
}

// The same with only the ready replica placed.
DeploymentSignals single(double rate, double meanPrefillMs, double p99PrefillMs,
                         double fraction = 0.5) {
  DeploymentSignals s = measured(rate, meanPrefillMs, p99PrefillMs, fraction);
  s.replicas.pop_back();
  return s;
}

ShareRule rule(std::optional<double> slo = 2000) {
  ShareRule r;
  r.sloTtftMs = slo;
  return r;
}

// KV cache proportional to what is left after 0.2 of a GPU of weights: a quarter holds 0.05 / 0.8
// of a whole GPU's, a half 0.3 / 0.8, three quarters 0.55 / 0.8.
ShareRule shrinking() {
  ShareRule r = rule();
  r.kvScale = [](std::int32_t milli) { return std::max(0.0, milli / 1000.0 - 0.2) / 0.8; };
  return r;
}

// Memory-bound on half shares: 24 sequences a replica (64 on a whole GPU), S on the half share.
DeploymentSignals bound(double serviceMs) {
  DeploymentSignals s = measured(2, 100, 300);
  s.meanServiceMs = serviceMs;
  s.replicas[0].maxConcurrency = 24;
  return s;
}

TEST(ShareRule, TheCheapestShareThatKeepsTheTailAndTheWait) {
  // Measured on half shares: 50 ms on a whole GPU, p99 150 ms (cs² 0.33); two replicas placed
  // (one ready, one loading), three asked for. A quarter keeps the p99 prompt within half the
  // target (600 ms of 1000) and, at 2 prompts/s of 200 ms, a prompt on one quarter waits past
  // 2000 - 600 ms with 0.4 × exp(-(5 - 2) × 2 / 1.33 × 1.4) = 0.07 % probability: the demand
  // needs 0.66 quarter replicas, so one more quarter does.
  auto d = chooseShare(measured(2, 100, 300), 3, rule());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 250) << d->reason;
  EXPECT_EQ(d->replicas, 1);
  // A slow p99 prompt: 1200 ms on the half share = 600 ms whole; half the target needs 0.6.
  // Prompts of 100 ms whole (cs² 1.6): three quarters waits past 1.2 s with 0.15 %.
  d = chooseShare(measured(2, 200, 1200), 3, rule());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 750) << d->reason;
  // The same p99 over prompts of 50 ms (p99 twelve times the mean, cs² 15): the demand needs
  // 1.6 three-quarter replicas (one waits past 1.2 s with 1.9 %, behind the slow ones). The
  // replica placed cannot serve on its half share, so only the new one counts: a whole GPU.
  d = chooseShare(single(2, 100, 1200), 2, rule());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 1000) << d->reason;
  EXPECT_EQ(d->replicas, 1);
  // The model needs half a GPU's memory
  ShareRule big = rule();
  big.minShareMilli = 500;
  EXPECT_EQ(chooseShare(measured(2, 100, 300), 3, big)->milli, 500);
  // ... and nothing smaller than the share asked for, here three quarters.
  EXPECT_EQ(chooseShare(measured(2, 100, 300), 3, rule(), 750)->milli, 750);
  // Measured on whole GPUs the same prompts are twice as long: the p99 needs 0.3 → half
  EXPECT_EQ(chooseShare(measured(2, 100, 300, 1.0), 3, rule())->milli, 500);
  // What the placed replicas hold is not placed again.
  d = chooseShare(measured(2, 100, 300), 2, rule());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->replicas, 0) << d->reason;
}

TEST(ShareRule, WithoutAMemoryModelTheCountIsWhatWasAsked) {
  // Ten times the traffic on half shares: the demand needs 2.4 half replicas (a quarter: 6.6).
  // Five asked for over two placed: three more, and five quarters would each carry more than a
  // quarter's worth (6.6 / 5): three halves. Without a memory model nothing converts: the count
  // stays what was asked on any share.
  auto d = chooseShare(measured(20, 100, 300), 5, rule());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 500) << d->reason;
  EXPECT_EQ(d->replicas, 3);
  // Seven asked for: seven replicas carry the quarters' 6.6: five more quarters (1.25 GPUs).
  d = chooseShare(measured(20, 100, 300), 7, rule());
  EXPECT_EQ(d->milli, 250) << d->reason;
  EXPECT_EQ(d->replicas, 5);
}

TEST(ShareRule, HowBusyAShareMayBeComesFromTheTargetNotAConstant) {
  // Uniform prompts (p99 twice the mean, cs² 0.11), 50 ms each on a GPU, one whole replica
  // placed and two asked for. At 7 prompts/s each quarter takes 3.5, is 70 % busy, and a
  // prompt waits past 1.6 s with 0.7 × exp(-(5 - 3.5) × 2 / 1.11 × 1.6) = 0.92 %: within 1 % (a
  // fixed 60 % cap would ask for half a GPU); at 8 prompts/s, 80 % busy, 4.5 %: half.
  EXPECT_EQ(chooseShare(single(7, 50, 100, 1.0), 2, rule())->milli, 250);
  EXPECT_EQ(chooseShare(single(8, 50, 100, 1.0), 2, rule())->milli, 500);
  // A stricter target asks for more: at 99.9 % the quarter's 0.92 % is too much.
  ShareRule strict = rule();
  strict.sloTarget = 0.999;
  EXPECT_EQ(chooseShare(single(7, 50, 100, 1.0), 2, strict)->milli, 500);
  // The same mean with a long tail of prompts (p99 ten times the mean, cs² 6.7) waits longer:
  // at 14 prompts/s of 25 ms a quarter keeps the p99 prompt within half the target but not the
  // wait (32 %); uniform ones fit a quarter.
  EXPECT_EQ(chooseShare(single(14, 25, 50, 1.0), 2, rule())->milli, 250);
  EXPECT_EQ(chooseShare(single(14, 25, 250, 1.0), 2, rule())->milli, 500);
}

TEST(ShareRule, SaysNothingWithoutSomethingToSizeFrom) {
  EXPECT_FALSE(chooseShare(measured(2, 100, 300), 3, rule(std::nullopt)));  // no SLO
  DeploymentSignals s = measured(2, 100, 300);
  s.meanPrefillMs.reset();
  EXPECT_FALSE(chooseShare(s, 3, rule()));
  s = measured(2, 100, 300);
  s.arrivalRatePerSec.reset();
  EXPECT_FALSE(chooseShare(s, 3, rule()));
  s = measured(2, 100, 300);
  s.replicas = {Rep("only-loading").loading()};
  EXPECT_FALSE(chooseShare(s, 3, rule()));
  // Not a number: nothing to size from either.
  s = measured(2, 100, 300);
  s.prefillP99Ms = std::nan("");
  EXPECT_FALSE(chooseShare(s, 3, rule()));
  // Without a p99 the mean stands in for it.
  s = measured(2, 100, 300);
  s.prefillP99Ms.reset();
  EXPECT_EQ(chooseShare(s, 3, rule())->milli, 250);
  // A step beyond a whole GPU: whole GPUs.
  ShareRule coarse = rule();
  coarse.stepMilli = 2000;
  const auto d = chooseShare(measured(2, 100, 300), 3, coarse);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 1000);
  EXPECT_EQ(d->replicas, 1);
}

TEST(ShareRule, WhereMemoryBindsALargerShareReplacesSeveral) {
  // Two halves placed (one ready), 5 s in service on the half share (2.5 s on a whole GPU). In
  // flight on a quarter: 2 × 2.5 / 0.25 = 20 requests; its 64 × 0.05 / 0.8 = 4 slots hold 1.28
  // in flight at 99 % (Poisson; 3.2 at the 0.8 target), so 15.6 replicas; on a half 10 against
  // min(19.2, 14.9) (0.67). One more asked for: a half.
  auto d = chooseShare(bound(5000), 3, shrinking());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 500) << d->reason;
  // A smaller share serves only if the demand needs no more of its replicas than the whole
  // number it needs of the halves (here 1): 1.5 s on the half (0.75 s whole) is 6 in flight on a
  // quarter, 4.7 quarters, though three replicas would carry them: a half. 0.6 s is 2.4 in
  // flight, 1.9 quarters: within the quarter's 3.2 slots at the target, but with four slots a
  // replica overflows more than 1 % of the time above 1.28 in flight: a half. 0.3 s is 1.2 in
  // flight, 0.94 quarters: a quarter.
  EXPECT_EQ(chooseShare(bound(1500), 3, shrinking())->milli, 500);
  EXPECT_EQ(chooseShare(bound(600), 3, shrinking())->milli, 500);
  EXPECT_EQ(chooseShare(bound(300), 3, shrinking())->milli, 250);
  // 50 s in service: 6.7 halves needed (100 in flight, 14.9 a half), 1.05 whole GPUs (50 in
  // flight on a whole GPU's 64 slots, which hold 47.7 at 99 %: the weights take the same memory
  // on any share, so a whole GPU holds 2.7 halves' slots at twice the speed). A whole replica is
  // worth 6.7 / 1.05 = 6.4 halves: 38 more halves asked for are 6 whole GPUs, not 19.
  d = chooseShare(bound(50000), 40, shrinking());
  EXPECT_EQ(d->milli, 1000) << d->reason;
  EXPECT_EQ(d->replicas, 6);
  // Two more halves asked for: one three-quarter replica (2.16 needed: worth 3.1 halves).
  d = chooseShare(bound(50000), 4, shrinking());
  EXPECT_EQ(d->milli, 750) << d->reason;
  EXPECT_EQ(d->replicas, 1);
  // Without the replicas' concurrency there is nothing to check memory against.
  DeploymentSignals unreported = bound(50000);
  unreported.replicas[0].maxConcurrency = 0;
  EXPECT_EQ(chooseShare(unreported, 3, shrinking())->milli, 250);
}

TEST(ShareRule, UnderOneReplicasNeedTheCountIsAFloor) {
  // 5 s in service: the demand needs 0.52 halves. Three more asked for (a warm pool, a
  // minimum) stay three, on the cheapest share that carries the demand: halves.
  auto d = chooseShare(bound(5000), 5, shrinking());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 500) << d->reason;
  EXPECT_EQ(d->replicas, 3);
}

TEST(ShareRule, ASmallerShareFitsTheRoundedNeed) {
  // Measured on whole GPUs, 2 s in service, 64 sequences each: 20 prompts/s of 50 ms (p99 150)
  // need 1.09 whole replicas, 2 once rounded, and 1.52 three-quarter replicas fit in those 2:
  // two more asked for are two three-quarter replicas (1.5 GPUs).
  DeploymentSignals s = single(20, 50, 150, 1.0);
  s.meanServiceMs = 2000;
  s.replicas[0].maxConcurrency = 64;
  const auto d = chooseShare(s, 3, shrinking());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->milli, 750) << d->reason;
  EXPECT_EQ(d->replicas, 2);
}

TEST(Reconcile, NewReplicasTakeTheRulesShareForWhatWasAsked) {
  ReconcileOptions o;
  o.share = rule();
  // Three more asked for (two placed): halves (over five replicas quarters would be too busy).
  const ReconcilePlan p = planReconcile(wants(5), measured(20, 100, 300), o);
  EXPECT_EQ(p.place, 3);
  ASSERT_TRUE(p.share);
  EXPECT_EQ(p.share->milli, 500);
  // Where a larger share holds more, fewer replicas are placed than were asked for: 38 more
  // halves of a memory-bound deployment are 6 whole GPUs...
  ReconcileOptions memory;
  memory.share = shrinking();
  DeploymentSignals loading = bound(50000);
  const ReconcilePlan whole = planReconcile(wants(40), loading, memory);
  ASSERT_TRUE(whole.share);
  EXPECT_EQ(whole.share->milli, 1000) << whole.share->reason;
  EXPECT_EQ(whole.place, 6);
  // ... and while they load, the next sync asking for the same 40 places nothing more: each
  // loading whole GPU counts as the 6.4 halves it is worth.
  for (int i = 0; i < whole.place; ++i) {
    ReplicaSignals r = Rep("whole-" + std::to_string(i)).loading();
    r.gpuFraction = 1;
    loading.replicas.push_back(r);
  }
  const ReconcilePlan next = planReconcile(wants(40), loading, memory);
  EXPECT_EQ(next.place, 0) << (next.share ? next.share->reason : "");
  // Once they serve, the recommender counts in replicas of about a whole GPU and asks for 3; the
  // governor still holds 40 (counted in halves). The held count keeps replicas from retiring
  // but places none.
  DeploymentSignals served = loading;
  for (ReplicaSignals& r : served.replicas) {
    if (r.gpuFraction == 1) {
      r.phase = ReplicaPhase::kReady;
      r.maxConcurrency = 64;
    }
  }
  Decision held = wants(40);
  held.recommendedReplicas = 3;
  EXPECT_EQ(planReconcile(held, served, memory).place, 0);
  // Below the floor, the floor: 12 asked for at least, over the 8 placed.
  ReconcileOptions floored = memory;
  floored.minReplicas = 12;
  EXPECT_GT(planReconcile(held, served, floored).place, 0);
  // Scale-down and holding say nothing about shares.
  EXPECT_FALSE(planReconcile(wants(1), measured(20, 100, 300), o).share);
  // Shares below a GPU only grow: with a three-quarter replica placed, new ones take that.
  DeploymentSignals mixed = measured(20, 100, 300);
  ReplicaSignals big = Rep("three-quarters");
  big.gpuFraction = 0.75;
  mixed.replicas.push_back(big);
  const ReconcilePlan q = planReconcile(wants(5), mixed, o);
  ASSERT_TRUE(q.share);
  EXPECT_EQ(q.share->milli, 750) << q.share->reason;
  // A whole-GPU replica (the profile's, before any measurement) does not hold the rule back:
  // halves (4.1 of them needed, five replicas carry them).
  mixed.replicas.back().gpuFraction = 1;
  const ReconcilePlan r = planReconcile(wants(5), mixed, o);
  ASSERT_TRUE(r.share);
  EXPECT_EQ(r.share->milli, 500) << r.share->reason;
}

TEST(Reconcile, WithSharesTheSmallestRetireFirst) {
  ReplicaSignals quarter = Rep("quarter").running(9);
  quarter.gpuFraction = 0.25;
  ReplicaSignals half = Rep("half").running(5);
  half.gpuFraction = 0.5;
  const DeploymentSignals s = testing::at(0, {Rep("whole-idle"), half, quarter});
  ReconcileOptions o;
  o.share = rule();
  EXPECT_EQ(planReconcile(wants(1, 0, {"whole-idle"}), s, o).retire,
            (std::vector<std::string>{"quarter", "half"}));
  // Without a share rule, the decision's order.
  EXPECT_EQ(planReconcile(wants(2, 0, {"whole-idle"}), s).retire,
            (std::vector<std::string>{"whole-idle"}));
}

// Randomised, prefill alone (the server's rule): the count is what was asked on any share; the
// chosen share is allowed, keeps the slow prompts within half the target and, with the demand
// spread over all the replicas, the wait tail; and no smaller allowed share does.
TEST(ShareRule, ThePrefillRuleTakesTheSmallestShareTheReplicasCarry) {
  const unsigned seed = std::random_device{}();
  std::printf("ShareRule.ThePrefillRuleTakesTheSmallestShareTheReplicasCarry seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 2000; ++i) {
    const double rate = 50 * u(rng);
    const double mean = 1 + 500 * u(rng);
    const double p99 = mean * (1 + 4 * u(rng));
    const double fraction = 0.25 + 0.75 * u(rng);
    const int asked = 1 + static_cast<int>(8 * u(rng));
    const int target = 1 + asked;  // one placed
    const double slo = 200 + 3000 * u(rng);
    ShareRule r = rule(slo);
    r.minShareMilli = u(rng) < 0.3 ? 500 : 0;
    r.sloTarget = u(rng) < 0.5 ? 0.99 : 0.9;
    const std::int32_t atLeast = u(rng) < 0.2 ? 750 : 0;
    const auto d = chooseShare(single(rate, mean, p99, fraction), target, r, atLeast);
    ASSERT_TRUE(d) << "seed " << seed;
    const std::string where = "seed " + std::to_string(seed) + " case " + std::to_string(i);
    EXPECT_EQ(d->replicas, asked) << where;
    const double wholeMean = mean * fraction / 1000, wholeTail = p99 * fraction / 1000;
    const double cs2 = serviceCs2(wholeMean, wholeTail);
    const double eps = 1 - r.sloTarget;
    auto keepsTail = [&](std::int32_t m) { return 2 * wholeTail * 1000 / m <= slo / 1000 + 1e-12; };
    // The wait tail over the replicas that carry the demand (the placed one only where its own
    // share can serve), with a tolerance either way for the rule's search.
    const auto fMilli = static_cast<std::int32_t>(std::lround(1000 * fraction));
    const int carriers = 2 * wholeTail * 1000 / fMilli <= slo / 1000 + 1e-12 ? target : asked;
    auto wait = [&](std::int32_t m) {
      return waitTail(rate / carriers, wholeMean * 1000 / m, cs2, 1,
                      slo / 1000 - wholeTail * 1000 / m);
    };
    if (d->milli < 1000) {
      EXPECT_GE(d->milli, std::max(r.minShareMilli, atLeast)) << where;
      EXPECT_TRUE(keepsTail(d->milli)) << where;
      EXPECT_LE(wait(d->milli), eps * (1 + 1e-6) + 1e-12) << where;
    }
    for (std::int32_t m = r.stepMilli; m < d->milli && m < 1000; m += r.stepMilli) {
      if (m < std::max(r.minShareMilli, atLeast) || !keepsTail(m)) continue;
      EXPECT_GT(wait(m), eps * (1 - 1e-6)) << where << " share " << m;
    }
  }
}

// Randomised, with memory (the simulator's rule): never more replicas than asked below a whole
// GPU, and never more GPUs than placing what was asked on the deployment's own share when that
// is one the rule may take.
TEST(ShareRule, TheMemoryRuleNeverCostsMoreThanTheDeploymentsShare) {
  const unsigned seed = std::random_device{}();
  std::printf("ShareRule.TheMemoryRuleNeverCostsMoreThanTheDeploymentsShare seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 2000; ++i) {
    const std::int32_t fMilli = 250 * (1 + static_cast<int>(4 * u(rng)));
    const double mean = 1 + 300 * u(rng);
    DeploymentSignals s = single(20 * u(rng), mean, mean * (1 + 4 * u(rng)), fMilli / 1000.0);
    s.meanServiceMs = 500 + 50000 * u(rng);
    s.replicas[0].maxConcurrency = 1 + static_cast<int>(200 * u(rng));
    const int asked = 1 + static_cast<int>(20 * u(rng));
    const auto d = chooseShare(s, 1 + asked, shrinking());
    ASSERT_TRUE(d) << "seed " << seed;
    const std::string where = "seed " + std::to_string(seed) + " case " + std::to_string(i);
    if (d->milli < 1000) {
      EXPECT_LE(d->replicas, asked) << where;
    }
    // Share f itself: is it one the rule may take (the slow prompts within half the target)?
    const double tail = *s.prefillP99Ms;  // on share f, ms
    if (fMilli == 1000 || 2 * tail <= 2000) {
      EXPECT_LE(d->replicas * d->milli, asked * fMilli) << where << " " << d->reason;
    }
  }
}

}  // namespace
}  // namespace tessera::scale
