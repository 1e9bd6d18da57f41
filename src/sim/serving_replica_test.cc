// The queueing model on cases small enough to compute by hand. The test replica does 1e12
// FLOP/s and 1e9 B/s; a token costs 1e9 FLOPs (1 ms of prefill), the weights are 5 MB (5 ms per
// decode step) and a token of context 1000 B of KV (1 us per token read per step); no
// attention term. So an iteration takes max(prompt tokens + decoding sequences, in ms;
// 5 ms + total decoding context, in us).

#include "sim/serving_replica.h"

#include <gtest/gtest.h>

namespace tessera::sim {
namespace {

ReplicaPerf testPerf() {
  ReplicaPerf p;
  p.flopsPerSec = 1e12;
  p.bytesPerSec = 1e9;
  p.weightsBytes = 5e6;
  p.flopsPerToken = 1e9;
  p.attentionFlopsPerPair = 0;
  p.kvBytesPerToken = 1000;
  p.kvCapacityTokens = 100'000;
  p.maxNumSeqs = 256;
  p.maxBatchedTokens = 8192;
  return p;
}

// Drives one engine the way the simulation loop does: arrivals at given times, iterations back
// to back; records admission, first token and completion per request.
struct Driver {
  explicit Driver(ReplicaPerf perf) : engine(perf) {}
  struct Times {
    Micros admitted = -1, first = -1, done = -1;
  };
  ReplicaEngine engine;
  std::vector<Times> times;
  std::optional<Micros> end;
  Micros now = 0;

  void start() {
    if (end) return;
    std::vector<int> admitted;
    end = engine.startIteration(now, admitted);
    for (int id : admitted) times[static_cast<std::size_t>(id)].admitted = now;
  }
  void finish() {
    now = *end;
    end.reset();
    std::vector<int> first, done;
    engine.finishIteration(first, done);
    for (int id : first) times[static_cast<std::size_t>(id)].first = now;
    for (int id : done) times[static_cast<std::size_t>(id)].done = now;
  }
  // Requests (arrival us, prompt, output), in arrival order; runs until everything is done.
  void run(const std::vector<std::tuple<Micros, int, int>>& requests) {
    times.assign(requests.size(), {});
    std::size_t next = 0;
    while (next < requests.size() || engine.hasWork()) {
      const bool arrivalFirst =
          next < requests.size() && (!end || std::get<0>(requests[next]) < *end);
      if (arrivalFirst) {
        now = std::get<0>(requests[next]);
        engine.enqueue(
            {static_cast<int>(next), std::get<1>(requests[next]), std::get<2>(requests[next])});
        ++next;
        // Arrivals at the same instant are all queued before the engine steps.
        if (next < requests.size() && std::get<0>(requests[next]) == now) continue;
      } else if (end) {
        finish();
      } else {
        ASSERT_TRUE(false) << "work but no iteration";
      }
      start();
    }
  }
};

TEST(ReplicaEngine, OneRequestPrefillThenDecodeSteps) {
  Driver d(testPerf());
  d.run({{0, 100, 3}});
  EXPECT_EQ(d.times[0].admitted, 0);
  EXPECT_EQ(d.times[0].first, 100'000);  // 100 prompt tokens x 1 ms; TTFT 100 ms
  // Two decode steps reading the weights and a context of 101 then 102 tokens.
  EXPECT_EQ(d.times[0].done, 100'000 + 5'101 + 5'102);
  EXPECT_EQ(d.engine.busyUsUntil(1'000'000), 110'203);
  EXPECT_DOUBLE_EQ(d.engine.kvCacheUsage(), 0);
}

TEST(ReplicaEngine, ALaterArrivalWaitsForTheIterationInFlight) {
  Driver d(testPerf());
  d.run({{0, 100, 2}, {10'000, 50, 1}});
  EXPECT_EQ(d.times[0].first, 100'000);
  // B is admitted when A's prefill ends, and its prefill (50 ms) goes with A's decode step
  // (1 ms of FLOPs): 51 ms. Queueing 90 ms, TTFT 141 ms; A's last token comes with it.
  EXPECT_EQ(d.times[1].admitted, 100'000);
  EXPECT_EQ(d.times[1].first, 151'000);
  EXPECT_EQ(d.times[1].done, 151'000);
  EXPECT_EQ(d.times[0].done, 151'000);
}

TEST(ReplicaEngine, PromptsShareAnIterationUpToTheTokenBudget) {
  ReplicaPerf p = testPerf();
  p.maxBatchedTokens = 100;
  Driver d(p);
  d.run({{0, 60, 1}, {0, 30, 1}, {0, 20, 1}});
  // 60 + 30 fit the budget of 100; the third waits: 90 ms, then 20 ms.
  EXPECT_EQ(d.times[0].first, 90'000);
  EXPECT_EQ(d.times[1].first, 90'000);
  EXPECT_EQ(d.times[2].admitted, 90'000);
  EXPECT_EQ(d.times[2].first, 110'000);
}

TEST(ReplicaEngine, ComputeTimeCountsEachPromptsOwnWork) {
  ReplicaPerf p = testPerf();
  Driver d(p);
  // Prompts of 60, 30 and 10 tokens share one 100-ms step: each reads 100 ms from its
  // scheduling to its first token, but the compute units worked 100 ms for the three (60 + 30 +
  // 10 ms of their own). Then one decode step of 3 sequences: memory-bound, 5 ms + 103 us of KV
  // (61 + 31 + 11 tokens of context), of which 3 ms are compute.
  d.run({{0, 60, 2}, {0, 30, 2}, {0, 10, 2}});
  EXPECT_EQ(d.times[0].first, 100'000);
  EXPECT_EQ(d.times[2].first, 100'000);
  EXPECT_EQ(d.engine.busyUsUntil(d.now), 100'000 + 5'000 + 103);
  EXPECT_EQ(d.engine.computeUsUntil(d.now), 100'000 + 3'000);
  // Halfway through an iteration in flight: half its compute.
  ReplicaEngine e(p);
  e.enqueue({0, 40, 1});
  std::vector<int> admitted;
  ASSERT_EQ(e.startIteration(0, admitted), std::optional<Micros>(40'000));
  EXPECT_EQ(e.computeUsUntil(20'000), 20'000);
  EXPECT_EQ(e.computeUsUntil(90'000), 40'000);
}

TEST(ReplicaEngine, APromptLongerThanTheBudgetGoesAlone) {
  ReplicaPerf p = testPerf();
  p.maxBatchedTokens = 100;
  Driver d(p);
  d.run({{0, 250, 1}, {0, 10, 1}});
  EXPECT_EQ(d.times[0].first, 250'000);
  EXPECT_EQ(d.times[1].first, 260'000);
}

TEST(ReplicaEngine, KvCacheBoundsConcurrency) {
  ReplicaPerf p = testPerf();
  p.kvCapacityTokens = 250;
  Driver d(p);
  // A reserves 100 + 4 tokens; B needs 100 + 50 = 150 more: 254 > 250, so B waits for A.
  d.run({{0, 100, 4}, {0, 100, 50}});
  const Micros aDone = 100'000 + 5'101 + 5'102 + 5'103;
  EXPECT_EQ(d.times[0].done, aDone);
  EXPECT_EQ(d.times[1].admitted, aDone);
  EXPECT_EQ(d.times[1].first, aDone + 100'000);
  EXPECT_FALSE(d.engine.fits({9, 200, 51}));
  EXPECT_TRUE(d.engine.fits({9, 200, 50}));
}

TEST(ReplicaEngine, MaxNumSeqsBoundsConcurrency) {
  ReplicaPerf p = testPerf();
  p.maxNumSeqs = 1;
  Driver d(p);
  d.run({{0, 10, 2}, {0, 10, 1}});
  EXPECT_EQ(d.times[0].first, 10'000);
  EXPECT_EQ(d.times[0].done, 10'000 + 5'011);
  EXPECT_EQ(d.times[1].admitted, 15'011);
  EXPECT_EQ(d.times[1].first, 25'011);
}

TEST(ReplicaEngine, DecodeIsBoundByMemoryOrComputeWhicheverIsSlower) {
  ReplicaPerf p = testPerf();
  p.weightsBytes = 0;  // the step is then 1 us per context token vs 1 ms per sequence
  Driver d(p);
  d.run({{0, 10, 2}});
  EXPECT_EQ(d.times[0].done, 10'000 + 1'000);  // compute: 1e9 FLOPs at 1e12 FLOP/s
  Driver longContext(p);
  longContext.run({{0, 5000, 2}});
  EXPECT_EQ(longContext.times[0].done, 5'000'000 + 5'001);  // memory: 5001 tokens x 1 us
}

TEST(ReplicaEngine, PrefixCacheSkipsThePrefillOfHeldBlocks) {
  // Blocks of 10 tokens, room for 100.
  ReplicaEngine e(testPerf(), 100, 10);
  const std::vector<std::uint32_t> a = {1, 2, 3}, b = {1, 2, 9, 4}, c = {1, 2};
  std::vector<int> admitted, first, done;
  auto step = [&](Micros now, ReplicaJob job) {
    e.enqueue(job);
    const auto end = e.startIteration(now, admitted);
    e.finishIteration(first, done);
    return *end - now;
  };
  EXPECT_EQ(step(0, {0, 30, 1, a}), 30'000);        // nothing held: 30 tokens
  EXPECT_EQ(step(100'000, {1, 40, 1, b}), 20'000);  // 1, 2 held: 20 of 40 tokens computed
  // Both blocks held, but the last token is always computed: 1 ms of FLOPs, 5 ms of weights.
  EXPECT_EQ(step(200'000, {2, 20, 1, c}), 5'000);
  EXPECT_EQ(e.cachedPromptTokens(), 20 + 19);
  EXPECT_EQ(e.admittedPromptTokens(), 90);
}

TEST(ReplicaEngine, PrefixCacheForgetsTheLeastRecentlyUsedBlocks) {
  ReplicaEngine e(testPerf(), 2, 10);  // room for two blocks
  const std::vector<std::uint32_t> a = {1, 2, 3}, b = {1, 2};
  std::vector<int> admitted, first, done;
  e.enqueue({0, 30, 1, a});
  ASSERT_TRUE(e.startIteration(0, admitted));
  e.finishIteration(first, done);
  e.enqueue({1, 20, 1, b});  // block 1 went first: no prefix is held
  EXPECT_EQ(e.startIteration(50'000, admitted), std::optional<Micros>(70'000));
  EXPECT_EQ(e.cachedPromptTokens(), 0);
}

TEST(ReplicaEngine, SignalsWhileBusy) {
  ReplicaEngine e(testPerf());
  e.enqueue({0, 100, 10});
  e.enqueue({1, 100, 10});
  EXPECT_EQ(e.waiting(), 2);
  std::vector<int> admitted;
  ASSERT_EQ(e.startIteration(0, admitted), std::optional<Micros>(200'000));
  EXPECT_EQ(admitted, (std::vector<int>{0, 1}));
  EXPECT_EQ(e.waiting(), 0);
  EXPECT_EQ(e.running(), 2);
  EXPECT_DOUBLE_EQ(e.kvCacheUsage(), 220.0 / 100'000);
  EXPECT_EQ(e.busyUsUntil(50'000), 50'000);
  EXPECT_FALSE(e.startIteration(10, admitted));  // one at a time
  e.enqueue({2, 5, 1});
  auto abort = e.abortAll();
  // Both were being prefilled (no first token yet), the third queued: all come back.
  EXPECT_EQ(abort.unserved.size(), 3u);
  EXPECT_TRUE(abort.cutOff.empty());
  EXPECT_FALSE(e.hasWork());
  EXPECT_DOUBLE_EQ(e.kvCacheUsage(), 0);
}

TEST(ReplicaEngine, HalfAGpuTakesTwiceAsLongForTheSamePrompt) {
  ReplicaPerf whole = testPerf();
  whole.memoryMib = 1000;
  ServingModel m;
  m.weightsMib = 0;
  m.overheadMib = 0;
  m.kvBytesPerToken = 1000;
  auto half = sharePerf(whole, m, 0.5);
  ASSERT_TRUE(half) << half.error().message;
  // 500 MiB of KV at 1000 B a token.
  EXPECT_EQ(half->kvCapacityTokens, 500 * 1024 * 1024 / 1000);
  Driver a(whole), b(*half);
  a.run({{0, 100, 3}});
  b.run({{0, 100, 3}});
  // The 100-token prompt: 100 ms on the GPU, 200 ms on half of it; each decode step 5.1 ms
  // (weights + 101..102 tokens of KV read) on the GPU, twice that on half.
  EXPECT_EQ(a.times[0].first, 100'000);
  EXPECT_EQ(b.times[0].first, 200'000);
  EXPECT_EQ(a.times[0].done, 100'000 + 5'101 + 5'102);
  EXPECT_EQ(b.times[0].done, 200'000 + 10'202 + 10'204);
}

}  // namespace
}  // namespace tessera::sim
