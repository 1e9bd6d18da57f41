#pragma once
// The random cases behind the placement invariant tests (invariants_test.cc): a random cluster
// driven by a random event stream, every step checked (invariant_cases_test.cc has the case and
// its checks). Test-only.

#include <cstdint>
#include <optional>
#include <string>

#include "sched/testing/random_cluster.h"

namespace tessera::sched::invariants {

// What the cases reached. Printed, and each test requires its focus to be reached, so that a
// generator change that stops exercising a path fails instead of passing vacuously.
struct Coverage {
  int placed = 0, placedMig = 0, placedMultiGpu = 0, placedExclusive = 0, unplaceable = 0;
  int handAccepted = 0, handRefused = 0, refusedEvents = 0;
  int lapsedAtTtl = 0, settledEarly = 0, usageGrew = 0;
  int evictionsWithVictims = 0, evictionsMultiVictim = 0, evictionsImpossible = 0;
  int batchAssigned = 0, batchUnplaceable = 0;

  std::string summary() const {
    return "placed " + std::to_string(placed) + " (MIG " + std::to_string(placedMig) +
           ", multi-GPU " + std::to_string(placedMultiGpu) + ", exclusive " +
           std::to_string(placedExclusive) + "), unplaceable " + std::to_string(unplaceable) +
           ", hand placements " + std::to_string(handAccepted) + "/" +
           std::to_string(handAccepted + handRefused) + " accepted, refused events " +
           std::to_string(refusedEvents) + ", lapsed at TTL " + std::to_string(lapsedAtTtl) +
           ", settled early " + std::to_string(settledEarly) + ", usage outgrew books " +
           std::to_string(usageGrew) + ", evictions " + std::to_string(evictionsWithVictims) +
           " (of several replicas " + std::to_string(evictionsMultiVictim) + ", impossible " +
           std::to_string(evictionsImpossible) + "), batch " + std::to_string(batchAssigned) +
           " placed / " + std::to_string(batchUnplaceable) + " unplaceable";
  }
};

// Relative weights of the kinds of step.
struct Mix {
  int place = 30, handPlace = 10, loaded = 8, unloaded = 6, activity = 3, telemetry = 14,
      clock = 10, nodeUpdate = 4, nodeRemove = 2, nodeAdd = 2, eviction = 4, batch = 2;
};

// Runs random cases of `steps` steps each and stops at the first case with a problem.
// Returns what they covered, or nullopt when fewer cases than `defaultCases` ran (then
// coverage is not required).
// With `pinned`, runs the one case of that seed (a case a failure once printed) instead.
std::optional<Coverage> runCases(const char* test, const testkit::ClusterShape& cluster,
                                 const testkit::RequestShape& requests, const Mix& mix,
                                 int defaultCases, int steps,
                                 std::optional<std::uint64_t> pinned = std::nullopt);

}  // namespace tessera::sched::invariants
