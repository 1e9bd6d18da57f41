#include "scale/victims.h"

#include <algorithm>
#include <tuple>

namespace tessera::scale {

std::vector<std::string> chooseVictims(const std::vector<ReplicaSignals>& replicas, int count) {
  std::vector<const ReplicaSignals*> candidates;
  for (const ReplicaSignals& r : replicas) {
    if (r.phase != ReplicaPhase::kDraining) candidates.push_back(&r);
  }
  auto load = [](const ReplicaSignals& r) { return r.running.value_or(0) + r.waiting.value_or(0); };
  std::sort(candidates.begin(), candidates.end(),
            [&](const ReplicaSignals* a, const ReplicaSignals* b) {
              return std::make_tuple(a->priority, load(*a), -a->createdMs, std::cref(a->id)) <
                     std::make_tuple(b->priority, load(*b), -b->createdMs, std::cref(b->id));
            });
  std::vector<std::string> victims;
  for (int i = 0; i < count && i < static_cast<int>(candidates.size()); ++i) {
    victims.push_back(candidates[i]->id);
  }
  return victims;
}

}  // namespace tessera::scale
