// The artifact's five baselines (pkg/simulator/plugin/{random,dot_product,gpu_clustering,
// gpu_packing,best_fit}_score.go), with their integer arithmetic and floating-point order.
// All but Random score whole nodes: every option on a node gets the node's score, and the
// engine's gpuTieBreak=bestFit then picks the artifact's best-fit GPU on the winning node.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "sched/cluster_state.h"
#include "sched/plugins/artifact_internal.h"
#include "sched/plugins/support.h"

namespace tessera::sched::artifact {
namespace {

constexpr std::int64_t kMaxNodeScore = 100;

// Scores options node by node: `nodeScore(view)` runs once per run of consecutive options on
// the same node (the engine lists a node's options together), so the cost is per node.
template <typename NodeScore>
void scoreByNode(const DecisionContext& ctx, std::span<const Option> options,
                 std::span<std::int64_t> out, NodeViews& views, NodeScore&& nodeScore) {
  NodeId last = -1;
  std::int64_t score = 0;
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (options[i].node != last) {
      last = options[i].node;
      score = nodeScore(views.get(ctx.state, last));
    }
    out[i] = score;
  }
}

std::int64_t totalGpuMilli(const Needs& needs) {
  return std::int64_t{needs.computeMilli} * needs.gpuCount;
}

// ---- Random -------------------------------------------------------------------------------

// RandomScorePlugin: PreScore draws one feasible node uniformly (score 100, others 0); the
// GPU selector `random` draws a sharing pod's GPU uniformly among those that fit (the
// engine's options on that node), and gives a whole-GPU pod the lowest-index free GPUs
// (every option on the node scores 100; the engine's tie-break takes the lowest index).
class RandomScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ArtifactRandom";
  explicit RandomScore(std::uint64_t seed) : rng_(seed) {}

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    std::fill(out.begin(), out.end(), 0);
    if (options.empty()) return;
    // Distinct nodes in order of first appearance (a node's options need not be adjacent).
    if (seen_.size() < ctx.state.nodes().size()) seen_.resize(ctx.state.nodes().size(), 0);
    if (++stamp_ == 0) {
      std::fill(seen_.begin(), seen_.end(), 0);
      stamp_ = 1;
    }
    nodes_.clear();
    for (const Option& o : options) {
      auto& mark = seen_[static_cast<std::size_t>(o.node)];
      if (mark != stamp_) {
        mark = stamp_;
        nodes_.push_back(o.node);
      }
    }
    const NodeId chosen = nodes_[draw(nodes_.size())];
    if (!isSharingPod(ctx.needs)) {
      for (std::size_t i = 0; i < options.size(); ++i) {
        if (options[i].node == chosen) out[i] = kMaxNodeScore;
      }
      return;
    }
    std::size_t onNode = 0;
    for (const Option& o : options) onNode += o.node == chosen ? 1 : 0;
    std::size_t pick = draw(onNode);
    for (std::size_t i = 0; i < options.size(); ++i) {
      if (options[i].node != chosen) continue;
      if (pick-- == 0) {
        out[i] = kMaxNodeScore;
        return;
      }
    }
  }

 private:
  std::size_t draw(std::size_t n) const {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  mutable std::mt19937_64 rng_;
  mutable std::vector<std::uint32_t> seen_;
  mutable std::uint32_t stamp_ = 0;
  mutable std::vector<NodeId> nodes_;
};

// ---- DotProd ------------------------------------------------------------------------------

// `-dimext merge -norm max`: node vector (free CPU, free GPU milli), pod vector (CPU, k x g),
// both divided by (128 cores, 8 GPUs); score = trunc(100 (1 - dot / 2)).
class DotProdScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ArtifactDotProd";
  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    const Needs& needs = ctx.needs;
    const double cpuMax = static_cast<double>(kMaxSpecCpuMilli);
    const double gpuMax = static_cast<double>(kMaxSpecGpuMilli);
    const double podCpu = static_cast<double>(needs.cpuMilli) / cpuMax;
    const double podGpu = static_cast<double>(totalGpuMilli(needs)) / gpuMax;
    scoreByNode(ctx, options, out, views_, [&](const NodeView& v) -> std::int64_t {
      if (v.freeCpuMilli < needs.cpuMilli) return 0;  // no match group
      double dot = 0;
      dot += static_cast<double>(v.freeCpuMilli) / cpuMax * podCpu;
      dot += static_cast<double>(v.freeGpuMilliTotal) / gpuMax * podGpu;
      const double s = 1 - dot / 2;
      if (!(s > -1)) return 0;  // the artifact keeps its initial -1: MinNodeScore
      return static_cast<std::int64_t>(static_cast<double>(kMaxNodeScore) * s);
    });
  }

 private:
  mutable NodeViews views_;
};

// ---- GpuClustering ------------------------------------------------------------------------

// Tags: share-gpu (k = 1, g < 1000) or k-gpu. base = 25 (8000 - R) / 8000 in integers, plus 75
// if the node holds only this tag, 50 if this tag among others, 25 if no GPU pod, 0 if only
// other tags. CPU-only pods score 0 everywhere.
class GpuClusteringScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ArtifactGpuClustering";
  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    const Needs& needs = ctx.needs;
    if (needs.gpuCount == 0) {
      std::fill(out.begin(), out.end(), 0);
      return;
    }
    const int bit = isSharingPod(needs) ? 0 : needs.gpuCount;
    const std::uint32_t tag = bit < 32 ? std::uint32_t{1} << bit : 0;
    scoreByNode(ctx, options, out, views_, [&](const NodeView& v) -> std::int64_t {
      const std::int64_t base =
          kMaxNodeScore / 4 * (kMaxSpecGpuMilli - v.freeGpuMilliTotal) / kMaxSpecGpuMilli;
      if ((v.gpuPodTags & tag) != 0) {
        return base +
               (std::popcount(v.gpuPodTags) == 1 ? kMaxNodeScore * 3 / 4 : kMaxNodeScore * 2 / 4);
      }
      return base + (v.gpuPodTags == 0 ? kMaxNodeScore / 4 : 0);
    });
  }

 private:
  mutable NodeViews views_;
};

// ---- GpuPacking ---------------------------------------------------------------------------

// From high to low: use partly used GPUs, max(100 - floor(sum_i floor(r_i / 10) / 10), 50)
// over the GPUs it would use; use fully free GPUs of a used node, max(50 - #used, 33); an
// empty node, max(33 - #GPUs, #GPUs). The GPUs it would use: ascending free milli (stable),
// the first k that fit. CPU-only pods score 0.
class GpuPackingScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ArtifactGpuPacking";
  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    const Needs& needs = ctx.needs;
    if (needs.gpuCount == 0 || needs.computeMilli <= 0) {
      std::fill(out.begin(), out.end(), 0);
      return;
    }
    scoreByNode(ctx, options, out, views_, [&](const NodeView& v) { return nodeScore(v, needs); });
  }

 private:
  std::int64_t nodeScore(const NodeView& v, const Needs& needs) const {
    const auto gpus = static_cast<std::int64_t>(v.freeGpuMilli.size());
    const auto fullyFree = static_cast<std::int64_t>(
        std::count(v.freeGpuMilli.begin(), v.freeGpuMilli.end(), kArtifactMilliPerGpu));
    if (fullyFree == gpus) return std::max(kMaxNodeScore / 3 - fullyFree, fullyFree);
    sorted_.assign(v.freeGpuMilli.begin(), v.freeGpuMilli.end());
    std::sort(sorted_.begin(), sorted_.end());  // equal values are interchangeable here
    int need = needs.gpuCount;
    std::int64_t fullyFreeUsed = 0;
    std::int64_t freePercentOnUsed = 0;
    for (std::int32_t r : sorted_) {
      if (need == 0) break;
      if (needs.computeMilli > r) continue;
      --need;
      if (r == kArtifactMilliPerGpu) ++fullyFreeUsed;
      freePercentOnUsed += std::int64_t{r} * 100 / kArtifactMilliPerGpu;
    }
    if (need != 0) return 0;  // does not fit (the filters never let this through)
    if (fullyFreeUsed > 0) {
      return std::max(kMaxNodeScore / 2 - fullyFreeUsed, kMaxNodeScore / 3);
    }
    return std::max(kMaxNodeScore - freePercentOnUsed / 10, kMaxNodeScore / 2);
  }

  mutable NodeViews views_;
  mutable std::vector<std::int32_t> sorted_;
};

// ---- BestFit ------------------------------------------------------------------------------

// raw = trunc(100 (1 - [(c - c_p) / 128000 x 0.5 + (R - kg) / 8000 x 0.5])), then min-max
// normalised over the feasible nodes in integers, all equal -> 0 (the artifact's
// NormalizeScore, not normalizeMinMax, which maps all equal to 100).
class BestFitScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ArtifactBestFit";
  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    const Needs& needs = ctx.needs;
    const auto podCpu = static_cast<double>(needs.cpuMilli);
    const auto podGpu = static_cast<double>(totalGpuMilli(needs));
    scoreByNode(ctx, options, out, views_, [&](const NodeView& v) -> std::int64_t {
      const auto freeCpu = static_cast<double>(v.freeCpuMilli);
      const auto freeGpu = static_cast<double>(v.freeGpuMilliTotal);
      if (freeCpu < podCpu || freeGpu < podGpu) return 0;  // the artifact's error case
      double s = 0;
      s += (freeCpu - podCpu) / static_cast<double>(kMaxSpecCpuMilli) * 0.5;
      s += (freeGpu - podGpu) / static_cast<double>(kMaxSpecGpuMilli) * 0.5;
      return static_cast<std::int64_t>((1.0 - s) * static_cast<double>(kMaxNodeScore));
    });
  }
  void normalize(std::span<std::int64_t> scores) const override {
    if (scores.empty()) return;
    const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
    const std::int64_t lowest = *lo;
    const std::int64_t range = *hi - *lo;
    for (std::int64_t& s : scores) s = range == 0 ? 0 : (s - lowest) * kMaxNodeScore / range;
  }

 private:
  mutable NodeViews views_;
};

}  // namespace

Result<std::unique_ptr<ScorePlugin>> createRandom(const PluginArgs& args) {
  auto reader = ArgReader::open(RandomScore::kName, args, {"seed"});
  if (!reader) return fail(reader.error());
  auto seed = reader->integer("seed", 0, 0, std::numeric_limits<std::int64_t>::max());
  if (!seed) return fail(seed.error());
  return std::make_unique<RandomScore>(static_cast<std::uint64_t>(*seed));
}

Result<std::unique_ptr<ScorePlugin>> createDotProd(const PluginArgs& args) {
  return createWithoutArgs<DotProdScore, ScorePlugin>(args);
}

Result<std::unique_ptr<ScorePlugin>> createGpuClustering(const PluginArgs& args) {
  return createWithoutArgs<GpuClusteringScore, ScorePlugin>(args);
}

Result<std::unique_ptr<ScorePlugin>> createGpuPacking(const PluginArgs& args) {
  return createWithoutArgs<GpuPackingScore, ScorePlugin>(args);
}

Result<std::unique_ptr<ScorePlugin>> createBestFit(const PluginArgs& args) {
  return createWithoutArgs<BestFitScore, ScorePlugin>(args);
}

}  // namespace tessera::sched::artifact
