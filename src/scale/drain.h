#pragma once
// The way out of a replica chosen for scale-down, driven by time and its in-flight count:
//
//   kDraining  routers stop sending it requests; fixed drainMs (default 10 s) so that every
//              router has seen the change (in-flight requests keep running)
//   kFlushing  finishing in-flight requests; ends when in-flight reaches 0 or after
//              maxFlushMs (default 60 s), when the rest are cut
//   kFreeing   the engine exits and its GPU memory is released; freeMs (default 1 s)
//   kGone      nothing left; the GPU share is free for placement
//
// A retiring replica is never serving capacity, in any phase; it holds its GPU memory until
// kGone. Phases only move forward; one advance() may cross several.
//
//   ReplicaLifecycle life("r7", nowMs);            // on Decision::victims
//   life.advance(nowMs, inFlight);                 // on every event or tick
//   if (life.nextDeadlineMs()) schedule(*life.nextDeadlineMs());
//
// Threading: a plain value; one owner.

#include <optional>
#include <string>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::scale {

enum class DrainPhase { kDraining, kFlushing, kFreeing, kGone };

const char* drainPhaseName(DrainPhase phase);

struct DrainPlan {
  Millis drainMs = 10'000;
  Millis maxFlushMs = 60'000;
  Millis freeMs = 1'000;
};

// Errors name the field: every duration >= 0.
Result<void> validateDrainPlan(const DrainPlan& plan);

class ReplicaLifecycle {
 public:
  ReplicaLifecycle(std::string replicaId, Millis startMs, DrainPlan plan = {});

  // Moves through every phase whose end has passed by nowMs; `inFlight` is the replica's
  // running + queued requests at nowMs. Calls with an earlier nowMs than the last are ignored.
  DrainPhase advance(Millis nowMs, int inFlight);

  const std::string& replicaId() const { return replicaId_; }
  DrainPhase phase() const { return phase_; }
  bool acceptsRequests() const { return false; }
  bool countsAsCapacity() const { return false; }
  bool holdsGpuMemory() const { return phase_ != DrainPhase::kGone; }

  // When the current phase ends at the latest (kFlushing: its timeout); nullopt once gone.
  std::optional<Millis> nextDeadlineMs() const;

  Millis startMs() const { return startMs_; }
  std::optional<Millis> flushStartMs() const { return flushStartMs_; }
  std::optional<Millis> freeStartMs() const { return freeStartMs_; }
  std::optional<Millis> goneMs() const { return goneMs_; }
  // Requests still in flight when the flush timed out (they were cut); 0 if it finished.
  int cutRequests() const { return cutRequests_; }

 private:
  std::string replicaId_;
  Millis startMs_;
  DrainPlan plan_;
  DrainPhase phase_ = DrainPhase::kDraining;
  Millis lastMs_;
  std::optional<Millis> flushStartMs_;
  std::optional<Millis> freeStartMs_;
  std::optional<Millis> goneMs_;
  int cutRequests_ = 0;
};

}  // namespace tessera::scale
