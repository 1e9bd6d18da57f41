#include "sim/serving_closed_loop.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/serving_run.h"
#include "sim/serving_test_support.h"

namespace tessera::sim {
namespace {

ReplicaPerf perfOn(const std::string& gpu) {
  ServingOptions o;
  o.fleet.gpuType = gpu;
  auto p = servingPerf(testing::servingCatalog(), o);
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

TEST(ClosedLoop, OneRequestAtATimeIsThePrefillThenOneDecodeStepPerToken) {
  // Concurrency 1: each request runs alone. Its first token comes after the prefill iteration;
  // every later one after a decode step that reads the weights and the KV cache of its
  // context (prompt + tokens so far), rounded up to the microsecond as the engine does.
  const ReplicaPerf p = perfOn("A100-40GB");
  ClosedLoopOptions o;
  o.concurrency = 1;
  o.inputTokens = 1024;
  o.outputTokens = 4;
  o.requests = 3;
  auto r = runClosedLoop(p, o);
  ASSERT_TRUE(r) << r.error().message;
  const double prefillUs = std::ceil(p.prefillSeconds(1024) * 1e6 - 1e-6);
  double decodeUs = 0;
  for (int generated = 1; generated < 4; ++generated) {
    const double context = 1024 + generated;
    const double flops = p.flopsPerToken + p.attentionFlopsPerPair * context;
    const double bytes = p.weightsBytes + context * p.kvBytesPerToken;
    decodeUs += std::ceil(std::max(flops / p.flopsPerSec, bytes / p.bytesPerSec) * 1e6 - 1e-6);
  }
  EXPECT_DOUBLE_EQ(r->ttftP50Ms, prefillUs / 1000);
  EXPECT_NEAR(r->tpotMeanMs, decodeUs / 3 / 1000, 1e-9);
  EXPECT_NEAR(r->durationS, 3 * (prefillUs + decodeUs) / 1e6, 1e-9);
  EXPECT_NEAR(r->outputTokensPerSec, 12 / r->durationS, 1e-9);
}

TEST(ClosedLoop, BatchingRaisesThroughputAndTheTokenTime) {
  const ReplicaPerf p = perfOn("H100-80GB");
  ClosedLoopOptions o;
  o.inputTokens = 512;
  o.outputTokens = 64;
  o.concurrency = 1;
  auto one = runClosedLoop(p, o);
  o.concurrency = 16;
  auto many = runClosedLoop(p, o);
  ASSERT_TRUE(one && many);
  EXPECT_EQ(many->requests, 320);
  EXPECT_GT(many->outputTokensPerSec, 5 * one->outputTokensPerSec);
  EXPECT_GT(many->tpotMeanMs, one->tpotMeanMs);
}

TEST(ClosedLoop, RefusesWhatCannotRun) {
  const ReplicaPerf p = perfOn("H100-80GB");
  ClosedLoopOptions o;
  o.concurrency = 0;
  EXPECT_FALSE(runClosedLoop(p, o));
  o.concurrency = 1;
  o.inputTokens = static_cast<std::int32_t>(p.kvCapacityTokens);
  auto r = runClosedLoop(p, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("KV cache"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace tessera::sim
