#pragma once
// One serving replica as the simulation sees it: a continuous-batching engine (vLLM-like)
// with a FIFO queue, iteration by iteration.
//
// An iteration starts when the engine is idle and has work. It first admits queued requests
// in FIFO order while the running set stays within maxNumSeqs, the KV cache can reserve the
// request's whole context (prompt + output tokens: no preemption, no swapping), and the
// iteration's prompt tokens to compute stay within maxBatchedTokens (a prompt longer than that
// goes alone).
// The iteration then prefills every admitted prompt and advances every running sequence by one
// token. Its duration is the roofline of the work:
//   max( sum of FLOPs / effective FLOP/s,  (weights + KV read by decoding sequences) / bandwidth )
//   prefill FLOPs = L x flopsPerToken + attentionFlopsPerPair x L^2 / 2   (prompt of L tokens)
//   decode  FLOPs = flopsPerToken + attentionFlopsPerPair x context
//   decode  bytes = context x kvBytesPerToken                               (per sequence)
// rounded up to whole microseconds. A prompt's first token comes at the end of the iteration
// that prefilled it (TTFT = queueing + that iteration); each later iteration adds one token; a
// sequence completes, and frees its KV reservation, with its last token.
//
// Prefix caching (optional, `prefixCacheBlocks` > 0): the replica remembers the prompt blocks
// it prefilled, least recently used first out, up to that many blocks of `blockTokens` tokens.
// A prompt whose leading blocks are remembered skips their prefill: it computes only the rest
// (at least one token), attending to the cached part:
//   prefill FLOPs = (L - c) x flopsPerToken + attentionFlopsPerPair x (L^2 - c^2) / 2
// The cache is modelled apart from the KV reservations (cached blocks are evictable).
//
// Threading: owned by the simulation loop; no locking.

#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/serving_model.h"
#include "sim/serving_trace.h"

namespace tessera::sim {

struct ReplicaJob {
  int id = -1;  // the caller's request index
  std::int32_t inputTokens = 0;
  std::int32_t outputTokens = 1;  // >= 1: the first token is the prefill's
  // The prompt's prefix blocks (prefix caching); borrowed from the trace, which outlives runs.
  std::span<const std::uint32_t> blocks = {};
};

class ReplicaEngine {
 public:
  explicit ReplicaEngine(const ReplicaPerf& perf, std::int64_t prefixCacheBlocks = 0,
                         int blockTokens = 512)
      : perf_(perf), cacheCapacity_(prefixCacheBlocks), blockTokens_(blockTokens) {}
  // Not copyable: the prefix cache's index points into its own list.
  ReplicaEngine(const ReplicaEngine&) = delete;
  ReplicaEngine& operator=(const ReplicaEngine&) = delete;
  ReplicaEngine(ReplicaEngine&&) = default;
  ReplicaEngine& operator=(ReplicaEngine&&) = default;

  // Whether a request could ever run here (its context fits the KV cache).
  bool fits(const ReplicaJob& job) const;
  void enqueue(const ReplicaJob& job) {
    waiting_.push_back(job);
    waitingPromptTokens_ += job.inputTokens;
  }

  bool inIteration() const { return iterationEndUs_.has_value(); }
  bool hasWork() const { return !waiting_.empty() || !running_.empty(); }

  // Starts the next iteration at `nowUs` when none is in flight and there is work; returns its
  // end, or nullopt. `admitted` receives the ids admitted now (their queueing ends at nowUs).
  // `slowdown` >= 1 stretches the iteration (a time-sliced GPU shared with busy neighbours);
  // its compute time, the work itself, stays the same.
  std::optional<Micros> startIteration(Micros nowUs, std::vector<int>& admitted,
                                       double slowdown = 1);
  // Ends the iteration in flight (at its end time): ids that got their first token, and ids
  // that completed (a one-token request is in both).
  void finishIteration(std::vector<int>& firstTokens, std::vector<int>& completed);

  // Stops everything (a flush that ran out of time): requests without their first token come
  // back for rerouting (queued ones and those being prefilled), the others are cut off.
  struct Abort {
    std::vector<ReplicaJob> unserved;
    std::vector<int> cutOff;
  };
  Abort abortAll();

  // What a scraper reads (vllm:num_requests_waiting / _running / kv_cache_usage_perc).
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int running() const { return static_cast<int>(running_.size()); }
  double kvCacheUsage() const;
  std::int64_t kvReservedTokens() const { return kvReservedTokens_; }
  // Microseconds spent iterating up to `nowUs` (GPU busy time; DCGM's GPU_UTIL over a window).
  Micros busyUsUntil(Micros nowUs) const;
  // Microseconds of that busy time the compute units worked (each iteration's FLOPs at the
  // effective FLOP/s, at most its duration): the tensor-pipe activity DCGM reports
  // (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) over a window. Prefill is compute-bound and decode
  // memory-bound, so this counts a prompt's own work, not the whole step it shared.
  Micros computeUsUntil(Micros nowUs) const;
  // Requests here: queued + running.
  int outstanding() const { return waiting() + running(); }
  // Prompt tokens not yet prefilled: queued ones and those in the iteration in flight (what a
  // token-aware router balances).
  std::int64_t pendingPromptTokens() const { return waitingPromptTokens_ + prefillingTokens_; }

  const ReplicaPerf& perf() const { return perf_; }
  // Tokens of `job`'s prompt the prefix cache holds now (a prefix of whole blocks; at least
  // the last token is computed: it yields the first output token). 0 without a cache.
  std::int64_t cachedTokensOf(const ReplicaJob& job) const;
  // Prompt tokens served from the prefix cache so far, and prompt tokens admitted.
  std::int64_t cachedPromptTokens() const { return cachedPromptTokens_; }
  std::int64_t admittedPromptTokens() const { return admittedPromptTokens_; }

 private:
  struct Sequence {
    ReplicaJob job;
    std::int32_t generated = 0;  // tokens produced so far (0: being prefilled this iteration)
  };

  ReplicaPerf perf_;
  std::deque<ReplicaJob> waiting_;
  std::vector<Sequence> running_;
  std::int64_t kvReservedTokens_ = 0;
  std::int64_t waitingPromptTokens_ = 0;
  std::int64_t prefillingTokens_ = 0;  // prompts of the iteration in flight
  // Prefix cache: LRU order (front = most recent) and where each block sits in it.
  std::int64_t cacheCapacity_;
  int blockTokens_;
  std::list<std::uint32_t> lru_;
  std::unordered_map<std::uint32_t, std::list<std::uint32_t>::iterator> cached_;
  std::int64_t cachedPromptTokens_ = 0;
  std::int64_t admittedPromptTokens_ = 0;
  // Makes `job`'s blocks the most recently used, adding the missing ones.
  void remember(const ReplicaJob& job);
  std::optional<Micros> iterationEndUs_;
  Micros iterationStartUs_ = 0;
  Micros busyDoneUs_ = 0;  // busy time of finished iterations
  Micros computeDoneUs_ = 0;       // compute time of finished iterations
  Micros iterationComputeUs_ = 0;  // the in-flight iteration's compute time
};

}  // namespace tessera::sim
