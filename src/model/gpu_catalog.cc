#include "model/gpu_catalog.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/text.h"
#include "model/internal/names.h"
#include "model/mig.h"

namespace tessera::model {
namespace {

// ---- Built-in figures ------------------------------------------------------------------------
//
// Sources (docs/gpu-catalogue.md has the same list with the tables):
//   [MIG]  NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" (profile names, memory
//          fractions, instance counts) and "Getting Started" (`nvidia-smi mig -lgipp` placement
//          listing), https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ (r580).
//   [P100] NVIDIA Tesla P100 PCIe datasheet.      [V100] NVIDIA Tesla V100 datasheet (SXM2).
//   [T4]   NVIDIA T4 datasheet.                   [A10]  NVIDIA A10 datasheet.
//   [A30]  NVIDIA A30 datasheet.                  [A100] NVIDIA A100 datasheet (SXM4 columns).
//   [H100] NVIDIA H100 datasheet (SXM column).    [H200] NVIDIA H200 datasheet (SXM column).
//   [L4]   NVIDIA L4 datasheet.                   [L40S] NVIDIA L40S datasheet.
//   [ALI]  Alibaba cluster-trace-gpu-v2023 README: G1/G2/G3 are undisclosed internal models.
//
// Units and conversions (the same in every row, so that figures compare):
//   memoryMib: the datasheet's "GB" of GPU memory read as GiB (DRAM parts come in binary sizes),
//     so 80 GB = 80 x 1024 = 81920 MiB and H200's 141 GB = 144384 MiB. Drivers expose a little
//     less (ECC, reserved regions); fit checks leave headroom through the safety factor.
//   memoryBandwidthGBps: decimal GB/s as the datasheet prints it (3.35 TB/s = 3350 GB/s).
//   fp16Tflops: dense FP16 tensor-core throughput. Datasheets from Ampere on print the sparse
//     figure next to (or, for Hopper, instead of) the dense one; the dense one is half of it.
//     Pascal has no tensor cores: P100 carries its packed-FP16 rate.
//   nvlinkGBps: total NVLink bandwidth per GPU (both directions), empty without NVLink.
//   MigProfile::memoryMib: the card's memoryMib x the profile's memory fraction from [MIG]
//     (slotCount / migMemorySlots). The driver reports a few percent less per instance, and the
//     exact figure moves with driver release and even placement ([MIG] shows two 3g.20gb instances
//     of one A100 at 20224 and 20096 MiB), so the catalogue keeps the fraction, which is fixed.
//   allowedStarts: [MIG]'s placement listing for A100: 1-slice profiles start at 0..6, 2-slice
//     1g profiles at 0,2,4,6, 2g at 0,2,4, 3g at 0,4, 4g and 7g at 0. H100 and H200 have the
//     same 8-slice/7-SM geometry and the same table; A30 has 4 slices and 4 SM slices.

constexpr std::int64_t kMibPerGib = 1024;

MigProfile profile(std::string name, int computeSlices, std::int64_t memoryMib, int slotCount,
                   std::vector<int> allowedStarts, int maxInstances) {
  return MigProfile{std::move(name),          computeSlices, memoryMib, slotCount,
                    std::move(allowedStarts), maxInstances};
}

GpuType p100() {
  GpuType t;
  t.name = "P100-16GB";
  t.aliases = {"P100", "Tesla P100-PCIE-16GB", "Tesla-P100-PCIE-16GB"};
  t.architecture = "Pascal";
  t.memoryMib = 16 * kMibPerGib;
  t.smCount = 56;
  t.memoryBandwidthGBps = 732;
  t.fp16Tflops = 18.7;  // packed FP16 at boost clock, PCIe card
  return t;
}

// The trace does not say which V100 form factor its nodes hold; its 8-GPU nodes match the
// NVLink (SXM2) boards, so both V100 types carry SXM2 figures. PCIe V100s are 112 TFLOPS
// without NVLink: declare them as a custom type.
GpuType v100(std::int64_t gib, std::string traceName, std::string nvmlName) {
  GpuType t;
  t.name = "V100-" + std::to_string(gib) + "GB";
  t.aliases = {std::move(traceName), nvmlName};
  for (char& c : nvmlName) c = c == ' ' ? '-' : c;  // GPU feature discovery's product label
  t.aliases.push_back(std::move(nvmlName));
  t.architecture = "Volta";
  t.memoryMib = gib * kMibPerGib;
  t.smCount = 80;
  t.memoryBandwidthGBps = 900;
  t.fp16Tflops = 125;
  t.nvlinkGBps = 300;
  return t;
}

GpuType t4() {
  GpuType t;
  t.name = "T4";
  t.aliases = {"Tesla T4", "Tesla-T4", "NVIDIA T4"};
  t.architecture = "Turing";
  t.memoryMib = 16 * kMibPerGib;
  t.smCount = 40;
  t.memoryBandwidthGBps = 320;
  t.fp16Tflops = 65;
  return t;
}

GpuType a10() {
  GpuType t;
  t.name = "A10";
  t.aliases = {"NVIDIA A10", "NVIDIA-A10"};
  t.architecture = "Ampere";
  t.memoryMib = 24 * kMibPerGib;
  t.smCount = 72;
  t.memoryBandwidthGBps = 600;
  t.fp16Tflops = 125;
  return t;
}

GpuType a30() {
  GpuType t;
  t.name = "A30";
  t.aliases = {"NVIDIA A30", "NVIDIA-A30", "A30-24GB"};
  t.architecture = "Ampere";
  t.memoryMib = 24 * kMibPerGib;
  t.smCount = 56;
  t.memoryBandwidthGBps = 933;
  t.fp16Tflops = 165;
  t.nvlinkGBps = 200;  // NVLink bridge between a pair of cards
  t.migMemorySlots = 4;
  t.migProfiles = {
      profile("1g.6gb", 1, 6144, 1, {0, 1, 2, 3}, 4),
      profile("1g.6gb+me", 1, 6144, 1, {0, 1, 2, 3}, 1),
      profile("2g.12gb", 2, 12288, 2, {0, 2}, 2),
      profile("2g.12gb+me", 2, 12288, 2, {0, 2}, 1),
      profile("4g.24gb", 4, 24576, 4, {0}, 1),
  };
  return t;
}

GpuType a100_40() {
  GpuType t;
  t.name = "A100-40GB";
  t.aliases = {"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"};
  t.architecture = "Ampere";
  t.memoryMib = 40 * kMibPerGib;
  t.smCount = 108;
  t.memoryBandwidthGBps = 1555;
  t.fp16Tflops = 312;
  t.nvlinkGBps = 600;
  t.migMemorySlots = 8;
  // [MIG]'s A100 table prints 1/8 as 1g.10gb's memory fraction, but the placement listing
  // gives it 2 slices ({0,2,4,6}:2) and its name says 10 GB: it is 2/8, as on H100 (1g.20gb).
  t.migProfiles = {
      profile("1g.5gb", 1, 5120, 1, {0, 1, 2, 3, 4, 5, 6}, 7),
      profile("1g.5gb+me", 1, 5120, 1, {0, 1, 2, 3, 4, 5, 6}, 1),
      profile("1g.10gb", 1, 10240, 2, {0, 2, 4, 6}, 4),
      profile("2g.10gb", 2, 10240, 2, {0, 2, 4}, 3),
      profile("3g.20gb", 3, 20480, 4, {0, 4}, 2),
      profile("4g.20gb", 4, 20480, 4, {0}, 1),
      profile("7g.40gb", 7, 40960, 8, {0}, 1),
  };
  return t;
}

// A100 80GB and H100 80GB share profile names and geometry ([MIG]).
std::vector<MigProfile> eightySliceProfiles() {
  return {
      profile("1g.10gb", 1, 10240, 1, {0, 1, 2, 3, 4, 5, 6}, 7),
      profile("1g.10gb+me", 1, 10240, 1, {0, 1, 2, 3, 4, 5, 6}, 1),
      profile("1g.20gb", 1, 20480, 2, {0, 2, 4, 6}, 4),
      profile("2g.20gb", 2, 20480, 2, {0, 2, 4}, 3),
      profile("3g.40gb", 3, 40960, 4, {0, 4}, 2),
      profile("4g.40gb", 4, 40960, 4, {0}, 1),
      profile("7g.80gb", 7, 81920, 8, {0}, 1),
  };
}

GpuType a100_80() {
  GpuType t;
  t.name = "A100-80GB";
  t.aliases = {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"};
  t.architecture = "Ampere";
  t.memoryMib = 80 * kMibPerGib;
  t.smCount = 108;
  t.memoryBandwidthGBps = 2039;
  t.fp16Tflops = 312;
  t.nvlinkGBps = 600;
  t.migMemorySlots = 8;
  t.migProfiles = eightySliceProfiles();
  return t;
}

GpuType h100_80() {
  GpuType t;
  t.name = "H100-80GB";
  t.aliases = {"NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"};
  t.architecture = "Hopper";
  t.memoryMib = 80 * kMibPerGib;
  t.smCount = 132;
  t.memoryBandwidthGBps = 3350;
  t.fp16Tflops = 989.5;  // half of the datasheet's 1,979 with sparsity
  t.nvlinkGBps = 900;
  t.migMemorySlots = 8;
  t.migProfiles = eightySliceProfiles();
  return t;
}

GpuType h200() {
  GpuType t;
  t.name = "H200-141GB";
  t.aliases = {"H200", "NVIDIA H200", "NVIDIA-H200"};
  t.architecture = "Hopper";
  t.memoryMib = 141 * kMibPerGib;  // 144384 MiB
  t.smCount = 132;
  t.memoryBandwidthGBps = 4800;
  t.fp16Tflops = 989.5;  // half of the datasheet's 1,979 with sparsity
  t.nvlinkGBps = 900;
  t.migMemorySlots = 8;
  // One memory slice is 144384 / 8 = 18048 MiB; the names round it to 18 GB.
  t.migProfiles = {
      profile("1g.18gb", 1, 18048, 1, {0, 1, 2, 3, 4, 5, 6}, 7),
      profile("1g.18gb+me", 1, 18048, 1, {0, 1, 2, 3, 4, 5, 6}, 1),
      profile("1g.35gb", 1, 36096, 2, {0, 2, 4, 6}, 4),
      profile("2g.35gb", 2, 36096, 2, {0, 2, 4}, 3),
      profile("3g.71gb", 3, 72192, 4, {0, 4}, 2),
      profile("4g.71gb", 4, 72192, 4, {0}, 1),
      profile("7g.141gb", 7, 144384, 8, {0}, 1),
  };
  return t;
}

GpuType l4() {
  GpuType t;
  t.name = "L4";
  t.aliases = {"NVIDIA L4", "NVIDIA-L4"};
  t.architecture = "Ada Lovelace";
  t.memoryMib = 24 * kMibPerGib;
  t.smCount = 58;
  t.memoryBandwidthGBps = 300;
  t.fp16Tflops = 121;  // half of the datasheet's 242 with sparsity
  return t;
}

GpuType l40s() {
  GpuType t;
  t.name = "L40S";
  t.aliases = {"NVIDIA L40S", "NVIDIA-L40S"};
  t.architecture = "Ada Lovelace";
  t.memoryMib = 48 * kMibPerGib;
  t.smCount = 142;
  t.memoryBandwidthGBps = 864;
  t.fp16Tflops = 362.05;
  return t;
}

// [ALI] publishes only the codes; every figure stays unknown rather than guessed.
GpuType undisclosed(std::string name) {
  GpuType t;
  t.name = std::move(name);
  t.opaque = true;
  return t;
}

GpuCatalog makeBuiltin() {
  std::vector<GpuType> types;
  types.push_back(p100());
  types.push_back(v100(16, "V100M16", "Tesla V100-SXM2-16GB"));
  types.push_back(v100(32, "V100M32", "Tesla V100-SXM2-32GB"));
  types.push_back(t4());
  types.push_back(a10());
  types.push_back(a30());
  types.push_back(a100_40());
  types.push_back(a100_80());
  types.push_back(h100_80());
  types.push_back(h200());
  types.push_back(l4());
  types.push_back(l40s());
  types.push_back(undisclosed("G2"));
  types.push_back(undisclosed("G3"));
  GpuCatalog catalog;
  for (GpuType& type : types) {
    const std::string name = type.name;
    if (auto added = catalog.add(std::move(type)); !added) {
      // A built-in type that fails its own checks is a bug in this file, not bad input.
      std::fprintf(stderr, "tessera: built-in GPU type %s is invalid: %s\n", name.c_str(),
                   added.error().message.c_str());
      std::abort();
    }
  }
  return catalog;
}

// ---- Validation --------------------------------------------------------------------------------

Error fieldError(const GpuType& type, const std::string& field, const std::string& problem) {
  const std::string who =
      type.name.empty() ? "GPU type (unnamed)" : "GPU type \"" + type.name + "\"";
  return Error::invalid(who + ": " + field + ": " + problem);
}

template <typename T>
bool positive(const std::optional<T>& value) {
  if (!value) return true;
  if constexpr (std::is_floating_point_v<T>) {
    return std::isfinite(*value) && *value > 0;
  } else {
    return *value > 0;
  }
}

Result<void> validateProfile(const GpuType& type, std::size_t index,
                             std::set<std::string>& seenNames) {
  const MigProfile& p = type.migProfiles[index];
  const std::string field = "migProfiles[" + std::to_string(index) + "]" +
                            (p.name.empty() ? std::string() : " \"" + p.name + "\"");
  if (p.name.empty()) return fail(fieldError(type, field + ".name", "must not be empty"));
  std::string folded;
  for (char c : p.name) folded += internal::asciiLower(c);
  if (!seenNames.insert(folded).second) {
    return fail(fieldError(type, field + ".name", "duplicate profile name"));
  }
  if (p.computeSlices <= 0) {
    return fail(fieldError(type, field + ".computeSlices", "must be positive"));
  }
  if (p.memoryMib <= 0) return fail(fieldError(type, field + ".memoryMib", "must be positive"));
  if (type.memoryMib && p.memoryMib > *type.memoryMib) {
    return fail(fieldError(type, field + ".memoryMib",
                           std::to_string(p.memoryMib) + " MiB exceeds the card's memoryMib " +
                               std::to_string(*type.memoryMib)));
  }
  if (p.slotCount <= 0 || p.slotCount > type.migMemorySlots) {
    return fail(fieldError(type, field + ".slotCount",
                           "must be between 1 and migMemorySlots (" +
                               std::to_string(type.migMemorySlots) + "), got " +
                               std::to_string(p.slotCount)));
  }
  if (p.allowedStarts.empty()) {
    return fail(fieldError(type, field + ".allowedStarts", "must list at least one start"));
  }
  std::set<int> starts;
  for (int start : p.allowedStarts) {
    if (start < 0 || start + p.slotCount > type.migMemorySlots) {
      return fail(fieldError(type, field + ".allowedStarts",
                             "start " + std::to_string(start) + " + slotCount " +
                                 std::to_string(p.slotCount) + " runs past migMemorySlots " +
                                 std::to_string(type.migMemorySlots)));
    }
    if (!starts.insert(start).second) {
      return fail(fieldError(type, field + ".allowedStarts",
                             "start " + std::to_string(start) + " is listed twice"));
    }
  }
  // Two instances never share a start, and together they cannot hold more slices than exist.
  if (p.maxInstances <= 0 || static_cast<std::size_t>(p.maxInstances) > p.allowedStarts.size() ||
      p.maxInstances * p.slotCount > type.migMemorySlots) {
    return fail(fieldError(type, field + ".maxInstances",
                           "must be between 1 and the number of non-overlapping placements, got " +
                               std::to_string(p.maxInstances)));
  }
  return {};
}

}  // namespace

// ---- GpuCatalog ------------------------------------------------------------------------------

GpuCatalog GpuCatalog::builtin() {
  // Built once: the figures are constants and the catalogue is immutable after construction.
  static const GpuCatalog kBuiltin = makeBuiltin();
  return kBuiltin;
}

Result<void> GpuCatalog::add(GpuType type) {
  TESSERA_RETURN_IF_ERROR(validateGpuType(type));
  std::vector<const std::string*> keys{&type.name};
  for (const std::string& alias : type.aliases) keys.push_back(&alias);
  for (const std::string* key : keys) {
    if (const GpuType* taken = find(*key)) {
      return fail(Error::exists("GPU type \"" + type.name + "\": name \"" + *key +
                                "\" is already taken by GPU type \"" + taken->name + "\""));
    }
  }
  types_.push_back(std::make_shared<const GpuType>(std::move(type)));
  return {};
}

const GpuType* GpuCatalog::find(std::string_view nameOrAlias) const {
  const int index = indexOf(nameOrAlias);
  return index < 0 ? nullptr : types_[static_cast<std::size_t>(index)].get();
}

int GpuCatalog::indexOf(std::string_view nameOrAlias) const {
  if (nameOrAlias.empty()) return -1;
  for (std::size_t i = 0; i < types_.size(); ++i) {
    const GpuType& t = *types_[i];
    if (internal::equalsIgnoreCase(t.name, nameOrAlias)) return static_cast<int>(i);
    for (const std::string& alias : t.aliases) {
      if (internal::equalsIgnoreCase(alias, nameOrAlias)) return static_cast<int>(i);
    }
  }
  return -1;
}

std::vector<std::string> GpuCatalog::names() const {
  std::vector<std::string> out;
  out.reserve(types_.size());
  for (const auto& t : types_) out.push_back(t->name);
  return out;
}

Result<void> GpuCatalog::checkKnown(const std::vector<std::string>& namesOrAliases,
                                    std::string_view what) const {
  for (const std::string& name : namesOrAliases) {
    if (indexOf(name) >= 0) continue;
    std::vector<std::string_view> known;
    for (const auto& t : types_) {
      known.emplace_back(t->name);
      for (const std::string& alias : t->aliases) known.emplace_back(alias);
    }
    std::string message = std::string(what) + ": unknown GPU type '" + name + "'";
    if (const auto near = closestName(name, known)) {
      message += " (did you mean '" + std::string(*near) + "'?)";
    } else {
      message += "; known types:";
      for (std::size_t i = 0; i < types_.size(); ++i) message += (i ? ", " : " ") + types_[i]->name;
    }
    return fail(Error::invalid(std::move(message)));
  }
  return {};
}

// ---- validateGpuType -------------------------------------------------------------------------

Result<void> validateGpuType(const GpuType& type) {
  if (type.name.empty()) return fail(fieldError(type, "name", "must not be empty"));
  std::set<std::string> keys;
  auto fold = [](const std::string& s) {
    std::string out;
    for (char c : s) out += internal::asciiLower(c);
    return out;
  };
  keys.insert(fold(type.name));
  for (std::size_t i = 0; i < type.aliases.size(); ++i) {
    const std::string field = "aliases[" + std::to_string(i) + "]";
    if (type.aliases[i].empty()) return fail(fieldError(type, field, "must not be empty"));
    if (!keys.insert(fold(type.aliases[i])).second) {
      return fail(
          fieldError(type, field, "\"" + type.aliases[i] + "\" repeats the name or another alias"));
    }
  }
  if (type.opaque) {
    // An undisclosed type is opaque precisely because its figures are unknown; one with
    // figures is a contradiction, most likely a copy-paste error in the cluster file.
    const bool anyFigure = type.memoryMib || type.smCount || type.memoryBandwidthGBps ||
                           type.fp16Tflops || type.nvlinkGBps || type.migMemorySlots != 0 ||
                           !type.migProfiles.empty();
    if (anyFigure) {
      return fail(fieldError(type, "opaque",
                             "an opaque type carries no figures; drop opaque or the figures"));
    }
    return {};
  }
  if (!positive(type.memoryMib)) return fail(fieldError(type, "memoryMib", "must be positive"));
  if (!positive(type.smCount)) return fail(fieldError(type, "smCount", "must be positive"));
  if (!positive(type.memoryBandwidthGBps)) {
    return fail(fieldError(type, "memoryBandwidthGBps", "must be a positive number"));
  }
  if (!positive(type.fp16Tflops)) {
    return fail(fieldError(type, "fp16Tflops", "must be a positive number"));
  }
  if (!positive(type.nvlinkGBps)) {
    return fail(fieldError(type, "nvlinkGBps", "must be positive (leave it unset without NVLink)"));
  }
  if (type.migMemorySlots < 0 || type.migMemorySlots > kMaxMigMemorySlots) {
    return fail(fieldError(type, "migMemorySlots",
                           "must be between 0 and " + std::to_string(kMaxMigMemorySlots) +
                               ", got " + std::to_string(type.migMemorySlots)));
  }
  if (type.migMemorySlots == 0) {
    if (!type.migProfiles.empty()) {
      return fail(fieldError(type, "migProfiles", "given but migMemorySlots is 0"));
    }
    return {};
  }
  if (type.migProfiles.empty()) {
    return fail(fieldError(type, "migProfiles", "migMemorySlots is set but no profile is listed"));
  }
  if (!type.memoryMib) {
    return fail(fieldError(type, "memoryMib", "a MIG-capable type must state its memory"));
  }
  std::set<std::string> profileNames;
  for (std::size_t i = 0; i < type.migProfiles.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(validateProfile(type, i, profileNames));
  }
  return {};
}

}  // namespace tessera::model
