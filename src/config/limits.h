#pragma once
// Bounds on the figures a configuration file may state. They are far beyond any real
// hardware or model, and exist to catch slips (a value in bytes where MiB was meant, a
// negative count) at load time, on the line that has them, instead of deep in a decision.
// docs/configuration.md lists them per field; change both together.

#include <cstdint>

namespace tessera::config::limits {

constexpr std::int64_t kMiBPerTiB = 1024 * 1024;

constexpr std::int64_t kMaxGpuMemoryMib = 16 * kMiBPerTiB;    // one GPU, or one model figure
constexpr std::int64_t kMaxHostMemoryMib = 256 * kMiBPerTiB;  // one node's RAM
constexpr std::int64_t kMaxCpuMilli = 10'000'000;             // 10,000 cores
constexpr double kMaxBandwidthGBps = 100'000;                 // 20x the fastest HBM today
constexpr double kMaxTflops = 1'000'000;
constexpr std::int64_t kMaxSmCount = 1024;
constexpr std::int64_t kMaxNvlinkGBps = 100'000;
constexpr std::int64_t kMaxGpusPerNode = 64;
constexpr std::int64_t kMaxTopologyIndex = 1023;  // numaNode, nvlinkGroup, pcieSwitch
constexpr std::int64_t kMaxTimeSlicingReplicas = 64;
constexpr std::int64_t kMaxRequestCount = 100'000;  // `count:` of one requests entry
constexpr double kMinSafetyFactor = 1.0;
constexpr double kMaxSafetyFactor = 10.0;
constexpr double kMaxReservationTtlSeconds = 86'400;
constexpr std::int64_t kMaxPluginWeight = 1000;

}  // namespace tessera::config::limits
