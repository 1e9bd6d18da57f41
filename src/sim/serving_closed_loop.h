#pragma once
// One replica under a closed loop, as `vllm bench serve --max-concurrency C --request-rate inf`
// drives a server: C requests of fixed prompt and output lengths are outstanding at all times;
// when one completes the next is sent at once. What comes out is what such a benchmark
// reports (TTFT, TPOT, output throughput), so the replica model (sim/serving_replica.h,
// sim/serving_model.h) can be set against published measurements
// (docs/serving-simulator.md, "The model against measurements").
//
// Threading: a pure function.

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "sim/serving_model.h"

namespace tessera::sim {

struct ClosedLoopOptions {
  int concurrency = 1;
  std::int32_t inputTokens = 1024;
  std::int32_t outputTokens = 128;
  int requests = 0;  // completed requests measured (0: 20 x concurrency, as vllm's sweeps use)
};

struct ClosedLoopResult {
  int concurrency = 0;
  int requests = 0;
  double ttftMeanMs = 0, ttftP50Ms = 0;
  double tpotMeanMs = 0;          // (last token - first token) / (output - 1), mean
  double outputTokensPerSec = 0;  // generated tokens / the run's duration
  double requestsPerSec = 0;
  double durationS = 0;
};

// Fails when the request cannot run on the replica (its context exceeds the KV cache) or the
// options are out of range.
Result<ClosedLoopResult> runClosedLoop(const ReplicaPerf& perf, const ClosedLoopOptions& options);

}  // namespace tessera::sim
