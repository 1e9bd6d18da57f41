#pragma once
// Queueing estimates the scale module sizes the prefill stage with: how likely a prompt is to
// wait longer than its budget in front of c replicas, from what engines measure (arrival rate,
// mean prefill time and its 99th percentile). Internal to the scale module.
//
//   a = λ T, ρ = a / c                     (T: mean service time)
//   P(wait > t) ≈ C(c, a) exp(−(c / T − λ) t × 2 / (1 + cs²))     when ρ < 1, else 1
// C(c, a) is Erlang C, the chance a prompt waits at all. With exponential service (cs² = 1)
// this is the M/M/c tail exactly; otherwise the Allen–Cunneen / Kingman correction: the wait
// of an M/G/c queue is close to exponential with its M/M/c mean scaled by (1 + cs²) / 2, so
// variable prompt lengths (a few long prompts) lengthen the tail and uniform ones shorten it.

namespace tessera::scale {

// Squared coefficient of variation of a service time from its mean and 99th percentile,
// taken as log-normal (the shape prompt lengths and prefill times have): a p99 of 4.6× the
// mean (an exponential's) reads as cs² ≈ 0.87, 2× as 0.11; a p99 at or below the mean as 0; a p99
// beyond the log-normal's reach (about 15× the mean) as the largest it gives (cs² ≈ 222).
double serviceCs2(double mean, double p99);

// P(wait > t) for arrivals at `lambda` per second onto `servers` servers of mean service
// `service` seconds and squared coefficient of variation `cs2`.
double waitTail(double lambda, double service, double cs2, int servers, double t);

// The fewest servers for which P(wait > t) <= eps, at most `cap` (0 when nothing arrives).
int serversForTail(double lambda, double service, double cs2, double t, double eps, int cap);

// The largest mean number of requests in flight a replica of `slots` sequences holds with
// P(more than slots at once) <= eps: the requests in flight of an M/G/∞ system are Poisson at
// their mean (whatever the service times), so a replica with few slots must run well below them
// (18 slots: 10.3 at eps 0.01, 57 %) and one with many close to them (150 slots: 124, 83 %).
// 0 when slots < 1 or eps <= 0; slots when eps >= 1.
double poissonLoadWithin(double slots, double eps);

}  // namespace tessera::scale
