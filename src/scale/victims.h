#pragma once
// Which replicas leave on a scale-down: the lowest priority first, then the least loaded
// (running + waiting; a missing metric counts 0), then the newest (largest createdMs), then
// the smallest id so that the order is total. Draining replicas are never chosen (they are
// already leaving). Loading replicas carry no load and are the newest, so they go first among
// equal priorities: cancelling a load wastes the least.

#include <string>
#include <vector>

#include "scale/signals.h"

namespace tessera::scale {

// Up to `count` replica ids in the order they should start draining.
std::vector<std::string> chooseVictims(const std::vector<ReplicaSignals>& replicas, int count);

}  // namespace tessera::scale
