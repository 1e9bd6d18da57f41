// ClusterState::checkInvariants: every bookkeeping invariant recomputed from scratch (kept apart
// from cluster_state.cc, which keeps them incrementally).

#include <algorithm>
#include <string>
#include <vector>

#include "model/mig.h"
#include "sched/cluster_state.h"
#include "sched/cluster_state_internal.h"

namespace tessera::sched {
namespace {

using internal::gpuName;
using internal::slotMask;

// Whether `free` lists every removed record of `table` once, and nothing else.
template <typename Record, typename Id>
bool freeSlotsMatch(const std::vector<Record>& table, std::vector<Id> free) {
  std::size_t removed = 0;
  for (const Record& r : table) removed += r.removed ? 1 : 0;
  std::sort(free.begin(), free.end());
  const bool unique = std::adjacent_find(free.begin(), free.end()) == free.end();
  const bool allRemoved = std::all_of(free.begin(), free.end(), [&](Id id) {
    return id >= 0 && static_cast<std::size_t>(id) < table.size() &&
           table[static_cast<std::size_t>(id)].removed;
  });
  return unique && allRemoved && free.size() == removed;
}

}  // namespace

// ---- invariants ---------------------------------------------------------------------------

Result<void> ClusterState::checkInvariants() const {
  std::vector<std::int64_t> charged(gpus_.size(), 0);
  std::vector<std::int64_t> compute(gpus_.size(), 0);
  std::vector<double> bandwidth(gpus_.size(), 0);
  std::vector<std::int64_t> cpu(nodes_.size(), 0), hostMem(nodes_.size(), 0);
  int active = 0;
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    const ReplicaRecord& rec = replicas_[r];
    if (rec.removed) continue;
    if (rec.reservationActive) {
      ++active;
      if (!expiries_.contains({rec.placedAtMs + options_.reservationTtlMs, static_cast<ReplicaId>(r)})) {
        return fail(Error::internal("replica " + rec.placement.replicaId + ": active reservation without expiry"));
      }
    }
    cpu[static_cast<std::size_t>(rec.placement.node)] += rec.placement.cpuMilli;
    hostMem[static_cast<std::size_t>(rec.placement.node)] += rec.placement.hostMemoryMib;
    for (std::size_t s = 0; s < rec.placement.gpus.size(); ++s) {
      const auto g = static_cast<std::size_t>(rec.placement.gpus[s].gpu);
      charged[g] += rec.chargeMib[s];
      compute[g] += rec.placement.gpus[s].computeMilli;
      bandwidth[g] += rec.placement.gpus[s].bandwidthGBps;
    }
  }
  if (active != activeReservations_ || static_cast<std::size_t>(active) != expiries_.size()) {
    return fail(Error::internal("reservation counters disagree with the replicas"));
  }
  // The free slots are exactly the removed records', each once.
  if (!freeSlotsMatch(replicas_, freeReplicaSlots_)) {
    return fail(Error::internal("the free replica slots disagree with the removed replicas"));
  }
  if (!freeSlotsMatch(nodes_, freeNodeSlots_)) {
    return fail(Error::internal("the free node slots disagree with the removed nodes"));
  }
  for (std::size_t g = 0; g < gpus_.size(); ++g) {
    const GpuRecord& rec = gpus_[g];
    const std::string name = gpuName(nodes_[static_cast<std::size_t>(rec.node)], rec);
    if (charged[g] != rec.chargedMib) return fail(Error::internal(name + ": charged memory drifted"));
    if (compute[g] != rec.bookedComputeMilli) return fail(Error::internal(name + ": compute drifted"));
    if (compute[g] > rec.spec.computeMilli) return fail(Error::internal(name + ": compute over-committed"));
    if (rec.spec.memoryBandwidthGBps > 0 && bandwidth[g] > rec.spec.memoryBandwidthGBps + 1e-6) {
      return fail(Error::internal(name + ": bandwidth over-committed"));
    }
    // Memory is not checked against capacity here: every placement is admitted only into free
    // memory (checkPlacement), but observed usage may later outgrow an estimate, which
    // the books show as negative free memory rather than as a broken invariant.
    if (rec.exclusive && rec.replicas.size() != 1) {
      return fail(Error::internal(name + ": exclusive GPU does not hold exactly one replica"));
    }
    if (rec.spec.timeSlicingReplicas > 0 &&
        static_cast<int>(rec.replicas.size()) > rec.spec.timeSlicingReplicas) {
      return fail(Error::internal(name + ": time-slicing limit exceeded"));
    }
    if (rec.spec.migEnabled) {
      const model::GpuType& type = catalog_->at(rec.typeIndex);
      std::uint32_t used = 0;
      std::int64_t sliceMemory = 0;
      std::vector<int> counts(type.migProfiles.size(), 0);
      for (const MigInstance& m : rec.migInstances) {
        const model::MigProfile& p = type.migProfiles[static_cast<std::size_t>(m.profile)];
        if (std::find(p.allowedStarts.begin(), p.allowedStarts.end(), m.start) == p.allowedStarts.end() ||
            m.start + p.slotCount > type.migMemorySlots) {
          return fail(Error::internal(name + ": MIG instance at an illegal start"));
        }
        const std::uint32_t mask = slotMask(m.start, p.slotCount);
        if (used & mask) return fail(Error::internal(name + ": MIG instances overlap"));
        used |= mask;
        if (++counts[static_cast<std::size_t>(m.profile)] > p.maxInstances && p.maxInstances > 0) {
          return fail(Error::internal(name + ": too many MIG instances of " + p.name));
        }
        sliceMemory += p.memoryMib;
      }
      if (used != rec.migSlotsUsed) return fail(Error::internal(name + ": MIG slot mask drifted"));
    }
    const bool live = !nodes_[static_cast<std::size_t>(rec.node)].removed;
    const std::int64_t want = (live && rec.healthy()) ? placeableMemoryMib(static_cast<GpuId>(g)) : -1;
    if (want != indexedKey_[g]) return fail(Error::internal(name + ": capacity index is stale"));
  }
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].removed) continue;
    std::int64_t maxKey = -1;
    std::int32_t maxCompute = -1;
    for (GpuId g : nodes_[n].gpuIds) {
      const auto gi = static_cast<std::size_t>(g);
      if (indexedKey_[gi] < 0) continue;
      maxKey = std::max(maxKey, indexedKey_[gi]);
      maxCompute = std::max(maxCompute, gpus_[gi].spec.migEnabled ? gpus_[gi].spec.computeMilli
                                                                   : gpus_[gi].freeComputeMilli());
    }
    if (maxKey != nodeMaxKey_[n] || maxCompute != nodeMaxCompute_[n]) {
      return fail(Error::internal("node " + nodes_[n].spec.name + ": capacity summary is stale"));
    }
    if (cpu[n] != nodes_[n].bookedCpuMilli || cpu[n] > nodes_[n].spec.cpuMilli) {
      return fail(Error::internal("node " + nodes_[n].spec.name + ": CPU books wrong or over-committed"));
    }
    if (hostMem[n] != nodes_[n].bookedHostMemoryMib || hostMem[n] > nodes_[n].spec.hostMemoryMib) {
      return fail(Error::internal("node " + nodes_[n].spec.name + ": host memory books wrong or over-committed"));
    }
  }
  return {};
}

}  // namespace tessera::sched
