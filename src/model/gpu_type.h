#pragma once
// GPU types: the static figures of a card model, and its MIG geometry.
// Figures the vendor never published (the Alibaba trace's internal G2/G3 classes) are
// std::nullopt, never guessed.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::model {

// One MIG GPU-instance profile, e.g. "3g.20gb" on an A100 40GB.
// A card in MIG mode has `migMemorySlots` equal memory slices; an instance of this profile
// occupies `slotCount` consecutive slices starting at one of `allowedStarts`.
struct MigProfile {
  std::string name;                // NVIDIA's profile name, e.g. "1g.10gb"
  int computeSlices = 0;           // g in "<g>g.<m>gb": 1/7ths of the SMs on 7-slice cards
  std::int64_t memoryMib = 0;      // card memory x memory fraction (docs/gpu-catalogue.md)
  int slotCount = 0;               // memory slices occupied
  std::vector<int> allowedStarts;  // first memory slice an instance may start at
  int maxInstances = 0;            // most instances of this profile on one card
};

struct GpuType {
  std::string name;                  // catalogue key, e.g. "A100-80GB"; matched case-insensitively
  std::vector<std::string> aliases;  // other spellings seen in traces and NVML names
  bool opaque = false;               // an undisclosed type (figures unknown)
  std::optional<std::int64_t> memoryMib;
  std::optional<int> smCount;
  std::optional<double> memoryBandwidthGBps;
  std::optional<double> fp16Tflops;  // dense FP16/BF16 tensor throughput
  std::optional<int> nvlinkGBps;     // per-GPU NVLink bandwidth, if the form factor has it
  std::string architecture;          // "Volta", "Ampere", ... empty if unknown
  int migMemorySlots = 0;            // 0: the card cannot do MIG
  std::vector<MigProfile> migProfiles;

  bool migCapable() const { return migMemorySlots > 0 && !migProfiles.empty(); }
  const MigProfile* findMigProfile(const std::string& profileName) const;
};

}  // namespace tessera::model
