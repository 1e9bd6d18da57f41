#pragma once
// MIG geometry: which memory slices a GPU instance occupies, where a new instance may go, and
// whether a set of instances is a layout the driver accepts. Pure functions of a GpuType, so
// the scheduler, the simulator and the config loader all apply the same rules.
//
// A card in MIG mode has GpuType::migMemorySlots memory slices (8 on A100/H100/H200, 4 on A30).
// An instance of a profile occupies `slotCount` consecutive slices from one of the profile's
// `allowedStarts` (NVIDIA's placement table; `nvidia-smi mig -lgipp` prints it). Sets of slices
// are bit masks: bit i set = memory slice i is occupied.
//
// Rules a legal layout keeps:
//   - every instance names a profile of the type and starts at one of its allowed starts;
//   - no two instances share a memory slice;
//   - at most maxInstances instances of each profile;
//   - at most one media-extension ("+me") instance: on every MIG-capable card NVIDIA ships,
//     each +me profile takes the card's only OFA engine, so two cannot coexist.
// The placement table already keeps SM slices within the card's 7 (or 4 on A30): no
// memory-legal layout of the built-in types needs more.
//
// Threading: pure functions over immutable inputs; safe from any thread.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_type.h"
#include "model/inventory.h"

namespace tessera::model {

// Bit i = memory slice i. 32 bits bound migMemorySlots (validateGpuType enforces it).
using MigSliceMask = std::uint32_t;
inline constexpr int kMaxMigMemorySlots = 32;

// One instance on a card: a profile (index into GpuType::migProfiles) at a first memory slice.
struct MigPlacement {
  int profile = -1;
  int start = 0;

  friend bool operator==(const MigPlacement&, const MigPlacement&) = default;
};

// The slices an instance of `profile` starting at `start` occupies; 0 when the instance would
// not fit in a 32-slice mask (a start or slot count out of range).
MigSliceMask migSliceMask(const MigProfile& profile, int start);

// The union of the slices of `layout`'s instances; instances with an invalid profile index add
// nothing (checkMigLayout reports them).
MigSliceMask migSliceMask(const GpuType& type, std::span<const MigPlacement> layout);

// Allowed starts of profile `profileIndex` whose slices are all free in `used`, as a mask over
// starts (bit s set = the profile may start at slice s). Allocation-free for the scheduler's
// inner loop. Ignores maxInstances and the one-+me rule, which need the instance list: use
// legalMigPlacements when those matter. 0 for an invalid profile index.
std::uint32_t freeMigStarts(const GpuType& type, int profileIndex, MigSliceMask used);

// freeMigStarts as a list of placements, in increasing start order.
std::vector<MigPlacement> freeMigPlacements(const GpuType& type, int profileIndex,
                                            MigSliceMask used);

// Placements of profile `profileIndex` that `layout` can add and stay legal under every rule
// above. Empty when the profile is already at maxInstances, or `layout` itself is illegal.
std::vector<MigPlacement> legalMigPlacements(const GpuType& type, int profileIndex,
                                             std::span<const MigPlacement> layout);

// Checks a whole layout; the error names the type, the instance and the rule it breaks.
Result<void> checkMigLayout(const GpuType& type, std::span<const MigPlacement> layout);

// Index of the profile named `name` (case-insensitive) in type.migProfiles; -1 when none.
int migProfileIndex(const GpuType& type, std::string_view name);

// Turns instances as a cluster file or node agent declares them (profile names, start slices)
// into placements, and checks that they form a legal layout.
Result<std::vector<MigPlacement>> resolveMigInstances(const GpuType& type,
                                                      std::span<const MigInstanceSpec> instances);

// The card's SM slices in MIG mode: the largest computeSlices among its profiles (7 on
// A100/H100/H200, 4 on A30); 0 for a type without MIG. For showing "3g" as 3/7 of the SMs.
int migComputeSlices(const GpuType& type);

// Whether a profile carries media extensions (NVIDIA names them with a "+me" suffix).
bool isMediaExtended(const MigProfile& profile);

}  // namespace tessera::model
