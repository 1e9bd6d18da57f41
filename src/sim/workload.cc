#include "sim/workload.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "model/gpu_catalog.h"

namespace tessera::sim {

TypicalWorkload typicalPods(const std::vector<TracePod>& pods, double thresholdPct) {
  struct Key {
    std::int64_t cpu;
    std::int32_t g;
    int k;
    std::string spec;
    bool operator<(const Key& o) const {
      return std::tie(cpu, g, k, spec) < std::tie(o.cpu, o.g, o.k, o.spec);
    }
  };
  std::map<Key, std::int64_t> counts;
  std::map<Key, const TracePod*> example;
  for (const TracePod& p : pods) {
    Key key{p.cpuMilli, p.gpuMilli, p.gpus, p.gpuSpec};
    ++counts[key];
    example.emplace(key, &p);
  }
  std::vector<std::pair<Key, std::int64_t>> sorted(counts.begin(), counts.end());
  // Count descending; on ties the "larger" shape first, component by component.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return b.first < a.first;
  });
  TypicalWorkload out;
  out.distinctShapes = static_cast<int>(sorted.size());
  out.totalTasks = static_cast<std::int64_t>(pods.size());
  const double total = static_cast<double>(pods.size());
  const double expected = thresholdPct * total / 100.0;
  double cumulative = 0;
  std::size_t kept = 0;
  while (cumulative < expected && kept < sorted.size()) {
    cumulative += static_cast<double>(sorted[kept].second);
    ++kept;
  }
  out.coveredTasks = static_cast<std::int64_t>(cumulative);
  for (std::size_t i = 0; i < kept; ++i) {
    const Key& key = sorted[i].first;
    sched::TaskShape shape;
    shape.cpuMilli = key.cpu;
    shape.gpuMilli = key.g;
    shape.gpus = key.k;
    shape.gpuTypes = example.at(key)->gpuTypes;
    const double share = static_cast<double>(sorted[i].second) / total;
    shape.weight = kept < sorted.size() ? share / (cumulative / total) : share;
    out.shapes.push_back(std::move(shape));
  }
  return out;
}

std::uint64_t Rng::below(std::uint64_t n) {
  // Values below `threshold` would make x % n favour small results; 2^64 - threshold is a
  // multiple of n.
  const std::uint64_t threshold = (~n + 1) % n;
  for (;;) {
    const std::uint64_t x = engine_();
    if (x >= threshold) return x % n;
  }
}

double Rng::unit() {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

std::vector<int> podsByName(const std::vector<TracePod>& pods) {
  std::vector<int> idx(pods.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) {
    return pods[static_cast<std::size_t>(a)].name < pods[static_cast<std::size_t>(b)].name;
  });
  return idx;
}

void tuneWorkload(const std::vector<TracePod>& pods, const std::vector<int>& byName,
                  std::int64_t capacityMilli, double ratio, Rng& rng, ArrivalPlan& plan) {
  auto podAt = [&](int i) -> const TracePod& { return pods[static_cast<std::size_t>(i)]; };
  std::int64_t total = 0;
  for (int i : plan.order) total += podAt(i).totalGpuMilli();
  const double target = ratio * static_cast<double>(capacityMilli);
  bool anyGpu = false;
  for (const TracePod& p : pods) anyGpu = anyGpu || p.gpuMilli > 0;
  if (static_cast<double>(total) < target && anyGpu && !byName.empty()) {
    // Terminates with probability 1 (a GPU pod is eventually drawn past the target); the cap
    // only guards against pathological inputs.
    const std::int64_t cap = 1000 * static_cast<std::int64_t>(byName.size()) + 1'000'000;
    for (std::int64_t draws = 0; draws < cap; ++draws) {
      const int idx = byName[static_cast<std::size_t>(rng.below(byName.size()))];
      const TracePod& p = podAt(idx);
      if (static_cast<double>(total + p.gpuMilli) > target) break;
      plan.order.push_back(idx);
      total += p.totalGpuMilli();
      ++plan.appended;
    }
  } else if (static_cast<double>(total) > target) {
    while (static_cast<double>(total) > target && !plan.order.empty()) {
      const auto j = static_cast<std::size_t>(rng.below(plan.order.size()));
      total -= podAt(plan.order[j]).totalGpuMilli();
      plan.order.erase(plan.order.begin() + static_cast<std::ptrdiff_t>(j));
      ++plan.removed;
    }
  }
  plan.arrivingGpuMilli = total;
}

ArrivalPlan ownArrivalPlan(const std::vector<TracePod>& pods,
                           const std::vector<model::NodeSpec>& nodes, double ratio,
                           std::uint64_t seed) {
  Rng rng(seed);
  ArrivalPlan plan;
  const std::vector<int> byName = podsByName(pods);
  plan.order = byName;
  rng.shuffle(plan.order);
  tuneWorkload(pods, byName, gpuCapacityMilli(nodes), ratio, rng, plan);
  std::vector<int> nodesByName(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) nodesByName[i] = static_cast<int>(i);
  std::sort(nodesByName.begin(), nodesByName.end(), [&](int a, int b) {
    return nodes[static_cast<std::size_t>(a)].name < nodes[static_cast<std::size_t>(b)].name;
  });
  std::vector<std::int64_t> perm(nodes.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
  rng.shuffle(perm);
  plan.ranks.assign(nodes.size(), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    plan.ranks[static_cast<std::size_t>(nodesByName[i])] = perm[i];
  }
  return plan;
}

}  // namespace tessera::sim
