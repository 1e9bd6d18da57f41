#include "model/mig.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "model/internal/names.h"

namespace tessera::model {
namespace {

const MigProfile* profileAt(const GpuType& type, int index) {
  if (index < 0 || static_cast<std::size_t>(index) >= type.migProfiles.size()) return nullptr;
  return &type.migProfiles[static_cast<std::size_t>(index)];
}

bool startAllowed(const MigProfile& profile, int start) {
  return std::find(profile.allowedStarts.begin(), profile.allowedStarts.end(), start) !=
         profile.allowedStarts.end();
}

std::string describe(const GpuType& type, std::size_t i, const MigPlacement& p) {
  const MigProfile* profile = profileAt(type, p.profile);
  const std::string name = profile ? profile->name : "profile #" + std::to_string(p.profile);
  return "GPU type \"" + type.name + "\": MIG instance " + std::to_string(i) + " (" + name + "@" +
         std::to_string(p.start) + ")";
}

}  // namespace

MigSliceMask migSliceMask(const MigProfile& profile, int start) {
  if (start < 0 || profile.slotCount <= 0 || start + profile.slotCount > kMaxMigMemorySlots) {
    return 0;
  }
  // Built in 64 bits so that a full 32-slice instance does not shift by the word width.
  const std::uint64_t run = (std::uint64_t{1} << profile.slotCount) - 1;
  return static_cast<MigSliceMask>(run << start);
}

MigSliceMask migSliceMask(const GpuType& type, std::span<const MigPlacement> layout) {
  MigSliceMask used = 0;
  for (const MigPlacement& p : layout) {
    if (const MigProfile* profile = profileAt(type, p.profile)) {
      used |= migSliceMask(*profile, p.start);
    }
  }
  return used;
}

std::uint32_t freeMigStarts(const GpuType& type, int profileIndex, MigSliceMask used) {
  const MigProfile* profile = profileAt(type, profileIndex);
  if (profile == nullptr) return 0;
  std::uint32_t starts = 0;
  for (int start : profile->allowedStarts) {
    if (start + profile->slotCount > type.migMemorySlots) continue;
    const MigSliceMask need = migSliceMask(*profile, start);
    if (need != 0 && (need & used) == 0) starts |= std::uint32_t{1} << start;
  }
  return starts;
}

std::vector<MigPlacement> freeMigPlacements(const GpuType& type, int profileIndex,
                                            MigSliceMask used) {
  std::vector<MigPlacement> out;
  const std::uint32_t starts = freeMigStarts(type, profileIndex, used);
  for (int s = 0; s < kMaxMigMemorySlots; ++s) {
    if ((starts >> s) & 1U) out.push_back({profileIndex, s});
  }
  return out;
}

std::vector<MigPlacement> legalMigPlacements(const GpuType& type, int profileIndex,
                                             std::span<const MigPlacement> layout) {
  const MigProfile* profile = profileAt(type, profileIndex);
  if (profile == nullptr || !checkMigLayout(type, layout)) return {};
  int sameProfile = 0;
  bool mediaTaken = false;
  for (const MigPlacement& p : layout) {
    if (p.profile == profileIndex) ++sameProfile;
    if (isMediaExtended(*profileAt(type, p.profile))) mediaTaken = true;
  }
  if (sameProfile >= profile->maxInstances) return {};
  if (mediaTaken && isMediaExtended(*profile)) return {};
  return freeMigPlacements(type, profileIndex, migSliceMask(type, layout));
}

Result<void> checkMigLayout(const GpuType& type, std::span<const MigPlacement> layout) {
  if (layout.empty()) return {};
  if (!type.migCapable()) {
    return fail(Error::invalid("GPU type \"" + type.name + "\" has no MIG profiles, but " +
                               std::to_string(layout.size()) + " MIG instances were given"));
  }
  std::vector<int> counts(type.migProfiles.size(), 0);
  MigSliceMask used = 0;
  int mediaInstances = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const MigPlacement& p = layout[i];
    const MigProfile* profile = profileAt(type, p.profile);
    if (profile == nullptr) {
      return fail(Error::invalid(describe(type, i, p) + ": the type has no profile with index " +
                                 std::to_string(p.profile)));
    }
    if (!startAllowed(*profile, p.start) || p.start + profile->slotCount > type.migMemorySlots) {
      return fail(Error::invalid(describe(type, i, p) + ": start slice " + std::to_string(p.start) +
                                 " is not an allowed start of " + profile->name));
    }
    const MigSliceMask need = migSliceMask(*profile, p.start);
    if ((need & used) != 0) {
      return fail(Error::invalid(describe(type, i, p) +
                                 ": overlaps the memory slices of an earlier instance"));
    }
    used |= need;
    if (++counts[static_cast<std::size_t>(p.profile)] > profile->maxInstances) {
      return fail(Error::invalid(describe(type, i, p) + ": more than maxInstances (" +
                                 std::to_string(profile->maxInstances) + ") of " + profile->name));
    }
    if (isMediaExtended(*profile) && ++mediaInstances > 1) {
      return fail(Error::invalid(describe(type, i, p) +
                                 ": a second media-extension (+me) instance; the card has one"));
    }
  }
  return {};
}

int migProfileIndex(const GpuType& type, std::string_view name) {
  for (std::size_t i = 0; i < type.migProfiles.size(); ++i) {
    if (internal::equalsIgnoreCase(type.migProfiles[i].name, name)) return static_cast<int>(i);
  }
  return -1;
}

Result<std::vector<MigPlacement>> resolveMigInstances(const GpuType& type,
                                                      std::span<const MigInstanceSpec> instances) {
  std::vector<MigPlacement> layout;
  layout.reserve(instances.size());
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const int index = migProfileIndex(type, instances[i].profile);
    if (index < 0) {
      std::string known;
      for (const MigProfile& p : type.migProfiles) known += (known.empty() ? "" : ", ") + p.name;
      return fail(Error::invalid("GPU type \"" + type.name + "\": migInstances[" +
                                 std::to_string(i) + "].profile: unknown MIG profile \"" +
                                 instances[i].profile +
                                 "\" (known: " + (known.empty() ? "none" : known) + ")"));
    }
    layout.push_back({index, instances[i].startSlot});
  }
  TESSERA_RETURN_IF_ERROR(checkMigLayout(type, layout));
  return layout;
}

int migComputeSlices(const GpuType& type) {
  int slices = 0;
  for (const MigProfile& p : type.migProfiles) slices = std::max(slices, p.computeSlices);
  return slices;
}

bool isMediaExtended(const MigProfile& profile) {
  constexpr std::string_view kSuffix = "+me";
  const std::string_view name = profile.name;
  return name.size() >= kSuffix.size() &&
         internal::equalsIgnoreCase(name.substr(name.size() - kSuffix.size()), kSuffix);
}

}  // namespace tessera::model
