#include "sched/mig_choice.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <string_view>
#include <tuple>

#include "model/mig.h"

namespace tessera::sched {
namespace {

// Catalogue types have well under this many MIG profiles; profiles past it are ignored
// rather than paying for a dynamic allocation on the hot path.
constexpr std::size_t kMaxProfiles = 32;

// A MIG card's layout as the rules see it: which memory slices belong to an instance and
// how many instances of each profile exist. Small and copyable, to try placements on.
struct Layout {
  std::uint32_t used = 0;
  std::array<std::uint8_t, kMaxProfiles> counts{};
};

std::size_t profileCount(const model::GpuType& type) {
  return std::min(type.migProfiles.size(), kMaxProfiles);
}

Layout layoutOf(const model::GpuType& type, const GpuRecord& gpu) {
  Layout l;
  l.used = gpu.migSlotsUsed;
  for (const MigInstance& m : gpu.migInstances) {
    if (m.profile >= 0 && static_cast<std::size_t>(m.profile) < profileCount(type)) {
      ++l.counts[static_cast<std::size_t>(m.profile)];
    }
  }
  return l;
}

// Starts (bit s = slice s) where an instance of profile `p` can be created in layout `l`.
// Geometry (allowed start, slices free) is model::freeMigStarts' rule; the per-profile
// instance limit needs the counts kept here.
std::uint32_t creatableStarts(const model::GpuType& type, const Layout& l, std::size_t p) {
  const model::MigProfile& prof = type.migProfiles[p];
  if (prof.maxInstances > 0 && l.counts[p] >= prof.maxInstances) return 0;
  return model::freeMigStarts(type, static_cast<int>(p), l.used);
}

Layout withInstance(const model::GpuType& type, Layout l, std::size_t p, int start) {
  l.used |= model::migSliceMask(type.migProfiles[p], start);
  ++l.counts[p];
  return l;
}

// Room a layout leaves for future instances: the largest creatable profile memory and the
// number of creatable (profile, start) pairs.
std::pair<std::int64_t, int> roomLeft(const model::GpuType& type, const Layout& l) {
  std::int64_t largest = 0;
  int pairs = 0;
  for (std::size_t p = 0; p < profileCount(type); ++p) {
    const std::uint32_t starts = creatableStarts(type, l, p);
    if (starts == 0) continue;
    largest = std::max(largest, type.migProfiles[p].memoryMib);
    pairs += std::popcount(starts);
  }
  return {largest, pairs};
}

// "<g>g.<m>gb..." -> {g, m}; nullopt when the name has another shape.
std::optional<std::pair<int, int>> parseProfileName(std::string_view name) {
  int g = 0;
  int m = 0;
  const char* p = name.data();
  const char* end = name.data() + name.size();
  auto r = std::from_chars(p, end, g);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != 'g') return std::nullopt;
  p = r.ptr + 1;
  if (p == end || *p != '.') return std::nullopt;
  r = std::from_chars(p + 1, end, m);
  if (r.ec != std::errc() || end - r.ptr < 2 || r.ptr[0] != 'g' || r.ptr[1] != 'b') {
    return std::nullopt;
  }
  return std::pair{g, m};
}

// The model's migProfile floor, resolved once against the GPU's type.
struct Floor {
  bool any = true;
  const model::MigProfile* named = nullptr;   // the floor is a profile of this type
  std::optional<std::pair<int, int>> parsed;  // else its "<g>g.<m>gb" figures

  Floor(const model::GpuType& type, const std::string& name) {
    if (name.empty()) return;
    any = false;
    named = type.findMigProfile(name);
    if (named == nullptr) parsed = parseProfileName(name);
  }
  bool admits(const model::MigProfile& p) const {
    if (any) return true;
    if (named != nullptr) {
      return p.memoryMib >= named->memoryMib && p.computeSlices >= named->computeSlices;
    }
    if (!parsed) return false;
    const auto mine = parseProfileName(p.name);
    return mine && mine->first >= parsed->first && mine->second >= parsed->second;
  }
};

const model::GpuType* migType(const ClusterState& state, const GpuRecord& gpu) {
  if (!gpu.spec.migEnabled || gpu.typeIndex < 0 || gpu.typeIndex >= state.catalog().size()) {
    return nullptr;
  }
  const model::GpuType& type = state.catalog().at(gpu.typeIndex);
  return type.migCapable() ? &type : nullptr;
}

// Orders candidate profiles: least memory, then fewest memory slices, then fewest compute
// slices, so the choice wastes as little of the card as possible; a plain profile before its
// media-extended twin, which would take the card's only media engine.
auto profileKey(const model::MigProfile& p) {
  return std::tuple(p.memoryMib, p.slotCount, p.computeSlices, model::isMediaExtended(p));
}

// NVIDIA cards have one media engine set: at most one "+me" instance per card.
bool mediaEngineTaken(const model::GpuType& type, const GpuRecord& gpu) {
  return std::any_of(gpu.migInstances.begin(), gpu.migInstances.end(), [&](const MigInstance& m) {
    return m.profile >= 0 && static_cast<std::size_t>(m.profile) < type.migProfiles.size() &&
           model::isMediaExtended(type.migProfiles[static_cast<std::size_t>(m.profile)]);
  });
}

}  // namespace

bool migProfileAtLeast(const model::GpuType& type, int profile, const std::string& floor) {
  if (profile < 0 || static_cast<std::size_t>(profile) >= type.migProfiles.size()) return false;
  return Floor(type, floor).admits(type.migProfiles[static_cast<std::size_t>(profile)]);
}

std::optional<MigChoice> chooseMigSlice(const ClusterState& state, GpuId gpuId,
                                        const model::PlacementRequest& request,
                                        const Needs& needs) {
  const GpuRecord& gpu = state.gpu(gpuId);
  const model::GpuType* typePtr = migType(state, gpu);
  if (typePtr == nullptr) return std::nullopt;
  const model::GpuType& type = *typePtr;
  const Floor floor(type, request.model.migProfile);
  auto acceptable = [&](std::size_t p) {
    const model::MigProfile& prof = type.migProfiles[p];
    return prof.memoryMib >= needs.memoryMib && floor.admits(prof);
  };

  // 1. Reuse a free instance.
  const MigInstance* bestFree = nullptr;
  for (const MigInstance& m : gpu.migInstances) {
    if (m.occupant >= 0 || m.profile < 0) continue;
    const auto p = static_cast<std::size_t>(m.profile);
    if (p >= profileCount(type) || !acceptable(p)) continue;
    if (bestFree == nullptr ||
        std::tuple_cat(profileKey(type.migProfiles[p]), std::tuple(m.start)) <
            std::tuple_cat(
                profileKey(type.migProfiles[static_cast<std::size_t>(bestFree->profile)]),
                std::tuple(bestFree->start))) {
      bestFree = &m;
    }
  }
  // 2. Or create one: the smallest acceptable profile that has a legal start now...
  const Layout layout = layoutOf(type, gpu);
  const bool mediaTaken = mediaEngineTaken(type, gpu);
  std::optional<std::size_t> profile;
  const bool mayCreate = state.options().migCreation;
  for (std::size_t p = 0; mayCreate && p < profileCount(type); ++p) {
    if (!acceptable(p)) continue;
    if (mediaTaken && model::isMediaExtended(type.migProfiles[p])) continue;
    if (profile && !(profileKey(type.migProfiles[p]) < profileKey(type.migProfiles[*profile]))) {
      continue;
    }
    if (creatableStarts(type, layout, p) != 0) profile = p;
  }
  // A free instance wins unless a smaller one could be made: reuse saves a reconfiguration,
  // but parking a small model on a big slice wastes the slice.
  if (bestFree != nullptr &&
      (!profile || !(profileKey(type.migProfiles[*profile]) <
                     profileKey(type.migProfiles[static_cast<std::size_t>(bestFree->profile)])))) {
    return MigChoice{bestFree->profile, bestFree->start, false};
  }
  if (!profile) return std::nullopt;

  // ...at the start that leaves the most room for large profiles, lowest start on ties.
  int bestStart = -1;
  std::pair<std::int64_t, int> bestRoom{-1, -1};
  const std::uint32_t starts = creatableStarts(type, layout, *profile);
  for (int start = 0; start < model::kMaxMigMemorySlots;
       ++start) {  // ascending: ties keep the lowest
    if (((starts >> start) & 1U) == 0) continue;
    const auto room = roomLeft(type, withInstance(type, layout, *profile, start));
    if (room > bestRoom) {
      bestRoom = room;
      bestStart = start;
    }
  }
  return MigChoice{static_cast<std::int16_t>(*profile), static_cast<std::int8_t>(bestStart), true};
}

std::int64_t migPlaceableAfterMib(const ClusterState& state, GpuId gpuId, const MigChoice& choice) {
  const GpuRecord& gpu = state.gpu(gpuId);
  const model::GpuType* typePtr = migType(state, gpu);
  if (typePtr == nullptr) return 0;
  const model::GpuType& type = *typePtr;
  Layout layout = layoutOf(type, gpu);
  const auto chosen = static_cast<std::size_t>(choice.profileIndex);
  const bool valid = choice.profileIndex >= 0 && chosen < profileCount(type);
  if (valid && choice.creates) layout = withInstance(type, layout, chosen, choice.start);
  std::int64_t best = 0;
  bool skippedTaken = false;  // the reused instance is no longer free
  for (const MigInstance& m : gpu.migInstances) {
    if (m.occupant >= 0 || m.profile < 0) continue;
    const auto p = static_cast<std::size_t>(m.profile);
    if (p >= profileCount(type)) continue;
    if (valid && !choice.creates && !skippedTaken && m.profile == choice.profileIndex &&
        m.start == choice.start) {
      skippedTaken = true;
      continue;
    }
    best = std::max(best, type.migProfiles[p].memoryMib);
  }
  if (!state.options().migCreation) return best;  // only free instances are placeable
  return std::max(best, roomLeft(type, layout).first);
}

MigAvailability migAvailability(const ClusterState& state, GpuId gpuId) {
  const GpuRecord& gpu = state.gpu(gpuId);
  MigAvailability a;
  const model::GpuType* typePtr = migType(state, gpu);
  if (typePtr == nullptr) return a;
  const model::GpuType& type = *typePtr;
  for (const MigInstance& m : gpu.migInstances) {
    if (m.occupant >= 0 || m.profile < 0) continue;
    const auto p = static_cast<std::size_t>(m.profile);
    if (p < profileCount(type))
      a.largestFreeMib = std::max(a.largestFreeMib, type.migProfiles[p].memoryMib);
  }
  if (state.options().migCreation)
    a.largestCreatableMib = roomLeft(type, layoutOf(type, gpu)).first;
  return a;
}

}  // namespace tessera::sched
