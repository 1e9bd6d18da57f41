#include "scale/drain.h"

namespace tessera::scale {

const char* drainPhaseName(DrainPhase phase) {
  switch (phase) {
    case DrainPhase::kDraining:
      return "draining";
    case DrainPhase::kFlushing:
      return "flushing";
    case DrainPhase::kFreeing:
      return "freeing";
    case DrainPhase::kGone:
      return "gone";
  }
  return "unknown";
}

Result<void> validateDrainPlan(const DrainPlan& plan) {
  if (plan.drainMs < 0) return fail(Error::invalid("drain plan drainMs must be >= 0"));
  if (plan.maxFlushMs < 0) return fail(Error::invalid("drain plan maxFlushMs must be >= 0"));
  if (plan.freeMs < 0) return fail(Error::invalid("drain plan freeMs must be >= 0"));
  return {};
}

ReplicaLifecycle::ReplicaLifecycle(std::string replicaId, Millis startMs, DrainPlan plan)
    : replicaId_(std::move(replicaId)), startMs_(startMs), plan_(plan), lastMs_(startMs) {}

DrainPhase ReplicaLifecycle::advance(Millis nowMs, int inFlight) {
  if (nowMs < lastMs_) return phase_;
  lastMs_ = nowMs;
  if (phase_ == DrainPhase::kDraining && nowMs >= startMs_ + plan_.drainMs) {
    phase_ = DrainPhase::kFlushing;
    flushStartMs_ = startMs_ + plan_.drainMs;
  }
  if (phase_ == DrainPhase::kFlushing) {
    const Millis deadline = *flushStartMs_ + plan_.maxFlushMs;
    // The in-flight count is known only at the times we are called: empty before the
    // deadline ends the flush now; seen at or after the deadline, it ended at the deadline
    // (cutting whatever was still in flight).
    if (inFlight <= 0 && nowMs < deadline) {
      phase_ = DrainPhase::kFreeing;
      freeStartMs_ = nowMs;
    } else if (nowMs >= deadline) {
      phase_ = DrainPhase::kFreeing;
      freeStartMs_ = deadline;
      cutRequests_ = inFlight > 0 ? inFlight : 0;
    }
  }
  if (phase_ == DrainPhase::kFreeing && nowMs >= *freeStartMs_ + plan_.freeMs) {
    phase_ = DrainPhase::kGone;
    goneMs_ = *freeStartMs_ + plan_.freeMs;
  }
  return phase_;
}

std::optional<Millis> ReplicaLifecycle::nextDeadlineMs() const {
  switch (phase_) {
    case DrainPhase::kDraining:
      return startMs_ + plan_.drainMs;
    case DrainPhase::kFlushing:
      return *flushStartMs_ + plan_.maxFlushMs;
    case DrainPhase::kFreeing:
      return *freeStartMs_ + plan_.freeMs;
    case DrainPhase::kGone:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace tessera::scale
