// PatternGuide (pattern_guide.h): the LP's duals, tight patterns and completion table.

#include "sched/plugins/pattern_guide.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "sched/packing_lp.h"

namespace tessera::sched {
namespace {

constexpr std::size_t kMilli = 1000;
// Count scale for shape weights (frequencies) in the LP: its solution depends only on the
// proportions.
constexpr double kCountScale = 1e6;
// Tight patterns: duals summing to at least 1 − this; at most kPatternLimit of them.
constexpr double kTightEps = 1e-6;
constexpr std::size_t kPatternLimit = 4096;

bool sharing(const TaskShape& m) {
  return m.gpus > 0 && m.gpuMilli > 0 && m.gpuMilli < 1000 && m.weight > 0;
}

}  // namespace

PatternGuide PatternGuide::build(std::span<const TaskShape> workload) {
  PatternGuide g;
  std::map<std::int32_t, std::int64_t> counts;
  g.minCpu_.assign(kMilli + 1, 0);
  std::vector<bool> seen(kMilli + 1, false);
  for (const TaskShape& m : workload) {
    if (!sharing(m)) continue;
    counts[m.gpuMilli] += std::llround(m.weight * kCountScale) * m.gpus;
    const auto i = static_cast<std::size_t>(m.gpuMilli);
    const std::int64_t cpu = std::max<std::int64_t>(m.cpuMilli, 0);
    g.minCpu_[i] = seen[i] ? std::min(g.minCpu_[i], cpu) : cpu;
    seen[i] = true;
  }
  auto lp = packingLowerBound(counts);
  if (counts.empty() || !lp || !lp->converged) return PatternGuide{};
  g.patterns_ = tightPatterns(*lp, kTightEps, kPatternLimit);
  if (g.patterns_.empty()) return PatternGuide{};
  g.dual_.assign(kMilli + 1, 0.0);
  for (const auto& [size, y] : lp->duals) g.dual_[static_cast<std::size_t>(size)] = y;

  // K(r, c): unbounded knapsack over (milli, cores), each cell also the best of its smaller
  // neighbours so that K is monotone in both.
  g.fill_.assign((kMilli + 1) * kCores, 0.0);
  for (std::size_t r = 0; r <= kMilli; ++r) {
    for (std::size_t c = 0; c < kCores; ++c) {
      double v = 0;
      if (r > 0) v = g.fill_[(r - 1) * kCores + c];
      if (c > 0) v = std::max(v, g.fill_[r * kCores + c - 1]);
      for (const auto& [size, y] : lp->duals) {
        const auto s = static_cast<std::size_t>(size);
        const auto cores = static_cast<std::size_t>((g.minCpu_[s] + 999) / 1000);
        if (s <= r && cores <= c) v = std::max(v, g.fill_[(r - s) * kCores + c - cores] + y);
      }
      g.fill_[r * kCores + c] = v;
    }
  }
  return g;
}

double PatternGuide::dual(std::int32_t milli) const {
  if (dual_.empty() || milli <= 0 || milli > static_cast<std::int32_t>(kMilli)) return 0;
  return dual_[static_cast<std::size_t>(milli)];
}

double PatternGuide::reducedCost(std::span<const std::int32_t> contents,
                                 std::int64_t cpuMilli) const {
  if (empty()) return 0;
  double value = 0;
  std::int64_t level = 0;
  for (std::int32_t m : contents) {
    value += dual(m);
    level += m;
  }
  const auto r = static_cast<std::size_t>(std::clamp<std::int64_t>(1000 - level, 0, 1000));
  const auto c = static_cast<std::size_t>(
      std::clamp<std::int64_t>(cpuMilli / 1000, 0, static_cast<std::int64_t>(kCores) - 1));
  return 1 - value - fill_[r * kCores + c];
}

std::int64_t PatternGuide::restCpu(const std::vector<std::int32_t>& pattern,
                                   std::span<const std::int32_t> contents) const {
  std::int64_t need = 0;
  std::size_t c = 0;
  for (std::int32_t item : pattern) {
    if (c < contents.size() && contents[c] == item) {
      ++c;
      continue;
    }
    need += minCpu_[static_cast<std::size_t>(item)];
  }
  return need;
}

PatternGuide::Class PatternGuide::placementClass(std::span<const std::int32_t> after, bool wasEmpty,
                                                 std::int64_t cpuAfter) const {
  bool partial = false;
  for (const auto& p : patterns_) {
    if (p.size() < after.size() || !std::includes(p.begin(), p.end(), after.begin(), after.end())) {
      continue;
    }
    if (p.size() == after.size()) return kCompletes;
    partial = partial || restCpu(p, after) <= cpuAfter;
  }
  if (!partial) return kOffPattern;
  return wasEmpty ? kStarts : kExtends;
}

std::int64_t PatternGuide::completionCpu(std::span<const std::int32_t> contents) const {
  if (contents.empty()) return 0;
  std::int64_t best = -1;
  for (const auto& p : patterns_) {
    if (p.size() < contents.size() ||
        !std::includes(p.begin(), p.end(), contents.begin(), contents.end())) {
      continue;
    }
    if (p.size() == contents.size()) return 0;
    const std::int64_t need = restCpu(p, contents);
    if (best < 0 || need < best) best = need;
  }
  return std::max<std::int64_t>(best, 0);
}

}  // namespace tessera::sched
