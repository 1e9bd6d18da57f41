#include "sim/serving_replica.h"

#include <algorithm>
#include <cmath>

namespace tessera::sim {
namespace {

std::int64_t contextOf(const ReplicaJob& job) {
  return static_cast<std::int64_t>(job.inputTokens) + job.outputTokens;
}

}  // namespace

bool ReplicaEngine::fits(const ReplicaJob& job) const {
  return contextOf(job) <= perf_.kvCapacityTokens;
}

double ReplicaEngine::kvCacheUsage() const {
  if (perf_.kvCapacityTokens <= 0) return 0;
  return static_cast<double>(kvReservedTokens_) / static_cast<double>(perf_.kvCapacityTokens);
}

Micros ReplicaEngine::busyUsUntil(Micros nowUs) const {
  if (!iterationEndUs_) return busyDoneUs_;
  return busyDoneUs_ + std::clamp(nowUs, iterationStartUs_, *iterationEndUs_) - iterationStartUs_;
}

Micros ReplicaEngine::computeUsUntil(Micros nowUs) const {
  if (!iterationEndUs_) return computeDoneUs_;
  // Spread evenly over the iteration in flight.
  const Micros length = *iterationEndUs_ - iterationStartUs_;
  const Micros elapsed = std::clamp(nowUs, iterationStartUs_, *iterationEndUs_) - iterationStartUs_;
  return computeDoneUs_ + (length > 0 ? iterationComputeUs_ * elapsed / length : 0);
}

std::int64_t ReplicaEngine::cachedTokensOf(const ReplicaJob& job) const {
  if (cacheCapacity_ <= 0) return 0;
  std::int64_t hits = 0;
  for (std::uint32_t block : job.blocks) {
    if (!cached_.contains(block)) break;
    ++hits;
  }
  return std::min<std::int64_t>(hits * blockTokens_, std::max(0, job.inputTokens - 1));
}

void ReplicaEngine::remember(const ReplicaJob& job) {
  if (cacheCapacity_ <= 0) return;
  for (std::uint32_t block : job.blocks) {
    if (auto it = cached_.find(block); it != cached_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      continue;
    }
    lru_.push_front(block);
    cached_.emplace(block, lru_.begin());
    if (static_cast<std::int64_t>(lru_.size()) > cacheCapacity_) {
      cached_.erase(lru_.back());
      lru_.pop_back();
    }
  }
}

std::optional<Micros> ReplicaEngine::startIteration(Micros nowUs, std::vector<int>& admitted,
                                                    double slowdown) {
  if (iterationEndUs_ || !hasWork()) return std::nullopt;
  // Admission, FIFO: the head waits (and everything behind it) until it fits.
  std::int64_t promptTokens = 0;
  double flops = 0;
  double bytes = 0;
  while (!waiting_.empty() && static_cast<int>(running_.size()) < perf_.maxNumSeqs) {
    const ReplicaJob& head = waiting_.front();
    const std::int64_t context = contextOf(head);
    if (kvReservedTokens_ + context > perf_.kvCapacityTokens) break;
    const std::int64_t cachedTokens = cachedTokensOf(head);
    const std::int64_t computed = head.inputTokens - cachedTokens;
    if (promptTokens > 0 && promptTokens + computed > perf_.maxBatchedTokens) break;
    remember(head);
    cachedPromptTokens_ += cachedTokens;
    admittedPromptTokens_ += head.inputTokens;
    const auto l = static_cast<double>(head.inputTokens);
    const auto c = static_cast<double>(cachedTokens);
    flops += (l - c) * perf_.flopsPerToken + perf_.attentionFlopsPerPair * (l * l - c * c) / 2;
    promptTokens += computed;
    waitingPromptTokens_ -= head.inputTokens;
    kvReservedTokens_ += context;
    admitted.push_back(head.id);
    running_.push_back({head, 0});
    waiting_.pop_front();
  }
  bool any = promptTokens > 0 || !admitted.empty();
  for (const Sequence& s : running_) {
    if (s.generated == 0) continue;  // admitted just now: prefilled above
    const double context = static_cast<double>(s.job.inputTokens) + s.generated;
    flops += perf_.flopsPerToken + perf_.attentionFlopsPerPair * context;
    bytes += context * perf_.kvBytesPerToken;
    any = true;
  }
  if (!any) return std::nullopt;  // only blocked requests: nothing can run (never fits)
  bytes += perf_.weightsBytes;
  const double seconds =
      std::max(flops / perf_.flopsPerSec, bytes / perf_.bytesPerSec) * std::max(1.0, slowdown);
  const auto us = std::max<Micros>(1, static_cast<Micros>(std::ceil(seconds * 1e6 - 1e-6)));
  iterationComputeUs_ =
      std::min(us, static_cast<Micros>(std::llround(flops / perf_.flopsPerSec * 1e6)));
  iterationStartUs_ = nowUs;
  iterationEndUs_ = nowUs + us;
  prefillingTokens_ = promptTokens;
  return iterationEndUs_;
}

void ReplicaEngine::finishIteration(std::vector<int>& firstTokens, std::vector<int>& completed) {
  if (!iterationEndUs_) return;
  busyDoneUs_ += *iterationEndUs_ - iterationStartUs_;
  computeDoneUs_ += iterationComputeUs_;
  iterationEndUs_.reset();
  prefillingTokens_ = 0;
  for (Sequence& s : running_) {
    if (s.generated == 0) firstTokens.push_back(s.job.id);
    ++s.generated;
    if (s.generated >= s.job.outputTokens) {
      completed.push_back(s.job.id);
      kvReservedTokens_ -= contextOf(s.job);
    }
  }
  std::erase_if(running_, [](const Sequence& s) { return s.generated >= s.job.outputTokens; });
}

ReplicaEngine::Abort ReplicaEngine::abortAll() {
  Abort out;
  for (const Sequence& s : running_) {
    if (s.generated == 0) {
      out.unserved.push_back(s.job);
    } else {
      out.cutOff.push_back(s.job.id);
    }
  }
  out.unserved.insert(out.unserved.end(), waiting_.begin(), waiting_.end());
  running_.clear();
  waiting_.clear();
  kvReservedTokens_ = 0;
  waitingPromptTokens_ = 0;
  prefillingTokens_ = 0;
  if (iterationEndUs_) {
    busyDoneUs_ += *iterationEndUs_ - iterationStartUs_;  // the GPU did the work anyway
    computeDoneUs_ += iterationComputeUs_;
    iterationEndUs_.reset();
  }
  return out;
}

}  // namespace tessera::sim
