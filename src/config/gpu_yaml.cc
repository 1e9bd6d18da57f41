#include "config/gpu_yaml.h"

#include <algorithm>
#include <map>
#include <string>

#include "config/limits.h"
#include "model/mig.h"

namespace tessera::config {
namespace {

// Figures that are unknown are left out rather than written as 0, so 0 is a slip.
Result<double> readPositiveNumber(const Field& field, double max) {
  auto value = readNumber(field, 0, max);
  if (value && *value == 0) return fail(field.error("must be > 0, got " + field.describe()));
  return value;
}

Result<std::vector<int>> readIntList(const Field& field, std::int64_t min, std::int64_t max) {
  TESSERA_RETURN_IF_ERROR(expectSequence(field));
  std::vector<int> out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    auto value = readInt(field.item(i), min, max);
    if (!value) return fail(std::move(value.error()));
    out.push_back(static_cast<int>(*value));
  }
  return out;
}

Result<model::MigProfile> parseMigProfile(const Field& field, int memorySlots) {
  TESSERA_RETURN_IF_ERROR(expectMap(field, {"name", "computeSlices", "memoryMib", "memory",
                                            "slotCount", "allowedStarts", "maxInstances"}));
  model::MigProfile profile;
  for (const char* key : {"name", "computeSlices", "slotCount", "allowedStarts"}) {
    TESSERA_RETURN_IF_ERROR(require(field.child(key)));
  }
  auto name = readName(field.child("name"));
  if (!name) return fail(std::move(name.error()));
  profile.name = std::move(*name);
  TESSERA_RETURN_IF_ERROR(
      readOptional(field, "computeSlices", profile.computeSlices, 1, model::kMaxMigMemorySlots));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "slotCount", profile.slotCount, 1, memorySlots));
  auto memory = readMemory(field, {.mibKey = "memoryMib",
                                   .quantityKey = "memory",
                                   .minMib = 1,
                                   .maxMib = limits::kMaxGpuMemoryMib,
                                   .capacity = true});
  if (!memory) return fail(std::move(memory.error()));
  if (!*memory) return fail(field.child("memoryMib").error("required (or memory)"));
  profile.memoryMib = **memory;
  const Field starts = field.child("allowedStarts");
  auto startList = readIntList(starts, 0, memorySlots - profile.slotCount);
  if (!startList) return fail(std::move(startList.error()));
  if (startList->empty()) return fail(starts.error("must list at least one start slot"));
  profile.allowedStarts = std::move(*startList);
  // Each allowed start is one place an instance can sit, so that is the natural maximum.
  profile.maxInstances = static_cast<int>(profile.allowedStarts.size());
  TESSERA_RETURN_IF_ERROR(
      readOptional(field, "maxInstances", profile.maxInstances, 1, memorySlots));
  return profile;
}

// The type a `type:` field names; the pointer stays valid as long as the catalogue.
Result<const model::GpuType*> findType(const Field& field, const model::GpuCatalog& catalog) {
  TESSERA_RETURN_IF_ERROR(require(field));
  auto name = readName(field);
  if (!name) return fail(std::move(name.error()));
  const model::GpuType* type = catalog.find(*name);
  if (type == nullptr) {
    return fail(field.error("unknown GPU type \"" + *name + "\"; known types: " +
                            joinNames(catalog.names(), catalog.names().size()) +
                            " (declare others under gpuTypes)"));
  }
  return type;
}

// Capacity keys shared by a GPU entry and the shorthand; omitted figures come from the type.
Result<void> readCapacity(const Field& field, const model::GpuType& type, model::GpuSpec& gpu) {
  auto memory = readMemory(field, {.mibKey = "memoryMib",
                                   .quantityKey = "memory",
                                   .minMib = 1,
                                   .maxMib = limits::kMaxGpuMemoryMib,
                                   .capacity = true});
  if (!memory) return fail(std::move(memory.error()));
  gpu.memoryMib = memory->value_or(type.memoryMib.value_or(0));
  gpu.smCount = type.smCount.value_or(0);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "smCount", gpu.smCount, 1, limits::kMaxSmCount));
  gpu.memoryBandwidthGBps = type.memoryBandwidthGBps.value_or(0);
  if (const Field bandwidth = field.child("memoryBandwidthGBps"); !bandwidth.absent()) {
    auto value = readPositiveNumber(bandwidth, limits::kMaxBandwidthGBps);
    if (!value) return fail(std::move(value.error()));
    gpu.memoryBandwidthGBps = *value;
  }
  std::int64_t computeMilli = gpu.computeMilli;
  TESSERA_RETURN_IF_ERROR(readOptional(field, "computeMilli", computeMilli, 1, 1000));
  gpu.computeMilli = static_cast<std::int32_t>(computeMilli);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "timeSlicingReplicas", gpu.timeSlicingReplicas, 0,
                                       limits::kMaxTimeSlicingReplicas));
  if (const Field mig = field.child("migEnabled"); !mig.absent()) {
    auto enabled = readBool(mig);
    if (!enabled) return fail(std::move(enabled.error()));
    if (*enabled && !type.migCapable()) {
      return fail(mig.error("GPU type " + type.name + " cannot be partitioned with MIG"));
    }
    gpu.migEnabled = *enabled;
  }
  return {};
}

// Pre-existing MIG instances. The layout rules are model/mig.h's (shared with the scheduler);
// they are applied after each instance so that a broken rule is reported on its line.
Result<void> readMigInstances(const Field& list, const model::GpuType& type, model::GpuSpec& gpu) {
  if (list.absent()) return {};
  TESSERA_RETURN_IF_ERROR(expectSequence(list));
  if (list.size() > 0 && !gpu.migEnabled) {
    return fail(list.error("MIG instances need migEnabled: true on this GPU"));
  }
  std::vector<model::MigPlacement> layout;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Field item = list.item(i);
    TESSERA_RETURN_IF_ERROR(expectMap(item, {"profile", "startSlot"}));
    const Field profileField = item.child("profile");
    TESSERA_RETURN_IF_ERROR(require(profileField));
    auto name = readName(profileField);
    if (!name) return fail(std::move(name.error()));
    const int index = model::migProfileIndex(type, *name);
    if (index < 0) {
      std::vector<std::string> names;
      for (const model::MigProfile& p : type.migProfiles) names.push_back(p.name);
      return fail(profileField.error("GPU type " + type.name + " has no MIG profile \"" + *name +
                                     "\"; profiles: " + joinNames(names, names.size())));
    }
    const model::MigProfile& profile = type.migProfiles[static_cast<std::size_t>(index)];
    const Field startField = item.child("startSlot");
    model::MigPlacement placement{index, 0};
    if (startField.absent()) {
      // Like the driver's default placement: the lowest start the rules still allow.
      const auto legal = model::legalMigPlacements(type, index, layout);
      if (legal.empty()) {
        const auto free = model::freeMigPlacements(type, index, model::migSliceMask(type, layout));
        if (free.empty()) {
          return fail(item.error("no free memory slices left for a " + profile.name + " instance"));
        }
        // Slices are free, so another rule forbids it: let the layout check say which.
        placement = free.front();
      } else {
        placement = legal.front();
      }
    } else {
      auto start = readInt(startField, 0, std::max(0, type.migMemorySlots - 1));
      if (!start) return fail(std::move(start.error()));
      placement.start = static_cast<int>(*start);
    }
    layout.push_back(placement);
    if (auto legal = model::checkMigLayout(type, layout); !legal) {
      return fail((startField.absent() ? item : startField).error(legal.error().message));
    }
    gpu.migInstances.push_back({profile.name, placement.start});
  }
  return {};
}

Result<model::GpuSpec> parseGpuEntry(const Field& field, std::size_t index,
                                     const model::GpuCatalog& catalog) {
  TESSERA_RETURN_IF_ERROR(
      expectMap(field, {"id", "uuid", "type", "memoryMib", "memory", "computeMilli",
                        "memoryBandwidthGBps", "smCount", "numaNode", "nvlinkGroup", "pcieSwitch",
                        "migEnabled", "migInstances", "timeSlicingReplicas", "healthy"}));
  model::GpuSpec gpu;
  gpu.id = std::to_string(index);
  if (const Field id = field.child("id"); !id.absent()) {
    auto text = readName(id);
    if (!text) return fail(std::move(text.error()));
    gpu.id = std::move(*text);
  }
  TESSERA_RETURN_IF_ERROR(readOptional(field, "uuid", gpu.uuid));
  auto found = findType(field.child("type"), catalog);
  if (!found) return fail(std::move(found.error()));
  const model::GpuType* type = *found;
  gpu.type = type->name;
  TESSERA_RETURN_IF_ERROR(readCapacity(field, *type, gpu));
  for (const auto& [key, target] : {std::pair<std::string_view, int*>{"numaNode", &gpu.numaNode},
                                    {"nvlinkGroup", &gpu.nvlinkGroup},
                                    {"pcieSwitch", &gpu.pcieSwitch}}) {
    TESSERA_RETURN_IF_ERROR(readOptional(field, key, *target, -1, limits::kMaxTopologyIndex));
  }
  TESSERA_RETURN_IF_ERROR(readMigInstances(field.child("migInstances"), *type, gpu));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "healthy", gpu.healthy));
  return gpu;
}

// Contiguous blocks: with count 8 and 2 groups, GPUs 0-3 are group 0 and 4-7 group 1.
Result<int> readBlocks(const Field& field, std::string_view key, std::int64_t count) {
  const Field value = field.child(key);
  if (value.absent()) return 0;
  auto groups = readInt(value, 1, count);
  if (!groups) return fail(std::move(groups.error()));
  if (count % *groups != 0) {
    return fail(value.error("count (" + std::to_string(count) + ") must be a multiple of " +
                            std::string(key) + " (" + std::to_string(*groups) + ")"));
  }
  return static_cast<int>(*groups);
}

Result<std::vector<model::GpuSpec>> expandShorthand(const Field& field,
                                                    const model::GpuCatalog& catalog) {
  TESSERA_RETURN_IF_ERROR(expectMap(
      field,
      {"type", "count", "nvlinkGroups", "numaNodes", "pcieSwitches", "memoryMib", "memory",
       "computeMilli", "memoryBandwidthGBps", "smCount", "migEnabled", "timeSlicingReplicas"}));
  auto found = findType(field.child("type"), catalog);
  if (!found) return fail(std::move(found.error()));
  const model::GpuType* type = *found;
  TESSERA_RETURN_IF_ERROR(require(field.child("count")));
  auto count = readInt(field.child("count"), 1, limits::kMaxGpusPerNode);
  if (!count) return fail(std::move(count.error()));
  auto nvlinkGroups = readBlocks(field, "nvlinkGroups", *count);
  if (!nvlinkGroups) return fail(std::move(nvlinkGroups.error()));
  auto numaNodes = readBlocks(field, "numaNodes", *count);
  if (!numaNodes) return fail(std::move(numaNodes.error()));
  auto pcieSwitches = readBlocks(field, "pcieSwitches", *count);
  if (!pcieSwitches) return fail(std::move(pcieSwitches.error()));

  model::GpuSpec prototype;
  prototype.type = type->name;
  TESSERA_RETURN_IF_ERROR(readCapacity(field, *type, prototype));
  const auto blockOf = [&](int blocks, std::int64_t i) {
    return blocks == 0 ? -1 : static_cast<int>(i / (*count / blocks));
  };
  std::vector<model::GpuSpec> gpus;
  for (std::int64_t i = 0; i < *count; ++i) {
    model::GpuSpec gpu = prototype;
    gpu.id = std::to_string(i);
    gpu.nvlinkGroup = blockOf(*nvlinkGroups, i);
    gpu.numaNode = blockOf(*numaNodes, i);
    gpu.pcieSwitch = blockOf(*pcieSwitches, i);
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace

Result<model::GpuType> parseGpuType(const Field& field) {
  TESSERA_RETURN_IF_ERROR(expectMap(
      field, {"name", "aliases", "opaque", "architecture", "memoryMib", "memory", "smCount",
              "memoryBandwidthGBps", "fp16Tflops", "nvlinkGBps", "migMemorySlots", "migProfiles"}));
  model::GpuType type;
  TESSERA_RETURN_IF_ERROR(require(field.child("name")));
  auto name = readName(field.child("name"));
  if (!name) return fail(std::move(name.error()));
  type.name = std::move(*name);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "aliases", type.aliases));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "opaque", type.opaque));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "architecture", type.architecture));
  auto memory = readMemory(field, {.mibKey = "memoryMib",
                                   .quantityKey = "memory",
                                   .minMib = 1,
                                   .maxMib = limits::kMaxGpuMemoryMib,
                                   .capacity = true});
  if (!memory) return fail(std::move(memory.error()));
  type.memoryMib = *memory;
  if (const Field sm = field.child("smCount"); !sm.absent()) {
    auto value = readInt(sm, 1, limits::kMaxSmCount);
    if (!value) return fail(std::move(value.error()));
    type.smCount = static_cast<int>(*value);
  }
  if (const Field bandwidth = field.child("memoryBandwidthGBps"); !bandwidth.absent()) {
    auto value = readPositiveNumber(bandwidth, limits::kMaxBandwidthGBps);
    if (!value) return fail(std::move(value.error()));
    type.memoryBandwidthGBps = *value;
  }
  if (const Field tflops = field.child("fp16Tflops"); !tflops.absent()) {
    auto value = readPositiveNumber(tflops, limits::kMaxTflops);
    if (!value) return fail(std::move(value.error()));
    type.fp16Tflops = *value;
  }
  if (const Field nvlink = field.child("nvlinkGBps"); !nvlink.absent()) {
    auto value = readInt(nvlink, 1, limits::kMaxNvlinkGBps);
    if (!value) return fail(std::move(value.error()));
    type.nvlinkGBps = static_cast<int>(*value);
  }
  TESSERA_RETURN_IF_ERROR(
      readOptional(field, "migMemorySlots", type.migMemorySlots, 0, model::kMaxMigMemorySlots));
  const Field profiles = field.child("migProfiles");
  TESSERA_RETURN_IF_ERROR(expectSequence(profiles));
  if (profiles.size() > 0 && type.migMemorySlots == 0) {
    return fail(profiles.error("MIG profiles need migMemorySlots > 0"));
  }
  std::map<std::string, std::string> profilePlaces;
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    auto profile = parseMigProfile(profiles.item(i), type.migMemorySlots);
    if (!profile) return fail(std::move(profile.error()));
    const Field profileName = profiles.item(i).child("name");
    if (const auto [it, inserted] = profilePlaces.emplace(profile->name, profileName.locate());
        !inserted) {
      return fail(profileName.error("duplicate MIG profile \"" + profile->name + "\" (first " +
                                    it->second + ")"));
    }
    type.migProfiles.push_back(std::move(*profile));
  }
  if (auto valid = model::validateGpuType(type); !valid) {
    return fail(field.error(valid.error().message));
  }
  return type;
}

Result<std::vector<model::GpuSpec>> parseNodeGpus(const Field& field,
                                                  const model::GpuCatalog& catalog) {
  if (field.isNull()) return std::vector<model::GpuSpec>();
  if (field.isMap()) return expandShorthand(field, catalog);
  if (!field.isSequence()) {
    return fail(
        field.error("must be a list of GPUs or a {type, count} mapping, got " + field.describe()));
  }
  if (field.size() > static_cast<std::size_t>(limits::kMaxGpusPerNode)) {
    return fail(
        field.error("more than " + std::to_string(limits::kMaxGpusPerNode) + " GPUs on one node"));
  }
  std::vector<model::GpuSpec> gpus;
  std::map<std::string, std::string> placeById;
  for (std::size_t i = 0; i < field.size(); ++i) {
    const Field item = field.item(i);
    auto gpu = parseGpuEntry(item, i, catalog);
    if (!gpu) return fail(std::move(gpu.error()));
    const Field id = item.child("id");
    if (const auto [it, inserted] = placeById.emplace(gpu->id, id.locate()); !inserted) {
      return fail(id.error("duplicate GPU id \"" + gpu->id + "\" (first " + it->second + ")"));
    }
    gpus.push_back(std::move(*gpu));
  }
  return gpus;
}

}  // namespace tessera::config
