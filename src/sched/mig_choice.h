#pragma once
// Which MIG slice a replica gets on a MIG-enabled GPU. Shared by the MigSlice filter (is
// there one?), the engine (which one, recorded in the option) and the fragmentation score
// (what is left afterwards), so that all three agree.
//
// The rule, in order:
//   1. An existing free instance whose profile is acceptable (memory >= the per-GPU need,
//      and at least the model's migProfile when it names one): the one with the least
//      memory, then fewest memory slices, fewest compute slices, lowest start. Reusing an
//      instance costs no reconfiguration and keeps bigger instances for bigger models --
//      but only when no smaller acceptable profile could be created instead (rule 2): a
//      small model never parks on a big free slice while a small one can be carved.
//   2. Otherwise (or when it is smaller than the best free instance) a new instance of the smallest acceptable profile that can be created now
//      (legal start under the card's placement rules, its memory slices unused, fewer than
//      maxInstances of it on the card, and no second media-extended "+me" instance). Among its
//      legal starts, the one that leaves the most room for large profiles: the largest profile
//      memory still creatable afterwards, then the most (profile, start) pairs still creatable,
//      then the lowest start. On an empty A100 this puts a 1g slice at the top of the card (slice
//      6) and keeps slices 0-3 for a 4g.20gb, which NVIDIA's placement rules only allow at the
//      bottom.
//
// "At least the model's migProfile": when the GPU's type has a profile of that name, a
// candidate needs at least its memory and compute slices; when it does not (the model names
// a profile of another card, e.g. "1g.10gb" on an A100 40GB), the "<g>g.<m>gb" figures in
// the names are compared instead.
//
// Compute is not checked here: a MIG instance owns its SMs, and the compute booked by
// request is checked by the ComputeCap filter like on any GPU.

#include <cstdint>
#include <optional>

#include "model/workload.h"
#include "sched/cluster_state.h"
#include "sched/types.h"

namespace tessera::sched {

struct MigChoice {
  std::int16_t profileIndex = -1;  // into the GPU type's migProfiles
  std::int8_t start = -1;          // first memory slice of the instance
  bool creates = false;            // no free instance fits: a new one must be created
};

// nullopt when the GPU is not MIG-enabled, its type has no MIG geometry, or no free or
// creatable instance is acceptable. Allocation-free.
std::optional<MigChoice> chooseMigSlice(const ClusterState& state, GpuId gpu,
                                        const model::PlacementRequest& request, const Needs& needs);

// The largest memory a new placement could get on the MIG GPU after `choice` is taken:
// ClusterState::placeableMemoryMib as it would read after the placement.
std::int64_t migPlaceableAfterMib(const ClusterState& state, GpuId gpu, const MigChoice& choice);

// What a MIG GPU offers right now, for explanations: the largest free instance and the
// largest creatable one (0 when none).
struct MigAvailability {
  std::int64_t largestFreeMib = 0;
  std::int64_t largestCreatableMib = 0;
};
MigAvailability migAvailability(const ClusterState& state, GpuId gpu);

// Whether `profile` of the GPU's type satisfies the model's migProfile floor ("" = any).
bool migProfileAtLeast(const model::GpuType& type, int profile, const std::string& floor);

}  // namespace tessera::sched
