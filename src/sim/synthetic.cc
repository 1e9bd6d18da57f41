#include "sim/synthetic.h"

#include <cstdio>
#include <span>

#include "sim/workload.h"

namespace tessera::sim {
namespace {

struct NodeClass {
  const char* type;  // catalogue alias, as in the trace
  int count;
  int gpus;
  int vcpus;
  int memoryGib;
};

// The trace's main node classes, scaled to 100 nodes (GPU share by type close to the
// trace's: G2 70 %, T4 14 %, the rest 16 %).
constexpr NodeClass kNodes[] = {
    {"G2", 46, 8, 96, 384},     {"T4", 30, 2, 104, 512},    {"T4", 2, 4, 96, 384},
    {"P100", 10, 2, 64, 256},   {"V100M16", 3, 4, 32, 128}, {"V100M16", 2, 1, 8, 32},
    {"V100M32", 2, 8, 96, 768}, {"G3", 3, 8, 128, 768},     {"A10", 2, 1, 128, 1024},
};

template <typename T>
struct Weighted {
  T value;
  double weight;
};

template <typename T>
T pick(Rng& rng, std::span<const Weighted<T>> table) {
  double total = 0;
  for (const auto& w : table) total += w.weight;
  double x = rng.unit() * total;
  for (const auto& w : table) {
    if (x < w.weight) return w.value;
    x -= w.weight;
  }
  return table.back().value;
}

// Task classes by share of tasks (the default trace: 13.3 % CPU-only, 37.8 % sharing,
// 48.0 % one GPU, 0.9 % multi-GPU).
enum class Kind { kCpuOnly, kSharing, kOneGpu, kMultiGpu };
constexpr Weighted<Kind> kKinds[] = {
    {Kind::kCpuOnly, 13.3}, {Kind::kSharing, 37.8}, {Kind::kOneGpu, 48.0}, {Kind::kMultiGpu, 0.9}};
// Per-GPU milli of sharing tasks (the trace's most common sizes).
constexpr Weighted<std::int32_t> kShareMilli[] = {
    {810, 34}, {470, 13}, {500, 12}, {250, 10}, {300, 8}, {200, 8}, {100, 7}, {650, 5}, {50, 3}};
// vCPU in milli per task class.
constexpr Weighted<std::int64_t> kCpuOnlyMilli[] = {{12500, 34}, {4000, 20},  {8000, 16},
                                                    {16000, 12}, {32000, 10}, {64000, 8}};
constexpr Weighted<std::int64_t> kShareCpuMilli[] = {{3152, 40}, {11908, 15}, {6000, 15},
                                                     {4000, 15}, {16000, 10}, {24000, 5}};
constexpr Weighted<std::int64_t> kOneGpuCpuMilli[] = {
    {11300, 24}, {11400, 16}, {3152, 13}, {8000, 17}, {12000, 15}, {16000, 10}, {32000, 5}};
constexpr Weighted<int> kMultiGpus[] = {{2, 21}, {4, 20}, {8, 59}};
// About 5 % of GPU tasks ask for specific types.
constexpr Weighted<const char*> kSpecs[] = {
    {"", 95}, {"T4", 2.5}, {"G2", 1}, {"P100", 0.5}, {"V100M16|V100M32", 0.5}, {"G3", 0.5}};

std::string numbered(const char* prefix, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%04d", prefix, i);
  return buf;
}

}  // namespace

SyntheticTrace makeSyntheticTrace(std::uint64_t seed) {
  SyntheticTrace t;
  int nodeNo = 0;
  for (const NodeClass& c : kNodes) {
    for (int i = 0; i < c.count; ++i) {
      model::NodeSpec n;
      n.name = numbered("syn-node-", nodeNo++);
      n.cpuMilli = std::int64_t{c.vcpus} * 1000;
      n.hostMemoryMib = std::int64_t{c.memoryGib} * 1024;
      for (int g = 0; g < c.gpus; ++g) {
        model::GpuSpec gpu;
        gpu.id = std::to_string(g);
        gpu.type = c.type;
        n.gpus.push_back(std::move(gpu));
      }
      t.nodes.push_back(std::move(n));
    }
  }
  const std::int64_t target = gpuCapacityMilli(t.nodes) * 98 / 100;
  Rng rng(seed);
  std::int64_t requested = 0;
  int podNo = 0;
  while (requested < target) {
    TracePod p;
    p.name = numbered("syn-pod-", podNo++);
    switch (pick<Kind>(rng, kKinds)) {
      case Kind::kCpuOnly:
        p.cpuMilli = pick<std::int64_t>(rng, kCpuOnlyMilli);
        break;
      case Kind::kSharing:
        p.gpus = 1;
        p.gpuMilli = pick<std::int32_t>(rng, kShareMilli);
        p.cpuMilli = pick<std::int64_t>(rng, kShareCpuMilli);
        break;
      case Kind::kOneGpu:
        p.gpus = 1;
        p.gpuMilli = 1000;
        p.cpuMilli = pick<std::int64_t>(rng, kOneGpuCpuMilli);
        break;
      case Kind::kMultiGpu:
        p.gpus = pick<int>(rng, kMultiGpus);
        p.gpuMilli = 1000;
        p.cpuMilli = std::int64_t{8000} * p.gpus;
        break;
    }
    // Host memory: 2 GiB per vCPU, as most trace tasks ask.
    p.memoryMib = p.cpuMilli * 2048 / 1000;
    if (p.gpus > 0) {
      p.gpuSpec = pick<const char*>(rng, kSpecs);
      std::size_t pos = 0;
      while (!p.gpuSpec.empty() && pos <= p.gpuSpec.size()) {
        std::size_t bar = p.gpuSpec.find('|', pos);
        if (bar == std::string::npos) bar = p.gpuSpec.size();
        p.gpuTypes.push_back(p.gpuSpec.substr(pos, bar - pos));
        pos = bar + 1;
      }
    }
    requested += p.totalGpuMilli();
    t.pods.push_back(std::move(p));
  }
  return t;
}

}  // namespace tessera::sim
