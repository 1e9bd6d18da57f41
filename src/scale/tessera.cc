// Tessera's own recommender: size the deployment for the concurrency and the prefill time its
// requests need now plus the backlog it must drain, counting the replicas that are loading as
// capacity arriving at their expectedReadyMs. Queue and KV cache are guards for when the
// model's inputs are off.
//
//   R, L    ready and loading replicas (draining ones are not capacity)
//   mc      per-replica concurrency: the `maxConcurrency` argument, else the replicas' mean
//           maxConcurrency, else the last one seen, else the largest running count (>= 1); a
//           replica that queues with its KV cache at or above kvCacheUsage holds no more than it
//           runs, so mc = min(mc, mean running of such replicas); and at most Σ running / Σ
//           kvCacheUsage over the ready replicas that report both (what a full cache holds at
//           the context lengths running now)
//   c       mc × targetUtilization                      (headroom for bursts)
//   D       λ × S                                       (Little's law: requests in service)
//   H       when a replica added now could serve: max(cold start, latest expectedReadyMs − now),
//           where cold start = the last seen load time (expectedReadyMs − createdMs of a
//           loading replica, when at most 15 min), else `coldStartSeconds`
//   P       meanPrefillMs (when measured): the mean time a prompt holds its replica's prefill;
//           when ready replicas report computeActive and prefillsPerSec and the ratio
//           Σ computeActive / Σ prefillsPerSec over those (the prompt's own compute: the measured
//           time counts the whole step each prompt of a batch shared) is at most half of it, that
//           ratio; the tail's wait budget still leaves the measured P (the step waited for)
//   λ       the arrival rate measured now; for the up-sizing terms the forecast one cold start
//           ahead instead, when higher: the least-squares trend of the rates this recommender
//           saw over forecastWindowSeconds, carried H ahead, at most 3 λ (down-sizing keeps
//           the measured λ); or the rate of the newest interval when it stands out (a step)
//   step    the newest interval's rate (since the last call, Δ < the 60-s signal window W),
//           read off the window's rate now (λ) and at the last call (λ₀): D = W (λ − λ₀) is the
//           newest interval's arrivals less those of the interval that left the window; a step
//           when D > stepSd × √(2 λ Δ) (two Poisson counts' difference); then λ' = D / Δ + the
//           rate of the window that ended about W ago (which covered the interval that left;
//           λ₀ without one), at most 3 λ. On a step the up-sizing terms take λ' and the prefill
//           term adds replicas without waiting for the TTFT gate (a step shows in the TTFT only
//           once a queue has built). Not within a window of the first rate or of a gap of one
//           (the window is still filling)
//   μ       what a ready replica serves per second: mc / S, and at most 1 / P (a replica
//           prefills one batch of prompts at a time: without chunked prefill a long prompt
//           holds the whole GPU for P)
//   X       the backlog at now + H: Σ waiting now (plus bufferedRequests), growing by λ − k·μ
//           with k ready replicas, k stepping up as each loading replica reaches its
//           expectedReadyMs
//   δ       the backlog's drain rate: X / T (T = backlogDrainSeconds), at most
//           B / T + R × min(c / S, u / P) with B the requests the router holds when R > 0: a
//           request queued on a replica is served by that replica alone (new replicas take only
//           new arrivals), so a queue needs no more replicas to drain it than hold it; with
//           none ready everything waits at the router
//   N       the requests running one cold start ahead: Σ running over the ready replicas now,
//           plus the least-squares trend of that count over forecastWindowSeconds carried one
//           cold start ahead when it rises, at most 3× the count now, and at most as far as
//           the requests in the system (running, waiting and buffered) climb over the same
//           window (a queue is X's, not N's; a rise that is the queue moving into the
//           replicas is not carried).
//           λ × S is the steady state of a service time measured on the requests that
//           finished; while long requests keep arriving the finished ones are the short ones,
//           and the count running climbs for as long as a request lasts
//   need    max(D + δ × S, N)
//   pre     λ × P + δ × P                               (prefill occupancy, in replicas)
//   pf(x)   max(the M/G/c tail's replicas for x, ceil(x × Pc / P / u)) (u =
//           prefillTargetUtilization; P = the time x was computed with, the step in preD;
//           Pc = the prompts' own compute, Σ computeActive / Σ prefillsPerSec as above, where
//           measured and below the measured step, else the step: the cap bounds the compute
//           prompts take, not the steps they shared). The tail's prompts arrive at x / P and
//           each holds its replica for Pc (a replica works through queued prompts at its
//           compute rate, several to a step), with a wait budget of the SLO less the step (at
//           least Pc)
//   up      max(ceil(need / c), pf(pre))
//   down    max(ceil(needD / (c × (1 − tol))), pf(preD / (1 − tol)))
//           (tol = scaleDownTolerance: a scale-down keeps extra headroom), at the measured rate
//           plus its burst headroom: λD = λ + z × rise(λ), needD = max((λD + δ) × S, ND) with
//           ND the count running with its climb carried a cold start + 60 s ahead (as far as a
//           replica given up takes to come back; at most 3× the count now), preD = (λD + δ)
//           × P with P the measured step, whose prefill tail plans with the step P + z ×
//           rise(P) while TTFT p99 > sloTtftMs / 2 (and a hold of Pc stretched in proportion);
//           rise(x) = the root mean square of x's rise over H + 60 s (a cold start after a rise has
//           shown in the 60-s signal window) in the last 15 minutes of calls from a signal window
//           after the first one on (a fall counts 0), z = scaleDownBurstSd. The governor's default
//           scale-down window for tessera is 60 s + the default 60-s cold start, 120 s, while
//           that history fills (its first 15 minutes), and 60 s + the last load time seen once
//           it is full.
//   kv      ceil(R × kvMean / kvCacheUsage) when kvMean > kvCacheUsage  (memory guard)
//   n       max(up, kv) when that is >= current, else min(current, max(down, kv))
//   queue   if mean waiting per ready replica > queuePerReplica, the queue grew since the last
//           call with the same ready replicas, nothing is loading and n <= current: the model
//           underestimates, n = current + 1
// Without λ or S: D = Σ running, need = D + Σ waiting (one slot per queued request), no
// projection, no prefill term; without P: no prefill term, μ = mc / S. Because the loading replicas
// are in the projection, a backlog that builds while they load does not add more replicas unless
// they cannot absorb it within T of arriving.
//
// Arguments (defaults): targetUtilization 0.8, maxConcurrency 0 (from the replicas),
// backlogDrainSeconds 60, coldStartSeconds 60, kvCacheUsage 0.85, queuePerReplica 4,
// scaleDownTolerance 0.1, prefillTargetUtilization 0.6,
// forecastWindowSeconds 120 (0: no forecast of the rate or trend of the count running),
// scaleDownBurstSd 2 (0: no burst headroom), stepSd 3 (0: no step detection).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <vector>

#include "scale/number_text.h"
#include "scale/queueing.h"
#include "scale/recommenders.h"
#include "scale/signal_stats.h"

namespace tessera::scale {
namespace {

// The history the rises are measured on.
constexpr Millis kBurstHistoryMs = 15 * 60 * 1000;
// The rate window of the signals (Prometheus' rate(...[1m])): a rise shows in full only this
// long after it happened.
constexpr Millis kSignalWindowMs = 60 * 1000;
// coldStartSeconds' default: a replica's load time until one is seen.
constexpr Millis kDefaultColdStartMs = 60 * 1000;

struct TesseraParams {
  double targetUtilization = 0.8;
  double maxConcurrency = 0;
  double backlogDrainSeconds = 60;
  double coldStartSeconds = kDefaultColdStartMs / 1000;
  double kvCacheUsage = 0.85;
  double queuePerReplica = 4;
  double scaleDownTolerance = 0.1;
  // Share of a replica's time its prompts' prefills may occupy. Lower than the concurrency
  // target: TTFT queues behind whole prefills, and its wait grows as 1 / (1 − occupancy).
  double prefillTargetUtilization = 0.6;
  double sloTtftMs = 2000;
  // The share of requests that must meet sloTtftMs: the prefill stage is sized so that a prompt
  // waits past its budget with at most 1 - sloTarget probability.
  double sloTarget = 0.99;
  // Arrival forecast: the trend of λ over this many seconds of the recommender's own history,
  // carried one cold start ahead, and the same of the count running (0: neither).
  double forecastWindowSeconds = 120;
  // Burst headroom on a scale-down: keep capacity for the measured arrival rate (and, while the
  // TTFT is near its target, the prefill step) plus this many root-mean-square rises over the
  // time a replica given up takes to come back, as the recommender's own history shows them
  // (0: none).
  double scaleDownBurstSd = 2;
  // A step in the arrivals: the newest interval's rate, when it stands out of the window's rate
  // by more than this many standard deviations, sizes the way up at once (0: not looked for).
  double stepSd = 3;
};

constexpr Millis kMaxLoadMs = 15 * 60 * 1000;

// The prefill stage's service variability for its tail: the measured one (scale/queueing.h
// serviceCs2 from the prefill histogram's mean and P99) when it is below an exponential's, else
// an exponential's. Prompts of even length wait less than the M/M/c tail says; above an
// exponential the measured spread held more replicas on long-prompt traffic for no attainment
// on the robustness matrix, so the exponential stays the ceiling.
constexpr double kExponential = 1;

double prefillCs2(const DeploymentSignals& signals) {
  // A p99 at or below the mean says no spread was seen (a window of one prompt, or of prompts
  // all alike), which is too little to bet the tail on.
  if (!signals.meanPrefillMs || !signals.prefillP99Ms ||
      !(*signals.prefillP99Ms > *signals.meanPrefillMs)) {
    return kExponential;
  }
  return std::min(kExponential, serviceCs2(*signals.meanPrefillMs, *signals.prefillP99Ms));
}

// A prompt's own compute: Σ computeActive / Σ prefillsPerSec over the ready replicas that
// report both over a window in which they prefilled (a replica that has just become ready has
// no window yet, and says nothing about the others' prompts). nullopt: none does.
std::optional<double> ownPrefillSec(const DeploymentSignals& signals) {
  double compute = 0, prefills = 0;
  for (const ReplicaSignals& r : signals.replicas) {
    if (r.phase != ReplicaPhase::kReady || !r.computeActive || !r.prefillsPerSec ||
        *r.prefillsPerSec <= 0) {
      continue;
    }
    compute += *r.computeActive;
    prefills += *r.prefillsPerSec;
  }
  if (compute <= 0 || prefills <= 0) return std::nullopt;
  return compute / prefills;
}

int ceilCount(double x) {
  return static_cast<int>(std::ceil(x - 1e-9));
}

// What the recommender measured at a call, for the burst headroom of later scale-downs.
struct Seen {
  Millis at;
  double rate;  // the measured arrival rate, requests/s
  double step;  // the measured prefill step (P as engines report it), s
};

class TesseraRecommender final : public Recommender {
 public:
  explicit TesseraRecommender(TesseraParams p) : p_(p) {}
  std::string_view name() const override { return "tessera"; }
  bool accountsForLoading() const override { return true; }
  // A scale-down goes at most to half the replicas per signal window (60 s: the rate window of
  // every signal it reads), rounded down as HPA rounds a Percent policy. What it sizes from (the
  // service time, the prefill step) was measured at the load per replica before, and both
  // stretch as that load grows; halving about doubles the load (more when an odd count rounds
  // down: 3 → 1), and the next window measures it before the next step. Without it, a young window
  // (15 s after a start, only short requests finished) cut 14 replicas to 4.
  std::vector<ScalingPolicy> defaultScaleDownPolicies() const override {
    return {{PolicyType::kPercent, 50, 60}};
  }
  // The governor's scale-down window, asked again after every recommendation: the time a
  // replica given up takes to come back once a rise shows (the 60-s signal window plus a cold
  // start). While the burst history fills (its first kBurstHistoryMs, from a signal window after
  // the first call with rates, or after a gap that emptied it) the cold start is the default
  // 60 s, so 120 s: a few minutes of rises say little about the next one. Once the history is
  // full, the last load time seen (the node agent's; 31-46 s in the simulator; at most
  // kMaxLoadMs), since the burst headroom (scaleDownBurstSd) then holds what the rises of a whole
  // history need over that same time; with no load seen, still the default. (A load time past
  // about 13 minutes leaves fewer than three pairs of calls that far apart in the history, so no
  // headroom, and a window that long holds the count instead.) HPA's 300 s holds the largest
  // count of five minutes whatever the traffic.
  std::optional<int> defaultScaleDownWindowSeconds() const override {
    const Millis coldStart =
        burstHistoryFull() && lastLoadMs_ ? *lastLoadMs_ : kDefaultColdStartMs;
    return static_cast<int>((kSignalWindowMs + coldStart + 999) / 1000);
  }

  Recommendation recommend(const DeploymentSignals& signals, int current) override {
    const Millis now = signals.nowMs;
    lastNowMs_ = now;
    int ready = 0;
    double backlog = 0;
    double running = 0;
    double maxRunning = 0;
    double queuedRunning = 0;  // running on replicas that queue with a full KV cache
    int queuedReplicas = 0;
    double kvRunning = 0, kvShare = 0;  // running sequences and the KV cache they fill
    std::vector<Millis> arrivals;  // loading replicas' expected ready times
    for (const ReplicaSignals& r : signals.replicas) {
      if (r.phase == ReplicaPhase::kLoading) {
        // A load time beyond kMaxLoadMs is taken for an unset createdMs, not learned.
        if (r.expectedReadyMs && *r.expectedReadyMs > r.createdMs &&
            *r.expectedReadyMs - r.createdMs <= kMaxLoadMs) {
          lastLoadMs_ = *r.expectedReadyMs - r.createdMs;
        }
        arrivals.push_back(r.expectedReadyMs.value_or(now + coldStartMs()));
        continue;
      }
      if (r.phase != ReplicaPhase::kReady) continue;
      ++ready;
      backlog += r.waiting.value_or(0);
      running += r.running.value_or(0);
      maxRunning = std::max(maxRunning, r.running.value_or(0));
      if (r.running && r.kvCacheUsage && *r.kvCacheUsage > 0) {
        kvRunning += *r.running;
        kvShare += *r.kvCacheUsage;
      }
      // A queue while the KV cache is full: the replica holds no more than it runs now.
      if (r.waiting.value_or(0) >= 1 && r.running && r.kvCacheUsage &&
          *r.kvCacheUsage >= p_.kvCacheUsage) {
        queuedRunning += *r.running;
        ++queuedReplicas;
      }
    }
    const int loading = static_cast<int>(arrivals.size());
    const double buffered = signals.bufferedRequests.value_or(0);
    backlog += buffered;

    std::optional<double> known = p_.maxConcurrency > 0 ? std::optional<double>(p_.maxConcurrency)
                                                        : meanMaxConcurrency(signals);
    if (known) lastConcurrency_ = *known;
    double mc = known ? *known : lastConcurrency_.value_or(maxRunning);
    if (queuedReplicas > 0 && queuedRunning > 0) mc = std::min(mc, queuedRunning / queuedReplicas);
    // What a full KV cache holds at the context lengths running now: a reported maxConcurrency
    // divides the cache by the mean request length, but a request holds its slot as long as its
    // output takes, so the sequences running at any moment are mostly the long ones; with long,
    // varied outputs it counts slots the running sequences do not leave.
    if (kvShare > 0 && kvRunning > 0) mc = std::min(mc, kvRunning / kvShare);
    mc = std::max(mc, 1.0);
    const double perReplica = mc * p_.targetUtilization;

    const std::optional<double> kv = sumOverReady(signals, &ReplicaSignals::kvCacheUsage).mean();
    const double meanWaiting = ready > 0 ? (backlog - buffered) / ready : 0;

    double prefillSec = 0;  // P (0: not measured)
    double stepSec = 0;     // the measured P: the step a prompt waits for (the tail's budget)
    // The compute a prompt's prefill takes: its own where measured and below the step, else
    // the step (the occupancy cap's measure; 0: not measured).
    double computeSec = 0;
    bool ownPrefill = false;  // P is the prompts' own compute, not the steps they shared
    double need = 0;
    double prefill = 0;                    // prefill occupancy, in replicas (0: not measured)
    double needDown = 0, prefillDown = 0;  // the same at the measured rate
    double stepDown = 0;                   // the step a scale-down plans the prefill tail with
    std::string how;
    const bool rates =
        signals.arrivalRatePerSec && signals.meanServiceMs && *signals.meanServiceMs > 0;
    // TTFT near its target: p99 above half of it, or not measured (or no target).
    const bool ttftNear =
        p_.sloTtftMs <= 0 || !signals.ttftP99Ms || *signals.ttftP99Ms > p_.sloTtftMs / 2;
    double forecast = 0;  // λ expected one cold start ahead (0: none)
    std::optional<double> step;  // the newest interval's rate, where it stands out
    if (signals.arrivalRatePerSec) {
      step = newestRateIfStep(now, *signals.arrivalRatePerSec);
      forecast = trendAhead(history_, now, *signals.arrivalRatePerSec, 0);
      if (step) forecast = std::max(forecast, *step);
    }
    if (rates) {
      const double measured = *signals.arrivalRatePerSec;
      // Up-sizing plans for the rate a replica asked for now will meet; down-sizing keeps the
      // replicas the measured rate needs.
      const double lambda = std::max(measured, forecast);
      const double serviceSec = *signals.meanServiceMs / 1000.0;
      prefillSec =
          signals.meanPrefillMs && *signals.meanPrefillMs > 0 ? *signals.meanPrefillMs / 1000 : 0;
      // A prompt's own work: the compute the ready replicas did per prompt they prefilled,
      // over those that report both (ownPrefillSec). The measured P counts the whole step a batch
      // of prompts shared (each prompt of the batch reads the step), the compute does not.
      stepSec = prefillSec;
      const std::optional<double> own = ownPrefillSec(signals);
      if (prefillSec > 0 && own) {
        // Only where batching is what the measured P shows: two or more prompts to a step on
        // average. Where prompts mostly run alone (long ones) the step is their own work plus
        // the decode it stalls, and that is what the next prompt waits for.
        if (*own <= prefillSec / 2) {
          prefillSec = *own;
          ownPrefill = true;
        }
      }
      computeSec = own && *own > 0 && *own < stepSec ? *own : stepSec;
      double perReplicaRate = mc / serviceSec;
      if (prefillSec > 0) perReplicaRate = std::min(perReplicaRate, 1 / prefillSec);
      const double projected =
          projectBacklog(now, backlog, lambda, perReplicaRate, ready, arrivals);
      // The backlog's drain rate, at most what one replica serves at target per ready replica
      // plus what the router holds: a request queued on a replica is served by that replica
      // (new replicas take only new arrivals), so a queue never needs more replicas to drain it
      // than hold it.
      double perReplicaDrain = perReplica / serviceSec;
      if (prefillSec > 0) {
        perReplicaDrain = std::min(perReplicaDrain, p_.prefillTargetUtilization / prefillSec);
      }
      // With no replica ready every request waits at the router, which any replica can take.
      const double drain =
          ready == 0 ? projected / p_.backlogDrainSeconds
                     : std::min(projected / p_.backlogDrainSeconds,
                                buffered / p_.backlogDrainSeconds + ready * perReplicaDrain);
      need = lambda * serviceSec + drain * serviceSec;
      // The count running one cold start ahead, while it climbs: with long answers S is
      // measured on the requests that finished, the short ones, until the long ones do. Only
      // as far as the requests in the system (running, waiting, held by the router) climb too:
      // where the count running rises because ready replicas take in a queue, scaling made the
      // rise, not the traffic.
      double runningAhead = trendAhead(runningSeen_, now, running, running);
      const double inSystem = running + backlog;
      const double systemRise = trendAhead(inSystemSeen_, now, inSystem, inSystem) - inSystem;
      runningAhead = std::min(runningAhead, running + systemRise);
      // A scale-down carries the climb as far as a replica given up takes to come back: a cold
      // start after the climb has shown in a signal window (as the burst headroom), at most 3×.
      const double downHorizon = static_cast<double>(coldStartMs() + kSignalWindowMs) /
                                 static_cast<double>(std::max<Millis>(1, coldStartMs()));
      const double runningDown =
          std::min(3 * running, running + (runningAhead - running) * downHorizon);
      prefill = (lambda + drain) * prefillSec;
      how = "demand " + shortNumber(lambda * serviceSec) + " + backlog " + shortNumber(projected) +
            " over " + shortNumber(p_.backlogDrainSeconds) + " s";
      if (drain < projected / p_.backlogDrainSeconds - 1e-9)
        how += " (queued on " + std::to_string(ready) + " ready, drained by them alone)";
      if (lambda > measured) {
        how += ", λ " + shortNumber(measured) + " → " + shortNumber(lambda) +
               (step && lambda <= *step ? " step" : " forecast");
      }
      if (runningAhead > need) {
        need = runningAhead;
        how += ", running " + shortNumber(running);
        if (runningAhead > running) how += " → " + shortNumber(runningAhead) + " rising";
      }
      // A scale-down sizes for what was measured plus the rises its history shows over the time
      // a replica given up takes to come back (riseSd; the burst headroom): of the arrival
      // rate, and of the prefill step, which stretches with the load per replica.
      // The history starts a signal window after the first call: rates measured before were
      // over less than a window (a deployment's first minute), and their noise is not the
      // traffic's.
      // A gap longer than the history (no rates: scaled to zero, nothing finishing, no metrics)
      // empties it: it starts again, as for a new deployment.
      if (!firstCallMs_ || (lastRatesMs_ && *lastRatesMs_ < now - kBurstHistoryMs)) {
        firstCallMs_ = now;
      }
      lastRatesMs_ = now;
      if (now >= *firstCallMs_ + kSignalWindowMs) seen_.push_back({now, measured, stepSec});
      while (!seen_.empty() && seen_.front().at < now - kBurstHistoryMs) seen_.pop_front();
      const double burstRate = p_.scaleDownBurstSd * riseSd(&Seen::rate);
      const double burstStep = p_.scaleDownBurstSd * riseSd(&Seen::step);
      // A scale-down keeps what runs now (and what is climbing) too.
      needDown = std::max((measured + burstRate + drain) * serviceSec, runningDown);
      // A scale-down's prefill rate and tail budget stay on the measured P: the shared steps are
      // what the prompts wait for, and the own work in P itself (the drain and the projection
      // too) let long-prompt traffic slip below its target. Its cap counts the own compute and its
      // tail holds a replica for it, stretched as the step is, as the way up's.
      prefillDown = (measured + burstRate + drain) * stepSec;
      // The step's rise matters where the TTFT is near its target (ttftNear): where prompts are
      // short and TTFT far below it the occupancy cap covers a stretch, and the step's own noise
      // would only hold replicas.
      stepDown = stepSec + (ttftNear ? burstStep : 0);
      if (burstRate > 0) how += ", down holds λ +" + shortNumber(burstRate) + " for bursts";
      if (stepDown > stepSec) how += ", down plans P +" + shortNumber(burstStep) + " s for bursts";
      if (prefillSec > 0) how += ", prefill " + shortNumber(prefill);
      if (ownPrefill) {
        how += " (own " + shortNumber(prefillSec) + " s of a " + shortNumber(stepSec) + "-s step)";
      } else if (prefillSec > 0 && computeSec < stepSec) {
        how += " (occupancy on the own " + shortNumber(computeSec) + " s of a " +
               shortNumber(stepSec) + "-s step)";
      }
    } else {
      need = running + backlog;
      needDown = need;
      how =
          "running " + shortNumber(running) + " + waiting " + shortNumber(backlog) + " (no rates)";
    }

    const double keep = 1 - p_.scaleDownTolerance;
    // The prefill stage as a queue of replicas: prompts arrive at prefill / P per second and
    // hold a replica for their own compute (Pc: a replica works through a queue of prompts at
    // its compute rate, batching them into steps, so the work ahead of a prompt drains at Pc a
    // prompt, not at a whole step a prompt); enough replicas that a prompt waits beyond its
    // budget (the TTFT SLO less the step it is prefilled in, at least Pc) with at most
    // 1 - sloTarget probability (M/G/c, the spread measured up to an exponential's), and at
    // most prefillTargetUtilization occupancy. The occupancy counts the prompts' own compute where
    // it is measured: P charges each prompt the whole step it was prefilled in, which other prompts
    // of the batch and the running requests' decode (the concurrency term's work) shared. It adds
    // replicas only while TTFT shows pressure (p99 above half the SLO) unless P is the prompts' own
    // compute: P as engines report it is per request, so prompts batched in one step each count the
    // whole step, and without the gate short batched prompts read as a prefill load they are not.
    // It always holds the replicas there on a scale-down (its rate and budget from the measured
    // P), with the tolerance's headroom (sized for a rate 1 / (1 - tol) higher).
    // `step` is the step the prompts wait for: the measured one, or on a scale-down that plus
    // its burst rise, which stretches a prompt's hold (its own compute) in proportion.
    const auto prefillReplicas = [&](double occupancy, double service, double step) {
      if (occupancy <= 0 || service <= 0) return 0;  // service > 0: stepSec > 0 too
      const double rate = occupancy / service;
      const double hold = step * computeSec / stepSec;
      // The wait a prompt may take is what its SLO leaves after the step it is prefilled in.
      const double budget = std::max(p_.sloTtftMs / 1000 - step, hold);
      const int tail =
          serversForTail(rate, hold, prefillCs2(signals), budget, 1 - p_.sloTarget, 100000);
      return std::max(tail, ceilCount(rate * computeSec / p_.prefillTargetUtilization));
    };
    // A step in the arrivals is pressure the TTFT p99 shows only once a queue has built.
    const bool ttftPressure = ownPrefill || ttftNear || step.has_value();
    const int up = std::max(ceilCount(need / perReplica),
                            ttftPressure ? prefillReplicas(prefill, prefillSec, stepSec) : 0);
    const int down = std::max(ceilCount(needDown / (perReplica * keep)),
                              prefillReplicas(prefillDown / keep, stepSec, stepDown));
    const int kvFloor = kv && *kv > p_.kvCacheUsage ? ceilCount(ready * *kv / p_.kvCacheUsage) : 0;
    int n = std::max(up, kvFloor);
    if (n < current) n = std::min(current, std::max(down, kvFloor));
    std::string guard;
    if (kvFloor > up && n == kvFloor)
      guard = "; kv " + shortNumber(*kv) + " > " + shortNumber(p_.kvCacheUsage);
    // Only with the same ready replicas as last time: a queue that grew while capacity was
    // arriving is what the projection is for.
    if (ready > 0 && meanWaiting > p_.queuePerReplica && lastBacklog_ && backlog > *lastBacklog_ &&
        ready == lastReady_ && loading == 0 && n <= current) {
      n = current + 1;
      guard = "; queue " + shortNumber(meanWaiting) + " per replica and growing";
    }
    lastBacklog_ = backlog;
    lastReady_ = ready;

    Recommendation rec;
    rec.replicas = n;
    rec.reason = "tessera: " + how + ", " + shortNumber(perReplica) + " per replica → " +
                 std::to_string(n) + guard;
    return rec;
  }

 private:
  // The newest interval's arrival rate, where it is a step, from the window rates this
  // recommender saw: between the last call (λ₀, Δ ago) and now (λ) the window took in the
  // newest Δ and let go of its oldest, so D = W (λ − λ₀) is the newest interval's arrivals less
  // those of the one that left (W the signal window). Without a step both are Poisson counts of
  // λ Δ, and D spreads √(2 λ Δ); a step is D above stepSd of those. The newest interval's rate is
  // then D / Δ plus the rate of the interval that left, which the window ending about W ago
  // covered (λ₀ when there is none), at most 3 λ. None within a window of the first rate or of a
  // gap (the window is still filling), or when the last call is a window or more ago.
  std::optional<double> newestRateIfStep(Millis now, double rate) {
    std::optional<std::pair<Millis, double>> last;
    if (!ratesSeen_.empty()) last = ratesSeen_.back();
    if (!last || now - last->first >= kSignalWindowMs) {
      ratesSeen_.clear();
      firstRateMs_ = now;
    }
    ratesSeen_.emplace_back(now, rate);
    // The window ending about W ago, and those after it.
    while (ratesSeen_.size() > 2 && ratesSeen_[1].first <= now - kSignalWindowMs) {
      ratesSeen_.pop_front();
    }
    // Without a last call, or after a gap, the window starts again now: nothing to difference.
    if (p_.stepSd <= 0 || now < *firstRateMs_ + kSignalWindowMs || now <= last->first) {
      return std::nullopt;
    }
    const double dt = static_cast<double>(now - last->first) / 1000;
    const double window = static_cast<double>(kSignalWindowMs) / 1000;
    const double excess = window * (rate - last->second);
    if (excess <= p_.stepSd * std::sqrt(std::max(1.0, 2 * rate * dt))) return std::nullopt;
    const std::pair<Millis, double>& before = ratesSeen_.front();
    const double left = before.first <= now - kSignalWindowMs ? before.second : last->second;
    return std::clamp(excess / dt + left, 0.0, 3 * rate);
  }

  // The burst history spans its kBurstHistoryMs: it starts a signal window after the first call
  // with rates, or after the first one past a gap longer than the history.
  bool burstHistoryFull() const {
    return firstCallMs_ && lastNowMs_ >= *firstCallMs_ + kSignalWindowMs + kBurstHistoryMs;
  }

  Millis coldStartMs() const {
    return lastLoadMs_ ? *lastLoadMs_ : static_cast<Millis>(p_.coldStartSeconds * 1000);
  }

  // The backlog when a replica asked for now could serve: waiting requests grow with arrivals
  // beyond what the ready replicas serve (perReplicaRate each, per second), and loading
  // replicas join at their expected ready times.
  double projectBacklog(Millis now, double backlog, double lambda, double perReplicaRate, int ready,
                        std::vector<Millis> arrivals) const {
    std::sort(arrivals.begin(), arrivals.end());
    Millis horizon = now + coldStartMs();
    if (!arrivals.empty()) horizon = std::max(horizon, arrivals.back());
    Millis t = now;
    int serving = ready;
    auto runUntil = [&](Millis until) {
      if (until <= t) return;
      const double seconds = static_cast<double>(until - t) / 1000.0;
      backlog = std::max(0.0, backlog + (lambda - serving * perReplicaRate) * seconds);
      t = until;
    };
    for (Millis at : arrivals) {
      runUntil(std::min(at, horizon));
      ++serving;
    }
    runUntil(horizon);
    return backlog;
  }

  // The root mean square of a measured quantity's rise over H + kSignalWindowMs (from each call
  // to the first one at least that much later; a fall counts 0) over what was seen in
  // kBurstHistoryMs: how far it can climb in the time a replica given up takes to come back (a
  // rise shows in full a signal window after it happened, and the replica asked for then serves
  // a cold start later). 0 without three such pairs.
  double riseSd(double Seen::*field) const {
    const Millis h = coldStartMs() + kSignalWindowMs;
    double sum = 0;
    int pairs = 0;
    std::size_t j = 0;
    for (std::size_t i = 0; i < seen_.size(); ++i) {
      j = std::max(j, i + 1);
      while (j < seen_.size() && seen_[j].at < seen_[i].at + h) ++j;
      if (j >= seen_.size()) break;
      const double d = std::max(0.0, seen_[j].*field - seen_[i].*field);
      sum += d * d;
      ++pairs;
    }
    return pairs >= 3 ? std::sqrt(sum / pairs) : 0;
  }

  // A measured quantity one cold start ahead: the least-squares trend of the values seen over
  // the forecast window (this one included), carried H ahead; never below `floor` and at most
  // 3× the value now (a trend from a few noisy windows is not trusted beyond that). Without
  // enough history (three calls): the value now.
  double trendAhead(std::deque<std::pair<Millis, double>>& seen, Millis now, double value,
                    double floor) const {
    seen.emplace_back(now, value);
    const auto windowMs = static_cast<Millis>(p_.forecastWindowSeconds * 1000);
    while (!seen.empty() && seen.front().first < now - windowMs) seen.pop_front();
    if (windowMs <= 0 || seen.size() < 3) return value;
    double mt = 0, mv = 0;
    for (const auto& [t, v] : seen) {
      mt += static_cast<double>(t - now) / 1000;
      mv += v;
    }
    const auto n = static_cast<double>(seen.size());
    mt /= n;
    mv /= n;
    double cov = 0, var = 0;
    for (const auto& [t, v] : seen) {
      const double dt = static_cast<double>(t - now) / 1000 - mt;
      cov += dt * (v - mv);
      var += dt * dt;
    }
    if (var <= 0) return value;
    const double slope = cov / var;  // per second
    const double ahead = value + slope * static_cast<double>(coldStartMs()) / 1000;
    return std::clamp(ahead, floor, std::max(floor, 3 * value));
  }

  TesseraParams p_;
  std::deque<std::pair<Millis, double>> history_;      // arrival rates, for the forecast
  std::deque<std::pair<Millis, double>> runningSeen_;  // Σ running, for its trend
  std::deque<std::pair<Millis, double>> inSystemSeen_;  // Σ running + waiting + buffered
  std::deque<Seen> seen_;  // over kBurstHistoryMs
  std::optional<Millis> lastLoadMs_;
  Millis lastNowMs_ = 0;               // the last call's time
  std::optional<Millis> firstCallMs_;  // the first call with rates: where the burst history starts
  std::optional<Millis> lastRatesMs_;  // the last call with rates
  std::optional<double> lastBacklog_;
  int lastReady_ = 0;
  std::optional<double> lastConcurrency_;  // for when no replica is left to tell
  // Step detection: the window rates of the last W and the one before, and when they began
  // (the first call with a rate, or the first after a gap of a window).
  std::deque<std::pair<Millis, double>> ratesSeen_;
  std::optional<Millis> firstRateMs_;
};

}  // namespace

Result<std::unique_ptr<Recommender>> makeTesseraRecommender(const RecommenderArgs& args) {
  ArgReader r("tessera", args);
  TesseraParams p;
  p.targetUtilization = r.fraction("targetUtilization", p.targetUtilization);
  p.maxConcurrency = r.nonNegative("maxConcurrency", p.maxConcurrency);
  p.backlogDrainSeconds = r.positive("backlogDrainSeconds", p.backlogDrainSeconds);
  p.coldStartSeconds = r.nonNegative("coldStartSeconds", p.coldStartSeconds);
  p.kvCacheUsage = r.fraction("kvCacheUsage", p.kvCacheUsage);
  p.queuePerReplica = r.nonNegative("queuePerReplica", p.queuePerReplica);
  p.prefillTargetUtilization = r.fraction("prefillTargetUtilization", p.prefillTargetUtilization);
  p.sloTtftMs = r.nonNegative("sloTtftMs", p.sloTtftMs);
  p.sloTarget = r.fraction("sloTarget", p.sloTarget);
  p.forecastWindowSeconds = r.nonNegative("forecastWindowSeconds", p.forecastWindowSeconds);
  p.scaleDownBurstSd = r.nonNegative("scaleDownBurstSd", p.scaleDownBurstSd);
  p.stepSd = r.nonNegative("stepSd", p.stepSd);
  const std::optional<double> tol = r.find("scaleDownTolerance");
  TESSERA_RETURN_IF_ERROR(r.finish());
  if (tol) {
    if (!std::isfinite(*tol) || *tol < 0 || *tol >= 1) {
      return fail(Error::invalid("tessera argument 'scaleDownTolerance' = " + shortNumber(*tol) +
                                 " is out of range (must be in [0, 1))"));
    }
    p.scaleDownTolerance = *tol;
  }
  return std::unique_ptr<Recommender>(std::make_unique<TesseraRecommender>(p));
}

}  // namespace tessera::scale
