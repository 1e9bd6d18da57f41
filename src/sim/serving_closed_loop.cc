#include "sim/serving_closed_loop.h"

#include <algorithm>
#include <string>

#include "sim/serving_replica.h"

namespace tessera::sim {

Result<ClosedLoopResult> runClosedLoop(const ReplicaPerf& perf, const ClosedLoopOptions& o) {
  if (o.concurrency < 1) return fail(Error::invalid("concurrency must be >= 1"));
  if (o.inputTokens < 1 || o.outputTokens < 1) {
    return fail(Error::invalid("prompt and output lengths must be >= 1"));
  }
  const int total = o.requests > 0 ? o.requests : 20 * o.concurrency;
  ReplicaEngine engine(perf);
  const ReplicaJob probe{0, o.inputTokens, o.outputTokens};
  if (!engine.fits(probe)) {
    return fail(Error::invalid("a request of " + std::to_string(o.inputTokens + o.outputTokens) +
                               " tokens does not fit the replica's KV cache of " +
                               std::to_string(perf.kvCapacityTokens) + " tokens"));
  }
  struct Timing {
    Micros sent = 0, first = -1, done = -1;
  };
  std::vector<Timing> timing;
  timing.reserve(static_cast<std::size_t>(total));
  auto send = [&](Micros now) {
    const int id = static_cast<int>(timing.size());
    timing.push_back({now});
    engine.enqueue({id, o.inputTokens, o.outputTokens});
  };
  for (int i = 0; i < std::min(o.concurrency, total); ++i) send(0);
  Micros now = 0;
  int completed = 0;
  std::vector<int> admitted, first, done;
  while (completed < total) {
    admitted.clear();
    const auto end = engine.startIteration(now, admitted);
    if (!end) return fail(Error::internal("closed loop: the replica stopped with work left"));
    now = *end;
    first.clear();
    done.clear();
    engine.finishIteration(first, done);
    for (int id : first) timing[static_cast<std::size_t>(id)].first = now;
    for (int id : done) {
      timing[static_cast<std::size_t>(id)].done = now;
      ++completed;
      if (static_cast<int>(timing.size()) < total) send(now);
    }
  }
  ClosedLoopResult r;
  r.concurrency = o.concurrency;
  r.requests = total;
  r.durationS = static_cast<double>(now) / 1e6;
  std::vector<double> ttft;
  double tpot = 0;
  for (const Timing& t : timing) {
    ttft.push_back(static_cast<double>(t.first - t.sent) / 1000);
    if (o.outputTokens > 1) {
      tpot += static_cast<double>(t.done - t.first) / 1000 / (o.outputTokens - 1);
    }
  }
  const auto n = static_cast<double>(timing.size());
  for (double v : ttft) r.ttftMeanMs += v / n;
  std::sort(ttft.begin(), ttft.end());
  r.ttftP50Ms = ttft[ttft.size() / 2];
  r.tpotMeanMs = tpot / n;
  r.outputTokensPerSec = r.durationS > 0 ? n * o.outputTokens / r.durationS : 0;
  r.requestsPerSec = r.durationS > 0 ? n / r.durationS : 0;
  return r;
}

}  // namespace tessera::sim
