#include "config/model_yaml.h"

#include <limits>
#include <map>
#include <set>
#include <string>

#include "config/limits.h"
#include "sched/types.h"

namespace tessera::config {
namespace {

Result<model::SharingModes> parseSharing(const Field& field) {
  std::vector<Field> items;
  if (field.isScalar() && !field.isNull()) {
    items.push_back(field);
  } else {
    if (!field.isSequence()) {
      return fail(field.error("must be a list of exclusive, shared, mig; got " + field.describe()));
    }
    for (std::size_t i = 0; i < field.size(); ++i) items.push_back(field.item(i));
  }
  if (items.empty()) return fail(field.error("must name at least one of exclusive, shared, mig"));
  model::SharingModes modes = 0;
  for (const Field& item : items) {
    auto text = readName(item);
    if (!text) return fail(std::move(text.error()));
    model::SharingMode mode{};
    if (*text == "exclusive") {
      mode = model::SharingMode::kExclusive;
    } else if (*text == "shared") {
      mode = model::SharingMode::kShared;
    } else if (*text == "mig") {
      mode = model::SharingMode::kMig;
    } else {
      return fail(
          item.error("unknown sharing mode \"" + *text + "\"; allowed: exclusive, shared, mig"));
    }
    if (model::allows(modes, mode)) return fail(item.error("\"" + *text + "\" listed twice"));
    modes = static_cast<model::SharingModes>(modes | static_cast<model::SharingModes>(mode));
  }
  return modes;
}

Result<void> readModelMemory(const Field& field, std::string_view mibKey,
                             std::string_view quantityKey, std::int64_t max, std::int64_t& out) {
  auto value = readMemory(field, {.mibKey = mibKey,
                                  .quantityKey = quantityKey,
                                  .minMib = 0,
                                  .maxMib = max,
                                  .capacity = false});
  if (!value) return fail(std::move(value.error()));
  if (*value) out = **value;
  return {};
}

}  // namespace

Result<model::ModelProfile> parseModelProfile(const Field& field) {
  TESSERA_RETURN_IF_ERROR(expectMap(
      field,
      {"name", "weightsMib", "weights", "kvCacheMib", "kvCache", "overheadMib", "overhead",
       "computeMilli", "memoryBandwidthGBps", "gpusPerReplica", "nvlinkRequired", "numaAligned",
       "priority", "sharing", "migProfile", "cpuMilli", "cpu", "hostMemoryMib", "hostMemory"}));
  model::ModelProfile profile;
  const Field name = field.child("name");
  TESSERA_RETURN_IF_ERROR(require(name));
  auto nameText = readObjectName(name, NameKind::kSubdomain);
  if (!nameText) return fail(std::move(nameText.error()));
  profile.name = std::move(*nameText);

  using limits::kMaxGpuMemoryMib;
  TESSERA_RETURN_IF_ERROR(
      readModelMemory(field, "weightsMib", "weights", kMaxGpuMemoryMib, profile.weightsMib));
  TESSERA_RETURN_IF_ERROR(
      readModelMemory(field, "kvCacheMib", "kvCache", kMaxGpuMemoryMib, profile.kvCacheMib));
  TESSERA_RETURN_IF_ERROR(
      readModelMemory(field, "overheadMib", "overhead", kMaxGpuMemoryMib, profile.overheadMib));
  TESSERA_RETURN_IF_ERROR(readModelMemory(field, "hostMemoryMib", "hostMemory",
                                          limits::kMaxHostMemoryMib, profile.hostMemoryMib));
  if (profile.weightsMib + profile.kvCacheMib + profile.overheadMib == 0) {
    return fail(
        field.error("needs GPU memory: weightsMib + kvCacheMib + overheadMib (or weights, kvCache, "
                    "overhead) must add up to more than 0"));
  }

  std::int64_t computeMilli = profile.computeMilli;
  TESSERA_RETURN_IF_ERROR(readOptional(field, "computeMilli", computeMilli, 0, 1000));
  profile.computeMilli = static_cast<std::int32_t>(computeMilli);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "memoryBandwidthGBps", profile.memoryBandwidthGBps, 0,
                                       limits::kMaxBandwidthGBps));
  TESSERA_RETURN_IF_ERROR(
      readOptional(field, "gpusPerReplica", profile.gpusPerReplica, 1, sched::kMaxGpusPerReplica));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "nvlinkRequired", profile.nvlinkRequired));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "numaAligned", profile.numaAligned));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "priority", profile.priority,
                                       std::numeric_limits<int>::min(),
                                       std::numeric_limits<int>::max()));
  if (const Field sharing = field.child("sharing"); !sharing.absent()) {
    auto modes = parseSharing(sharing);
    if (!modes) return fail(std::move(modes.error()));
    profile.sharing = *modes;
  }
  if (const Field mig = field.child("migProfile"); !mig.absent()) {
    auto text = readName(mig);
    if (!text) return fail(std::move(text.error()));
    if (!model::allows(profile.sharing, model::SharingMode::kMig)) {
      return fail(mig.error("set, but sharing does not include mig"));
    }
    profile.migProfile = std::move(*text);
  }
  auto cpu = readCpu(field, limits::kMaxCpuMilli);
  if (!cpu) return fail(std::move(cpu.error()));
  if (*cpu) profile.cpuMilli = **cpu;
  return profile;
}

Result<std::vector<model::ModelProfile>> parseModelList(const Field& field) {
  TESSERA_RETURN_IF_ERROR(expectSequence(field));
  std::vector<model::ModelProfile> models;
  std::map<std::string, std::string> placeByName;
  for (std::size_t i = 0; i < field.size(); ++i) {
    const Field item = field.item(i);
    auto profile = parseModelProfile(item);
    if (!profile) return fail(std::move(profile.error()));
    const auto [it, inserted] = placeByName.emplace(profile->name, item.child("name").locate());
    if (!inserted) {
      return fail(item.child("name").error("duplicate model \"" + profile->name +
                                           "\" (first declared " + it->second + ")"));
    }
    models.push_back(std::move(*profile));
  }
  return models;
}

Result<model::ModelProfile> resolveModel(
    const Field& field, const std::vector<const std::vector<model::ModelProfile>*>& scopes) {
  TESSERA_RETURN_IF_ERROR(require(field));
  if (field.isMap()) return parseModelProfile(field);
  if (!field.isScalar()) {
    return fail(field.error("must be a model name or a profile mapping, got " + field.describe()));
  }
  auto name = readName(field);
  if (!name) return fail(std::move(name.error()));
  for (const auto* scope : scopes) {
    for (const model::ModelProfile& profile : *scope) {
      if (profile.name == *name) return profile;
    }
  }
  std::set<std::string> known;
  for (const auto* scope : scopes) {
    for (const model::ModelProfile& profile : *scope) known.insert(profile.name);
  }
  std::string message = "unknown model \"" + *name + "\"";
  if (known.empty()) {
    message += "; no models are declared (add them under `models:` or write the profile inline)";
  } else {
    message += "; known models: " + joinNames(std::vector<std::string>(known.begin(), known.end()));
  }
  return fail(field.error(message));
}

}  // namespace tessera::config
