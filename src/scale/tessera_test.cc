// Tessera's recommender: Little's law plus the backlog projected over the cold start, loading
// replicas as arriving capacity, KV and queue guards, conservative scale-down, GPU shares.
// Numbers: maxConcurrency 10, targetUtilization 0.8 → 8 per replica; mean service 2 s, so a
// ready replica serves 10 / 2 = 5 requests per second at full concurrency; cold start 60 s;
// backlog drained within 60 s.

#include <gtest/gtest.h>

#include "scale/autoscaler.h"
#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::Rep;

constexpr Millis kTesseraSec = 1000;

std::unique_ptr<Recommender> tessera(const std::vector<std::pair<std::string, double>>& args = {}) {
  auto r = makeRecommender("tessera", args);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return std::move(*r);
}

Rep ready(const std::string& id, double running, double waiting) {
  return Rep(id).maxConcurrency(10).running(running).waiting(waiting);
}

DeploymentSignals signals(Millis now, std::vector<ReplicaSignals> reps, std::optional<double> rate,
                          std::optional<double> serviceMs = 2000) {
  DeploymentSignals s = testing::at(now, std::move(reps));
  s.arrivalRatePerSec = rate;
  s.meanServiceMs = serviceMs;
  return s;
}

TEST(Tessera, SteadyDemandNeedsLittlesLawReplicas) {
  auto r = tessera();
  // 12/s × 2 s = 24 in service; 3 ready serve 15/s > 12/s: no backlog. ceil(24 / 8) = 3
  EXPECT_EQ(r->recommend(signals(0, {ready("a", 8, 0), ready("b", 8, 0), ready("c", 8, 0)}, 12), 3)
                .replicas,
            3);
  EXPECT_TRUE(r->accountsForLoading());
}

TEST(Tessera, ScaleUpSizesForTheBacklogAtColdStart) {
  auto r = tessera();
  // 2 ready serve 10/s < 12/s: the backlog of 10 grows 2/s for the 60 s cold start → 130.
  // need = 24 + 130 × 2 / 60 = 28.33 → ceil(3.54) = 4
  const Recommendation rec =
      r->recommend(signals(0, {ready("a", 10, 5), ready("b", 10, 5)}, 12), 2);
  EXPECT_EQ(rec.replicas, 4);
  EXPECT_NE(rec.reason.find("backlog"), std::string::npos) << rec.reason;
}

TEST(Tessera, ForecastCarriesTheRampOneColdStartAhead) {
  // λ = 4, 6, 8 at 0, 15, 30 s: the trend is 2 per 15 s. With the default 60-s cold start the
  // forecast at 30 s is 8 + 60 x 2/15 = 16/s; 2-s service, so 32 in service. The two ready
  // replicas serve 10/s (10 / 2 s each), so the backlog projected over the cold start is
  // (16 - 10) x 60 = 360, drained over 60 s: need 32 + 360 x 2 / 60 = 44, at 10 x 0.8 per
  // replica: ceil(5.5) = 6. The measured 8/s alone needs ceil(16 / 8) = 2.
  auto r = tessera();
  const auto at = [&](Millis t, double lambda) {
    return r->recommend(signals(t, {ready("a", 4, 0), ready("b", 4, 0)}, lambda), 2);
  };
  at(0, 4);
  at(15 * kTesseraSec, 6);
  const Recommendation rec = at(30 * kTesseraSec, 8);
  EXPECT_EQ(rec.replicas, 6) << rec.reason;
  EXPECT_NE(rec.reason.find("λ 8 → 16 forecast"), std::string::npos) << rec.reason;
  // Off: the measured rate.
  auto off = tessera({{"forecastWindowSeconds", 0}});
  for (auto [t, l] : {std::pair{0, 4.0}, {15, 6.0}}) {
    off->recommend(signals(t * kTesseraSec, {ready("a", 4, 0), ready("b", 4, 0)}, l), 2);
  }
  EXPECT_EQ(off->recommend(signals(30 * kTesseraSec, {ready("a", 4, 0), ready("b", 4, 0)}, 8), 2)
                .replicas,
            2);
}

TEST(Tessera, TheCountRunningIsCarriedAheadWhileItClimbs) {
  // Long answers: 5/s at a measured 2 s (the requests that finished, the short ones) is
  // λ × S = 10 in service, ceil(10 / 8) = 2. But the 4 ready replicas run 24, 28, then 32
  // requests at 0, 15 and 30 s: the least-squares trend is 8 per 30 s, carried over the 60-s
  // cold start: 32 + 16 = 48 running, ceil(48 / 8) = 6.
  const auto run = [](Recommender& r, Millis t, double perReplica, int current = 4) {
    std::vector<ReplicaSignals> reps;
    for (const char* id : {"a", "b", "c", "d"}) reps.push_back(ready(id, perReplica, 0));
    return r.recommend(signals(t * kTesseraSec, reps, 5), current);
  };
  auto r = tessera();
  // Without three calls there is no trend, but what runs now holds: 24 needs ceil(24 / 8) = 3,
  // and a scale-down keeps it with its tolerance, ceil(24 / 7.2) = 4 (λ × S alone: 2).
  EXPECT_EQ(run(*r, 0, 6).replicas, 4);
  run(*r, 15, 7);
  const Recommendation rec = run(*r, 30, 8);
  EXPECT_EQ(rec.replicas, 6) << rec.reason;
  EXPECT_NE(rec.reason.find("running 32 → 48 rising"), std::string::npos) << rec.reason;
  // From 8 replicas the same climb holds them: a scale-down carries it 60 + 60 s ahead, 32 + 32
  // = 64 running, ceil(64 / 7.2) = 9 ≥ 8 (carried only the 60-s cold start: 48 → 7).
  auto from8 = tessera();
  run(*from8, 0, 6, 8);
  run(*from8, 15, 7, 8);
  EXPECT_EQ(run(*from8, 30, 8, 8).replicas, 8);
  // A steep climb, 10, 20, 30 (1 a second): 30 + 60 = 90 ahead, the 3× cap. From 20 replicas
  // the scale-down's 30 + 120 = 150 is capped at 90 too: ceil(90 / 7.2) = 13 (uncapped: 21,
  // held at 20).
  auto steep = tessera();
  run(*steep, 0, 2.5, 20);
  run(*steep, 15, 5, 20);
  EXPECT_EQ(run(*steep, 30, 7.5, 20).replicas, 13);
  // Flat at 32: no trend, the count now: ceil(32 / 8) = 4.
  auto flat = tessera();
  for (const Millis t : {0, 15, 30}) {
    const Recommendation f = run(*flat, t, 8);
    EXPECT_EQ(f.replicas, 4) << f.reason;
    EXPECT_EQ(f.reason.find("rising"), std::string::npos) << f.reason;
  }
  // No forecast window, no trend: the rise to 32 needs 4.
  auto off = tessera({{"forecastWindowSeconds", 0}});
  run(*off, 0, 6);
  run(*off, 15, 7);
  EXPECT_EQ(run(*off, 30, 8).replicas, 4);
}

TEST(Tessera, ACountRunningThatRisesAsTheQueueMovesInIsNotCarried) {
  // The same climb of the count running as above (24, 28, 32 on 4 replicas at 0, 15 and 30 s),
  // but each replica's queue falls as it rises (4, 3, 2 waiting each): the requests in the
  // system stay at 40, so the replicas took in their queue and nothing more arrives. What runs
  // now holds (ceil(32 / 8) = 4), and nothing is carried ahead (the climb alone asks for 6).
  // The last of three calls at 0, 15 and 30 s, each replica running 6, 7, 8 with these queues.
  const auto climb = [](std::vector<double> waiting) {
    auto r = tessera();
    Recommendation rec;
    for (int i = 0; i < 3; ++i) {
      std::vector<ReplicaSignals> reps;
      for (const char* id : {"a", "b", "c", "d"}) reps.push_back(ready(id, 6 + i, waiting[i]));
      rec = r->recommend(signals(15 * i * kTesseraSec, reps, 5), 4);
    }
    return rec;
  };
  const Recommendation rec = climb({4, 3, 2});
  EXPECT_EQ(rec.replicas, 4) << rec.reason;
  EXPECT_EQ(rec.reason.find("rising"), std::string::npos) << rec.reason;
  // The system climbing more slowly than the count running bounds the carry: waiting 4, 3.5, 3
  // each, the system 40, 42, 44 (2 per 15 s, 8 over the cold start): 32 + 8 = 40 running,
  // ceil(40 / 8) = 5.
  const Recommendation bounded = climb({4, 3.5, 3});
  EXPECT_EQ(bounded.replicas, 5) << bounded.reason;
  EXPECT_NE(bounded.reason.find("running 32 → 40 rising"), std::string::npos) << bounded.reason;
}

TEST(Tessera, LoadingReplicasAbsorbTheBacklogNoCascade) {
  auto r = tessera({{"forecastWindowSeconds", 0}});  // the projection alone, by hand
  EXPECT_EQ(r->recommend(signals(0, {ready("a", 10, 5), ready("b", 10, 5)}, 12), 2).replicas, 4);
  // 15 s later: backlog 40, two replicas arrive at 60 s. Projection to 75 s (a new replica's
  // ready time): 45 s at +2/s → 130, then 15 s with 4 ready (20/s) at −8/s → 10.
  // need = 24 + 10 × 2 / 60 = 24.33 → 4 = current: nothing more
  const auto loadingA = Rep("l1").maxConcurrency(10).created(0).loading(60 * kTesseraSec);
  const auto loadingB = Rep("l2").maxConcurrency(10).created(0).loading(60 * kTesseraSec);
  EXPECT_EQ(r->recommend(signals(15 * kTesseraSec,
                                 {ready("a", 10, 20), ready("b", 10, 20), loadingA, loadingB}, 12),
                         4)
                .replicas,
            4);
  // Demand grows to 20/s: 45 s at +10/s → 490, then 4 ready serve 20/s: 490. Queued on the
  // two ready replicas, it drains at most as fast as they serve at target (2 × 8 / 2 s = 8/s,
  // under 490 / 60): need = 40 + 8 × 2 = 56 → 7
  EXPECT_EQ(r->recommend(signals(15 * kTesseraSec,
                                 {ready("a", 10, 20), ready("b", 10, 20), loadingA, loadingB}, 20),
                         4)
                .replicas,
            7);
}

TEST(Tessera, ColdStartLearnedFromLoadingReplicas) {
  auto r = tessera();
  // A loading replica asked for at 0 and ready at 120 s: cold start is 120 s. At 100 s with
  // 1 ready (5/s) at 6/s and no backlog: it arrives at 120 s, a new one would at 220 s.
  // 20 s at +1/s → 20, then 2 ready serve 10/s: 0. need = 12 → ceil(1.5) = 2 = current.
  const auto l = Rep("l").maxConcurrency(10).created(0).loading(120 * kTesseraSec);
  EXPECT_EQ(r->recommend(signals(100 * kTesseraSec, {ready("a", 10, 0), l}, 6), 2).replicas, 2);
  // Later, 2 ready at 11/s, nothing loading: cold start 120 s now. 1/s × 120 s = 120 backlog.
  // need = 22 + 120 × 2 / 60 = 26 → ceil(3.25) = 4 (with the 60 s default: 22 + 2 = 24 → 3)
  EXPECT_EQ(r->recommend(signals(200 * kTesseraSec, {ready("a", 10, 0), ready("b", 10, 0)}, 11), 2)
                .replicas,
            4);
  auto fresh = tessera();
  EXPECT_EQ(
      fresh->recommend(signals(200 * kTesseraSec, {ready("a", 10, 0), ready("b", 10, 0)}, 11), 2)
          .replicas,
      3);
}

TEST(Tessera, ABacklogQueuedOnReplicasNeedsNoMoreThanTheyDrain) {
  auto r = tessera({{"forecastWindowSeconds", 0}});
  const auto l = Rep("l").maxConcurrency(10).created(0).loading(120 * kTesseraSec);
  r->recommend(signals(100 * kTesseraSec, {ready("a", 10, 0), l}, 6), 2);  // cold start 120 s
  // 1 ready at 9/s serves 5/s: 4/s × 120 s = 480 queued on it by the time a new replica could
  // serve. Spread over 60 s that is 8/s (18 + 16 = 34 → 5), but the replica holding it serves
  // at most 8 / 2 s = 4/s of it at target: 18 + 4 × 2 = 26 → 4.
  const Recommendation rec = r->recommend(signals(200 * kTesseraSec, {ready("a", 10, 0)}, 9), 1);
  EXPECT_EQ(rec.replicas, 4);
  EXPECT_NE(rec.reason.find("(queued on 1 ready, drained by them alone)"), std::string::npos)
      << rec.reason;
  // What the router holds goes to any replica: 240 buffered more drain at 240 / 60 = 4/s too.
  DeploymentSignals buffered = signals(215 * kTesseraSec, {ready("a", 10, 0)}, 9);
  buffered.bufferedRequests = 240;
  EXPECT_EQ(r->recommend(buffered, 4).replicas, 5);
}

TEST(Tessera, ScaleDownKeepsTenPercentHeadroom) {
  auto r = tessera({{"forecastWindowSeconds", 0}});  // the headroom alone, by hand
  std::vector<ReplicaSignals> six;
  for (int i = 0; i < 6; ++i) six.push_back(ready("r" + std::to_string(i), 4, 0));
  // need 24: up would be 3, but a scale-down keeps 10 % more: ceil(24 / 7.2) = 4
  EXPECT_EQ(r->recommend(signals(0, six, 12), 6).replicas, 4);
  // 30/s: need 60 → ceil(60 / 7.2) = 9 > 6 → scale up by the plain count, ceil(60 / 8) = 8
  EXPECT_EQ(r->recommend(signals(15 * kTesseraSec, six, 30), 6).replicas, 8);
  // 17/s: need 34, up ceil(4.25) = 5 < 6, down ceil(4.72) = 5 → 5
  EXPECT_EQ(r->recommend(signals(30 * kTesseraSec, six, 17), 6).replicas, 5);
  // 21/s: need 42, up ceil(5.25) = 6 = current → stays 6 (down ceil(5.83) = 6)
  EXPECT_EQ(r->recommend(signals(45 * kTesseraSec, six, 21), 6).replicas, 6);
}

// The burst headroom: a scale-down sizes for the measured rate plus twice the root mean square
// of its rises over a cold start and a signal window (60 + 60 s here: the time a replica given up
// takes to come back once a rise shows), from the recommender's own history of calls.
std::vector<ReplicaSignals> tenReady() {
  std::vector<ReplicaSignals> ten;
  for (int i = 0; i < 10; ++i) ten.push_back(ready("r" + std::to_string(i), 2, 0));
  return ten;
}

// A call every 15 s: 10/s for 2 minutes, 20/s for 2¼ minutes, 10/s at 255 s. The burst history
// starts a signal window after the first call, so the tests' calls k = 0 … 17 come at 60 + 15k s
// after a first minute of calls at 10/s (k = -4 … -1): at(k). The times in the comments below
// are 15k s, the tests' clock from k = 0.
double stepRate(int k) {
  return k >= 8 && k < 17 ? 20 : 10;
}
Millis at(int k) {
  return (60 + 15 * k) * kTesseraSec;
}
constexpr int kFirstMinute = -4;

TEST(Tessera, ScaleDownHoldsTheRisesItsHistoryShows) {
  // At 255 s the calls 120 s apart: 0→120 … 105→225 rose 10/s each, 120→240 stayed and
  // 135→255 fell (a fall counts 0): √(8 × 100 / 10) = 8.94. A scale-down sizes for 10 + 2 ×
  // 8.94 = 27.9/s: 55.8 in service, ceil(55.8 / 7.2) = 8, where 10/s alone asks for
  // ceil(20 / 7.2) = 3. (Forecast off.)
  auto r = tessera({{"forecastWindowSeconds", 0}});
  auto plain = tessera({{"forecastWindowSeconds", 0}, {"scaleDownBurstSd", 0}});
  Recommendation held, alone;
  for (int k = kFirstMinute; k <= 17; ++k) {
    held = r->recommend(signals(at(k), tenReady(), stepRate(k)), 10);
    alone = plain->recommend(signals(at(k), tenReady(), stepRate(k)), 10);
  }
  EXPECT_EQ(held.replicas, 8) << held.reason;
  EXPECT_NE(held.reason.find("down holds λ +17.9"), std::string::npos) << held.reason;
  EXPECT_EQ(alone.replicas, 3) << alone.reason;
  // Half the headroom: 10 + 8.94 → 37.9 in service → 6.
  auto half = tessera({{"forecastWindowSeconds", 0}, {"scaleDownBurstSd", 1}});
  Recommendation one;
  for (int k = kFirstMinute; k <= 17; ++k) {
    one = half->recommend(signals(at(k), tenReady(), stepRate(k)), 10);
  }
  EXPECT_EQ(one.replicas, 6) << one.reason;
}

TEST(Tessera, FallsAndAShortHistoryAddNoBurstHeadroom) {
  // 20/s, then 10/s from 60 s: every pair 120 s apart fell or stayed: 3 at 10/s.
  auto r = tessera({{"forecastWindowSeconds", 0}});
  Recommendation rec;
  for (int k = 0; k <= 12; ++k) {
    rec = r->recommend(signals(k * 15 * kTesseraSec, tenReady(), k < 4 ? 20 : 10), 10);
  }
  EXPECT_EQ(rec.replicas, 3) << rec.reason;
  EXPECT_EQ(rec.reason.find("for bursts"), std::string::npos) << rec.reason;
  // Two rising pairs (0→120, 15→135 s) are too few to read a spread from.
  auto young = tessera({{"forecastWindowSeconds", 0}});
  for (int k = kFirstMinute; k <= 9; ++k) {
    rec = young->recommend(signals(at(k), tenReady(), stepRate(k)), 10);
  }
  EXPECT_EQ(rec.reason.find("for bursts"), std::string::npos) << rec.reason;
}

TEST(Tessera, TheFirstMinutesRatesAddNoBurstHeadroom) {
  // A call every 5 s in the first minute, its rates read over less than a window and swinging
  // 0 ↔ 30/s; then 10/s every 15 s to 300 s. Pairs 120 s apart from the first minute would rise
  // by up to 30/s; from 60 s on nothing rises: 3 replicas at 10/s and no headroom. The same
  // swings a minute later are the traffic's and are held.
  const auto run = [](Millis swingFrom) {
    auto r = tessera({{"forecastWindowSeconds", 0}});
    Recommendation rec;
    for (Millis t = 0; t <= 300 * kTesseraSec; t += 5 * kTesseraSec) {
      const bool swinging = t >= swingFrom && t < swingFrom + 60 * kTesseraSec;
      if (!swinging && t % (15 * kTesseraSec) != 0) continue;
      const double rate = swinging ? (t / (5 * kTesseraSec)) % 2 == 0 ? 0.0 : 30.0 : 10.0;
      rec = r->recommend(signals(t, tenReady(), rate), 10);
    }
    return rec;
  };
  const Recommendation first = run(0);
  EXPECT_EQ(first.replicas, 3) << first.reason;
  EXPECT_EQ(first.reason.find("for bursts"), std::string::npos) << first.reason;
  const Recommendation later = run(60 * kTesseraSec);
  EXPECT_GT(later.replicas, 3) << later.reason;
  EXPECT_NE(later.reason.find("down holds λ +"), std::string::npos) << later.reason;
}

TEST(Tessera, KvCacheGuard) {
  auto r = tessera();
  // 4/s × 2 s = 8 → 1 replica by demand, but KV at 0.95 on 2 ready: ceil(2 × 0.95 / 0.85) = 3
  // (replicas that do not report their running count: the guard alone)
  const auto full = [](const std::string& id) { return Rep(id).maxConcurrency(10).kv(0.95); };
  const Recommendation rec = r->recommend(signals(0, {full("a"), full("b")}, 4), 2);
  EXPECT_EQ(rec.replicas, 3);
  EXPECT_NE(rec.reason.find("kv"), std::string::npos) << rec.reason;
  // With 4 running on each, the cache they fill says 8 / 1.9 = 4.2 slots, 3.37 per replica:
  // ceil(8 / 3.37) = 3 by demand already.
  const Recommendation measured = tessera()->recommend(
      signals(0, {ready("a", 4, 0).kv(0.95), ready("b", 4, 0).kv(0.95)}, 4), 2);
  EXPECT_EQ(measured.replicas, 3) << measured.reason;
}

TEST(Tessera, TheKvCacheTheRunningSequencesFillBoundsTheirSlots) {
  // maxConcurrency says 10, but 4 running sequences fill 80 % of each cache (long outputs: the
  // running ones are longer than the finished mean the report divides by): a full cache holds
  // 8 / 1.6 = 5, 4 per replica. 3/s × 2 s = 6 in service → ceil(6 / 4) = 2. Trusting 10 (8 per
  // replica): ceil(6 / 7.2) = 1 on a scale-down (3 running on each, no KV cache reported).
  auto r = tessera();
  const Recommendation full =
      r->recommend(signals(0, {ready("a", 4, 0).kv(0.8), ready("b", 4, 0).kv(0.8)}, 3), 2);
  EXPECT_EQ(full.replicas, 2) << full.reason;
  EXPECT_NE(full.reason.find("4 per replica"), std::string::npos) << full.reason;
  auto plain = tessera();
  EXPECT_EQ(plain->recommend(signals(0, {ready("a", 3, 0), ready("b", 3, 0)}, 3), 2).replicas, 1);
}

TEST(Tessera, QueuedReplicasRevealTheirRealConcurrency) {
  auto r = tessera();
  // maxConcurrency says 10, but the replicas queue at 5 running with a full KV cache: mc = 5,
  // 4 per replica, 2 ready serve 5/s < 6/s. Backlog 6 + 1/s × 60 s = 66.
  // need = 12 + 66 × 2 / 60 = 14.2 → ceil(3.55) = 4 (trusting 10 would give 2)
  EXPECT_EQ(
      r->recommend(signals(0, {ready("a", 5, 3).kv(0.9), ready("b", 5, 3).kv(0.9)}, 6), 2).replicas,
      4);
  // The same queue with KV to spare is taken for requests between two iterations: mc stays 10,
  // 2 ready serve 10/s, the queue drains: need 12 → 2
  EXPECT_EQ(
      r->recommend(signals(0, {ready("a", 5, 3).kv(0.5), ready("b", 5, 3).kv(0.5)}, 6), 2).replicas,
      2);
}

TEST(Tessera, GrowingQueueAddsOneWhenTheModelSaysEnough) {
  auto r = tessera();
  // The model: 4/s × 2 s = 8 (4 running on each), 2 ready serve 10/s, the queue drains: 2
  // replicas suffice.
  EXPECT_EQ(r->recommend(signals(0, {ready("a", 4, 10), ready("b", 4, 10)}, 4), 2).replicas, 2);
  // But the queue grew (20 → 24, 12 per replica > 4) and nothing is loading: one more.
  const Recommendation rec =
      r->recommend(signals(15 * kTesseraSec, {ready("a", 4, 12), ready("b", 4, 12)}, 4), 2);
  EXPECT_EQ(rec.replicas, 3);
  EXPECT_NE(rec.reason.find("queue"), std::string::npos) << rec.reason;
}

TEST(Tessera, WithoutRatesCountsSlots) {
  auto r = tessera();
  // running 8 + 8 and waiting 4 + 4: 24 slots / 8 → 3
  EXPECT_EQ(
      r->recommend(signals(0, {ready("a", 8, 4), ready("b", 8, 4)}, std::nullopt), 2).replicas, 3);
  // the same with full KV caches: they hold 8 each, 6.4 per replica → ceil(3.75) = 4
  EXPECT_EQ(r->recommend(
                 signals(0, {ready("a", 8, 4).kv(0.9), ready("b", 8, 4).kv(0.9)}, std::nullopt), 2)
                .replicas,
            4);
  // no queue: 16 slots / 8 → 2
  EXPECT_EQ(
      r->recommend(signals(0, {ready("a", 8, 0), ready("b", 8, 0)}, 5, std::nullopt), 2).replicas,
      2);
}

TEST(Tessera, DrainingReplicasAreNotCapacity) {
  auto r = tessera();
  // As ScaleUpSizesForTheBacklogAtColdStart: the draining replica neither serves nor queues.
  const auto d = Rep("d").draining().maxConcurrency(10).running(10).waiting(50);
  EXPECT_EQ(r->recommend(signals(0, {ready("a", 10, 5), ready("b", 10, 5), d}, 12), 2).replicas, 4);
}

TEST(Tessera, BufferedRequestsAreBacklog) {
  auto r = tessera({{"maxConcurrency", 10}});
  // Nothing ready, nothing loading, 30 requests buffered at the router, 1/s × 2 s:
  // backlog 30 + 1/s × 60 s = 90 → need 2 + 90 × 2 / 60 = 5 → ceil(0.625) = 1
  DeploymentSignals s = signals(0, {}, 1);
  s.bufferedRequests = 30;
  EXPECT_EQ(r->recommend(s, 0).replicas, 1);
  // 300 buffered: 360 → need 2 + 12 = 14 → ceil(1.75) = 2
  s.bufferedRequests = 300;
  EXPECT_EQ(r->recommend(s, 0).replicas, 2);
}

TEST(Tessera, RemembersConcurrencyAcrossScaleToZero) {
  auto r = tessera();
  EXPECT_EQ(r->recommend(signals(0, {ready("a", 0, 0)}, 0), 1).replicas, 0);
  // No replica left to tell maxConcurrency: the last seen 10 is used, as above → 2
  DeploymentSignals s = signals(15 * kTesseraSec, {}, 1);
  s.bufferedRequests = 300;
  EXPECT_EQ(r->recommend(s, 0).replicas, 2);
}

TEST(Tessera, IdleGoesToZero) {
  auto r = tessera();
  EXPECT_EQ(r->recommend(signals(0, {ready("a", 0, 0)}, 0), 1).replicas, 0);
}

// The prefill term. Prompts that hold a replica's prefill for P = 750 ms: a replica serves at
// most 1 / 0.75 = 1.33 prompts per second, however many sequences it could hold.
DeploymentSignals prefillSignals(Millis now, int readyCount, double rate,
                                 std::optional<double> ttftP99Ms = std::nullopt) {
  std::vector<ReplicaSignals> reps;
  for (int i = 0; i < readyCount; ++i) reps.push_back(ready("r" + std::to_string(i), 2, 0));
  DeploymentSignals s = signals(now, std::move(reps), rate);
  s.meanPrefillMs = 750;
  s.ttftP99Ms = ttftP99Ms;
  return s;
}

// Every ready replica's compute units busy `active` of the time while it prefills `perSec`
// prompts a second (DCGM tensor activity and the prefill counter's rate).
void reportCompute(DeploymentSignals& s, double active, double perSec) {
  for (ReplicaSignals& x : s.replicas) {
    x.computeActive = active;
    x.prefillsPerSec = perSec;
  }
}

TEST(Tessera, ThePrefillStepsRiseCountsWhileTtftIsNearItsTarget) {
  // 2 prompts/s throughout, the step 750 ms, 1500 ms from 120 to 240 s, 750 ms again (calls as
  // stepRate's). The step's rises: √(8 × 0.75² / 10) = 0.67 s, so a scale-down plans the
  // prefill tail with a 2.09-s step. With TTFT p99 at 1.5 s (above half the 2-s target) that
  // takes 8 of the 10 replicas; with it at 0.5 s the step's rise is left out: the tail of
  // 750-ms steps and the occupancy cap, 4.
  const auto last = [](std::optional<double> ttft) {
    auto r = tessera({{"forecastWindowSeconds", 0}});
    Recommendation rec;
    for (int k = kFirstMinute; k <= 17; ++k) {
      DeploymentSignals s = prefillSignals(at(k), 10, 2, ttft);
      s.meanPrefillMs = stepRate(k) > 10 ? 1500 : 750;
      rec = r->recommend(s, 10);
    }
    return rec;
  };
  const Recommendation near = last(1500), far = last(500);
  EXPECT_EQ(near.replicas, 8) << near.reason;
  EXPECT_NE(near.reason.find("down plans P +1.34 s"), std::string::npos) << near.reason;
  EXPECT_EQ(far.replicas, 4) << far.reason;
  EXPECT_EQ(far.reason.find("down plans P"), std::string::npos) << far.reason;
}

TEST(Tessera, PrefillBoundTrafficIsSizedByPrefillOccupancy) {
  auto r = tessera();
  // 2.6/s: 3 ready serve 4/s, no backlog. Concurrency: 2.6 × 2 = 5.2 → ceil(5.2 / 8) = 1.
  // Prefill: 2.6 × 0.75 = 1.95 replicas busy → ceil(1.95 / 0.6) = ceil(3.25) = 4
  const Recommendation rec = r->recommend(prefillSignals(0, 3, 2.6), 3);
  EXPECT_EQ(rec.replicas, 4);
  EXPECT_NE(rec.reason.find("prefill 1.95"), std::string::npos) << rec.reason;
  // Without the prefill signal only concurrency counts: down = ceil(5.2 / 7.2) = 1
  DeploymentSignals none = prefillSignals(15 * kTesseraSec, 3, 2.6);
  none.meanPrefillMs.reset();
  EXPECT_EQ(r->recommend(none, 3).replicas, 1);
}

TEST(Tessera, PrefillBoundBacklogProjectsAtThePrefillRate) {
  auto r = tessera();
  // 4/s on 2 ready: they serve min(10 / 2 s, 1 / 0.75 s) = 1.33/s each, 2.67/s in all; the
  // backlog grows 1.33/s over the 60-s cold start → 80.
  // Concurrency: 8 + 80 × 2 / 60 = 10.67 → ceil(1.33) = 2.
  // Prefill: (4 + 80 / 60) × 0.75 = 4 → ceil(4 / 0.6) = ceil(6.67) = 7
  EXPECT_EQ(r->recommend(prefillSignals(0, 2, 4), 2).replicas, 7);
}

TEST(Tessera, PrefillTailNeedsMoreThanTheOccupancyTargetOnFewReplicas) {
  // 2.2 prompts/s of P = 0.75 s: occupancy 1.65, ceil(1.65 / 0.6) = 3 replicas. As an M/M/c
  // queue with a wait budget of 2 s − 0.75 s = 1.25 s: a = 1.65; c = 3: Erlang C 0.2932,
  // P(W > 1.25 s) = 0.2932 × e^−(3/0.75 − 2.2) × 1.25 = 0.0309 > 1 %; c = 4: 0.0995 ×
  // e^−(4/0.75 − 2.2) × 1.25 = 0.0020 ≤ 1 %: 4.
  EXPECT_EQ(tessera()->recommend(prefillSignals(0, 3, 2.2), 3).replicas, 4);
  // A 95 % target lets 3.09 % wait past the budget: 3.
  EXPECT_EQ(tessera({{"sloTarget", 0.95}})->recommend(prefillSignals(0, 3, 2.2), 3).replicas, 3);
}

TEST(Tessera, PrefillTailUsesTheMeasuredSpreadUpToAnExponentials) {
  // As above, with the prefill histogram's p99 at 2× the mean: cs² = 0.108 (log-normal), so the
  // wait decays 2 / 1.108 times faster: c = 3 leaves 0.2932 × e^−1.8 × 1.25 × 1.805 = 0.0051
  // ≤ 1 %, and the occupancy cap asks for 3 too: 3.
  DeploymentSignals even = prefillSignals(0, 3, 2.2);
  even.prefillP99Ms = 1500;
  EXPECT_EQ(tessera()->recommend(even, 3).replicas, 3);
  // A p99 of 10× the mean reads as a spread beyond an exponential's: the exponential stays the
  // ceiling, 4 as without the p99.
  DeploymentSignals spread = prefillSignals(0, 3, 2.2);
  spread.prefillP99Ms = 7500;
  EXPECT_EQ(tessera()->recommend(spread, 3).replicas, 4);
  // A p99 at the mean (one prompt in the window) is no measured spread: exponential, 4.
  DeploymentSignals one = prefillSignals(0, 3, 2.2);
  one.prefillP99Ms = 750;
  EXPECT_EQ(tessera()->recommend(one, 3).replicas, 4);
}

TEST(Tessera, PrefillScaleDownKeepsHeadroom) {
  auto r = tessera();
  // 6 ready at 2/s: prefill 1.5; down sizes for 2 / 0.9 = 2.22/s: ceil(1.5 / (0.6 × 0.9)) = 3,
  // and the tail: c = 3 leaves P(W > 1.25 s) = 0.0325, c = 4 0.0021 → 4
  EXPECT_EQ(r->recommend(prefillSignals(0, 6, 2), 6).replicas, 4);
  // 2.2/s: prefill 1.65, up ceil(2.75) = 3, down ceil(3.06) = 4 → 4
  EXPECT_EQ(r->recommend(prefillSignals(15 * kTesseraSec, 6, 2.2), 6).replicas, 4);
}

TEST(Tessera, PrefillAddsReplicasOnlyUnderTtftPressure) {
  auto r = tessera();
  // As PrefillBoundTrafficIsSizedByPrefillOccupancy, with TTFT p99 900 ms ≤ 2000 / 2: the
  // prefill term adds nothing (up = 1), but it holds the 3 there: down = max(1, ceil(1.95 /
  // 0.54) = 4) → min(current 3, 4) = 3
  EXPECT_EQ(r->recommend(prefillSignals(0, 3, 2.6, 900), 3).replicas, 3);
  // p99 1500 ms > 1000 ms: 4
  EXPECT_EQ(r->recommend(prefillSignals(15 * kTesseraSec, 3, 2.6, 1500), 3).replicas, 4);
  // sloTtftMs 0: no gate, and a wait budget of P alone (0.75 s): the tail needs 5 (c = 4
  // leaves P(W > 0.75 s) = 0.0208, c = 5 0.0026)
  auto ungated = tessera({{"sloTtftMs", 0}});
  EXPECT_EQ(ungated->recommend(prefillSignals(0, 3, 2.6, 900), 3).replicas, 5);
  // a larger SLO: 1500 ms ≤ 4000 / 2, no pressure
  auto lax = tessera({{"sloTtftMs", 4000}});
  EXPECT_EQ(lax->recommend(prefillSignals(0, 3, 2.6, 1500), 3).replicas, 3);
}

// 4 ready replicas at 1.6 prompts/s from 0 to 60 s (one call every 15 s), then the window's rate
// `last` at 75 s, the TTFT p99 900 ms (under half the SLO: no pressure). The count at 75 s.
Recommendation afterAMinuteAt(Recommender& r, double last, Millis lastAt = 75 * kTesseraSec) {
  for (Millis t = 0; t < lastAt; t += 15 * kTesseraSec) {
    r.recommend(prefillSignals(t, 4, 1.6, 900), 4);
  }
  return r.recommend(prefillSignals(lastAt, 4, last, 900), 4);
}

TEST(Tessera, AStepInTheArrivalsSizesTheWayUpAtOnce) {
  // The 60-s rate goes from 1.6 to 2.4 in 15 s: the newest 15 s brought 60 × 0.8 = 48 more
  // arrivals than the 15 s that left the window, where two Poisson counts of 2.4 × 15 differ by
  // √72 = 8.5: 5.7 standard deviations, a step. The 15 s that left ran at the rate of the window
  // that ended at 15 s (1.6/s), so the newest ran at 48 / 15 + 1.6 = 4.8/s. The way up sizes for
  // it and the prefill term does not wait for the TTFT: 4.8 × 0.75 = 3.6 replicas prefilling;
  // the cap ceil(3.6 / 0.6) = 6, and the M/M/c tail (budget 2 s − 0.75 s) c = 6: 0.0036 ≤ 1 %,
  // c = 5: 0.040: 6.
  auto r = tessera();
  const Recommendation rec = afterAMinuteAt(*r, 2.4);
  EXPECT_EQ(rec.replicas, 6) << rec.reason;
  EXPECT_NE(rec.reason.find("λ 2.4 → 4.8 step"), std::string::npos) << rec.reason;
  // A sync later the window reads 3.2: the newest 15 s again at 4.8/s (48 more than the 15 s at
  // 1.6 that left), not 2.4 + 4 × 0.8 = 5.6 as if the interval that left had run at the last
  // window's 2.4/s.
  const Recommendation next = r->recommend(prefillSignals(90 * kTesseraSec, 4, 3.2, 900), 6);
  EXPECT_NE(next.reason.find("λ 3.2 → 4.8 step"), std::string::npos) << next.reason;
  // Without it the forecast (2.86/s) needs one replica for its concurrency and the prefill term
  // waits for the TTFT; the scale-down's prefill term holds the 4 there.
  auto off = tessera({{"stepSd", 0}});
  EXPECT_EQ(afterAMinuteAt(*off, 2.4).replicas, 4);
  // A rise within the noise: 1.95/s, 21 more arrivals against a spread of √58.5 = 7.6 (2.7
  // standard deviations): no step, 4. Taken for one, it would size for 21 / 15 + 1.6 = 3/s, where
  // the tail needs 5 (c = 4 leaves 0.013).
  auto noise = tessera();
  const Recommendation calm = afterAMinuteAt(*noise, 1.95);
  EXPECT_EQ(calm.replicas, 4) << calm.reason;
  EXPECT_EQ(calm.reason.find("step"), std::string::npos) << calm.reason;
  // The same jump within the first signal window (45 s after the first call) is the window
  // filling, not a step: 4. At 60 s the window is full: 6.
  auto young = tessera();
  EXPECT_EQ(afterAMinuteAt(*young, 2.4, 45 * kTesseraSec).replicas, 4);
  auto full = tessera();
  EXPECT_EQ(afterAMinuteAt(*full, 2.4, 60 * kTesseraSec).replicas, 6);
}

TEST(Tessera, PrefillCountsThePromptsOwnComputeNotTheSharedStep) {
  auto r = tessera();
  // 2.6 prompts/s read P = 750 ms each (the whole step the batch shared), but the 3 replicas'
  // compute units worked 0.26 of the time while each prefilled 0.8667 prompts/s: a prompt's own
  // work is 0.78 / 2.6 = 0.3 s. Prefill 2.6 × 0.3 = 0.78 → ceil(0.78 / 0.6) = 2; the M/M/c tail
  // (budget 2 − 0.3 = 1.7 s) is met by 2 as well. Without the TTFT gate: it is the prompts' work.
  DeploymentSignals s = prefillSignals(0, 3, 2.6, 900);
  reportCompute(s, 0.26, 2.6 / 3);
  const Recommendation rec = r->recommend(s, 1);
  EXPECT_EQ(rec.replicas, 2);
  EXPECT_NE(rec.reason.find("prefill 0.78"), std::string::npos) << rec.reason;
  EXPECT_NE(rec.reason.find("own 0.3 s of a 0.75-s step"), std::string::npos) << rec.reason;
  // Above half the measured P the prompts mostly run alone: the measured P (compute 0.5 per
  // replica reads 0.58 s, which the occupancy cap counts; 0.9 would read 1.04 s, above the
  // step, and nothing is counted on it).
  for (const double active : {0.5, 0.9}) {
    for (ReplicaSignals& x : s.replicas) x.computeActive = active;
    s.nowMs += 15 * kTesseraSec;
    const std::string why = r->recommend(s, 1).reason;
    EXPECT_NE(why.find("prefill 1.95"), std::string::npos) << why;
    EXPECT_EQ(why.find("(own"), std::string::npos) << why;
    EXPECT_EQ(why.find("occupancy on the own 0.577 s of a 0.75-s step") != std::string::npos,
              active == 0.5)
        << why;
  }
  // One ready replica without the metric (just ready, no window yet): the other two still
  // say what a prompt costs, 0.52 / 1.73 = 0.3 s.
  for (ReplicaSignals& x : s.replicas) x.computeActive = 0.26;
  s.replicas[0].computeActive.reset();
  s.nowMs += 15 * kTesseraSec;
  const Recommendation partial = r->recommend(s, 1);
  EXPECT_EQ(partial.replicas, 2);
  EXPECT_NE(partial.reason.find("own 0.3 s"), std::string::npos) << partial.reason;
  // None reports it: the measured P, with the gate (p99 900 ms: 1 → hold).
  for (ReplicaSignals& x : s.replicas) x.computeActive.reset();
  s.nowMs += 15 * kTesseraSec;
  EXPECT_EQ(r->recommend(s, 1).replicas, 1);
}

TEST(Tessera, TheOccupancyCapCountsThePromptsOwnCompute) {
  // 2.6 prompts/s at a measured P of 0.75 s on 3 replicas whose compute units work 0.5 of the
  // time: a prompt's own compute is 1.5 / 2.6 = 0.577 s (above half the step, so P stays the
  // step). A 10-s SLO leaves the tail lenient: M/M/c with a wait budget of 9.25 s needs 3
  // (2.6 × 0.75 = 1.95 on 2 leaves 51 % waiting past it). The occupancy cap on the step would
  // ask ceil(1.95 / 0.6) = 4; on the own compute, ceil(2.6 × 0.577 / 0.6) = ceil(2.5) = 3.
  auto r = tessera({{"sloTtftMs", 10000}});
  DeploymentSignals s = prefillSignals(0, 3, 2.6);
  reportCompute(s, 0.5, 2.6 / 3);
  const Recommendation rec = r->recommend(s, 1);
  EXPECT_EQ(rec.replicas, 3) << rec.reason;
  // Without the compute units' metric: the step, 4.
  for (ReplicaSignals& x : s.replicas) x.computeActive.reset();
  EXPECT_EQ(tessera({{"sloTtftMs", 10000}})->recommend(s, 1).replicas, 4);
  // A scale-down from 6 holds the rate over the tolerance on the own compute:
  // ceil(2.6 / 0.9 × 0.577 / 0.6) = ceil(2.78) = 3 (on the step, ceil(3.61) = 4).
  for (ReplicaSignals& x : s.replicas) x.computeActive = 0.5;
  EXPECT_EQ(tessera({{"sloTtftMs", 10000}})->recommend(s, 6).replicas, 3);
}

TEST(Tessera, ThePrefillTailHoldsAReplicaForThePromptsOwnCompute) {
  // PrefillTailNeedsMoreThanTheOccupancyTargetOnFewReplicas' 2.2 prompts/s of a 0.75-s step on
  // 3 replicas, whose compute units work 0.367 of the time: a prompt's own compute is
  // 0.367 × 3 / 2.2 = 0.5 s (above half the step, so P stays the step). A replica works through
  // its queue at that rate, several prompts to a step, so the tail's prompts hold a replica for
  // 0.5 s, with the budget the SLO leaves after the step (1.25 s): a = 1.1; c = 2: Erlang C
  // 0.3903, P(W > 1.25 s) = 0.3903 × e^−(2/0.5 − 2.2) × 1.25 = 0.0411 > 1 %; c = 3: 0.1146 ×
  // e^−(3/0.5 − 2.2) × 1.25 = 0.0010 ≤ 1 %: 3, and the occupancy cap asks ceil(1.1 / 0.6) = 2.
  // On the step the tail asks 4.
  DeploymentSignals s = prefillSignals(0, 3, 2.2);
  reportCompute(s, 0.5 * 2.2 / 3, 2.2 / 3);
  const Recommendation rec = tessera()->recommend(s, 3);
  EXPECT_EQ(rec.replicas, 3) << rec.reason;
  EXPECT_NE(rec.reason.find("occupancy on the own 0.5 s of a 0.75-s step"), std::string::npos)
      << rec.reason;
  // A scale-down from 6 sizes for 2.2 / 0.9 = 2.44 prompts/s holding 0.5 s each: a = 1.22,
  // c = 3 leaves 0.1474 × e^−(6 − 2.44) × 1.25 = 0.0017; the cap ceil(1.22 / 0.6) = 3: 3.
  EXPECT_EQ(tessera()->recommend(s, 6).replicas, 3);
  // Without the compute units' metric the tail holds the step: 4 both ways.
  for (ReplicaSignals& x : s.replicas) x.computeActive.reset();
  EXPECT_EQ(tessera()->recommend(s, 3).replicas, 4);
  EXPECT_EQ(tessera()->recommend(s, 6).replicas, 4);
  // Where P is the own compute (0.3 s of the 0.75-s step at 2.6 prompts/s, as
  // PrefillCountsThePromptsOwnComputeNotTheSharedStep), a scale-down from 6 sizes its tail for
  // 2.6 / 0.9 = 2.89 prompts/s holding 0.3 s with the 1.25-s budget: c = 2 leaves 0.262 ×
  // e^−(2/0.3 − 2.89) × 1.25 = 0.0023; the cap ceil(2.89 × 0.3 / 0.6) = 2: 2. Holding the step,
  // the tail asked 5 (c = 4 leaves 0.0102).
  DeploymentSignals own = prefillSignals(0, 3, 2.6);
  reportCompute(own, 0.26, 2.6 / 3);
  const Recommendation down = tessera()->recommend(own, 6);
  EXPECT_EQ(down.replicas, 2) << down.reason;
  EXPECT_NE(down.reason.find("(own 0.3 s of a 0.75-s step)"), std::string::npos) << down.reason;
}

TEST(Tessera, ArgumentsAreValidated) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, double>>{{"targetUtilization", 1.5},
                                                   {"backlogDrainSeconds", 0},
                                                   {"kvCacheUsage", 0},
                                                   {"scaleDownTolerance", 1},
                                                   {"coldStartSeconds", -1},
                                                   {"gpuShare", 0.4},
                                                   {"prefillTargetUtilization", 0},
                                                   {"sloTtftMs", -1},
                                                   {"scaleDownBurstSd", -1},
                                                   {"stepSd", -1}}) {
    auto r = makeRecommender("tessera", {{key, value}});
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(makeRecommender("tessera", {{"backlogDrainSeconds", 30}, {"coldStartSeconds", 120}}));
}

}  // namespace
}  // namespace tessera::scale
