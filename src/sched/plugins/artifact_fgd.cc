// ArtifactFgd: the artifact's FGD score (pkg/simulator/plugin/fgd_score.go).
//
// score = trunc(100 sigma((F_n(M) - F_n'(M)) / 1000)), F the fragment measure
// (fgdNodeFragmentMilli), n' the node after the hypothetical placement: for a sharing pod one
// n' per GPU that fits (each option gets its GPU's score; ties go to the lowest GPU index
// under gpuTieBreak=index, as the artifact's reserve does); otherwise the node after the
// artifact's NodeResource.Sub (CPU, and the first k GPUs that fit in ascending free milli),
// the same score for every option on the node.
//
// Cost. Scoring reads, per option, one cached score. Behind it are two memos:
//   - per node and pod shape (CPU, g, k): the per-GPU scores, valid while the node's
//     generation stands. A placement changes one node, so a decision recomputes that node
//     for its shape, plus every node the first time it meets a shape in its current
//     generation; that is bounded by (node changes) x (distinct pod shapes) over a run.
//   - per canonical node state: F. F depends on free CPU only through the comparisons
//     c >= c_m with the workload's shapes, so the key holds the CPU's rank among the
//     shapes' distinct CPU figures instead of the CPU itself, plus the sorted free GPU milli
//     and the GPU type. Identical states across nodes, and hypothetical states that differ
//     only in CPU within one rank, share an entry.
// Slots are kept per pod shape in node order, so a decision walks them sequentially; on a hit
// it touches, per node, the node's generation, a small NodeCache and one 24-byte slot.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sched/cluster_state.h"
#include "sched/plugins/artifact_internal.h"
#include "sched/plugins/support.h"

namespace tessera::sched::artifact {
namespace {

// Nodes with more GPUs than this are scored without the memos (no such node in the trace).
constexpr std::size_t kMemoGpus = 16;
// Bounds on the memos for long-lived use: past these they start over.
constexpr std::size_t kMaxMemoStates = std::size_t{1} << 20;

struct StateKey {
  std::int16_t cpuRank = 0;
  std::int16_t gpuType = 0;
  std::int16_t gpus = 0;
  std::int16_t unused = 0;
  std::array<std::uint16_t, kMemoGpus> milli{};  // descending, zero-padded
  bool operator==(const StateKey&) const = default;
};
static_assert(sizeof(StateKey) == 40);

struct StateKeyHash {
  std::size_t operator()(const StateKey& key) const noexcept {
    std::array<std::uint64_t, sizeof(StateKey) / 8> words;
    std::memcpy(words.data(), &key, sizeof key);
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (std::uint64_t w : words) {
      h ^= w;
      h *= 0xff51afd7ed558ccdULL;
      h ^= h >> 33;
    }
    return static_cast<std::size_t>(h);
  }
};

// trunc(100 sigma(delta / 1000)), in the artifact's operation order.
std::int8_t fgdScore(double before, double after) {
  const double sigma = 1.0 / (1.0 + std::exp(-((before - after) / 1000)));
  return static_cast<std::int8_t>(static_cast<std::int64_t>(sigma * 100.0));
}

class FgdScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ArtifactFgd";

  explicit FgdScore(std::vector<TaskShape> workload) : workload_(std::move(workload)) {
    for (const TaskShape& m : workload_) cpuThresholds_.push_back(m.cpuMilli);
    std::sort(cpuThresholds_.begin(), cpuThresholds_.end());
    cpuThresholds_.erase(std::unique(cpuThresholds_.begin(), cpuThresholds_.end()),
                         cpuThresholds_.end());
  }

  std::string_view name() const override { return kName; }

  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    prepareFor(ctx.state);
    const ClusterState& state = ctx.state;
    const bool sharing = isSharingPod(ctx.needs);
    std::vector<Slot>& slots = slots_.forPod(ctx.needs, state.nodes().size());
    NodeId last = -1;
    const NodeCache* node = nullptr;
    const std::int8_t* scores = nullptr;
    for (std::size_t i = 0; i < options.size(); ++i) {
      const Option& o = options[i];
      if (o.node != last) {
        last = o.node;
        node = &nodeCache(state, last);
        scores = scoresFor(state, last, *node, slots, ctx.needs);
      }
      int gpu = 0;
      if (sharing && o.gpuCount > 0) {
        gpu = node->contiguous ? o.gpus[0] - node->firstGpu : state.gpu(o.gpus[0]).indexInNode;
      }
      out[i] = scores[gpu];
    }
  }

 private:
  // Per node: what every pod shape shares, for the node generation `generation`.
  struct NodeCache {
    std::uint64_t generation = 0;
    double fragmentMilli = 0;  // F_n(M) now
    GpuId firstGpu = -1;       // with `contiguous`: GPU index = id - firstGpu
    bool contiguous = true;
    bool memoised = true;  // at most kMemoGpus GPUs: its scores live in slots
  };
  // Per pod shape and node: the scores by GPU index, for the node generation `generation`.
  struct Slot {
    std::uint64_t generation = 0;
    std::array<std::int8_t, kMemoGpus> scores{};
  };

  // Resolves the workload's GPU types against the state's catalogue (once per catalogue; an
  // unknown name matches no node, as an unknown type string does in the artifact) and sizes
  // the per-node tables.
  void prepareFor(const ClusterState& state) const {
    const model::GpuCatalog& catalog = state.catalog();
    if (&catalog != catalog_ || catalog.size() != catalogSize_) {
      catalog_ = &catalog;
      catalogSize_ = catalog.size();
      resolved_ = artifact::matchShapeTypes(catalog, workload_);
      memo_.clear();
      nodes_.clear();
      slots_.clear();
    }
    if (memo_.size() > kMaxMemoStates) memo_.clear();
    if (nodes_.size() < state.nodes().size()) nodes_.resize(state.nodes().size());
  }

  const NodeCache& nodeCache(const ClusterState& state, NodeId node) const {
    NodeCache& cache = nodes_[static_cast<std::size_t>(node)];
    const std::uint64_t generation = state.node(node).generation;
    if (cache.generation != generation || generation == 0) {
      const NodeView& view = views_.get(state, node);
      cache.generation = generation;
      cache.fragmentMilli = fragment(view.freeCpuMilli, view.freeGpuMilli, view.gpuType);
      cache.firstGpu = view.firstGpu;
      cache.contiguous = view.contiguous;
      cache.memoised = view.freeGpuMilli.size() <= kMemoGpus;
    }
    return cache;
  }

  const std::int8_t* scoresFor(const ClusterState& state, NodeId node, const NodeCache& cache,
                               std::vector<Slot>& slots, const Needs& needs) const {
    if (!cache.memoised) {
      const NodeView& view = views_.get(state, node);
      uncached_.assign(view.freeGpuMilli.size(), 0);
      computeScores(view, cache.fragmentMilli, needs, uncached_);
      return uncached_.data();
    }
    Slot& slot = slots[static_cast<std::size_t>(node)];
    if (slot.generation != cache.generation) {
      computeScores(views_.get(state, node), cache.fragmentMilli, needs, slot.scores);
      slot.generation = cache.generation;
    }
    return slot.scores.data();
  }

  void computeScores(const NodeView& view, double before, const Needs& needs,
                     std::span<std::int8_t> scores) const {
    const std::int64_t cpuAfter = view.freeCpuMilli - needs.cpuMilli;
    const std::span<const std::int32_t> free(view.freeGpuMilli);
    after_.assign(free.begin(), free.end());
    if (isSharingPod(needs)) {
      for (std::size_t i = 0; i < free.size(); ++i) {
        if (free[i] < needs.computeMilli) {
          scores[i] = 0;  // no option here (the filters need g free); 0 keeps it deterministic
          continue;
        }
        // GPUs with the same free milli leave the same node behind.
        const auto same =
            std::find(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(i), free[i]);
        if (same != free.begin() + static_cast<std::ptrdiff_t>(i)) {
          scores[i] = scores[static_cast<std::size_t>(same - free.begin())];
          continue;
        }
        after_[i] = free[i] - needs.computeMilli;
        scores[i] = fgdScore(before, fragment(cpuAfter, after_, view.gpuType));
        after_[i] = free[i];
      }
      return;
    }
    // NodeResource.Sub: refuses (node unchanged) when CPU or the GPU count falls short;
    // otherwise takes the CPU and g from each of the first k GPUs that fit, in ascending
    // free milli. Only the multiset of free milli matters to F.
    double afterMilli = before;
    if (view.freeCpuMilli >= needs.cpuMilli && static_cast<int>(free.size()) >= needs.gpuCount) {
      std::sort(after_.begin(), after_.end());
      int need = needs.gpuCount;
      for (std::size_t i = 0; i < after_.size() && need > 0; ++i) {
        if (needs.computeMilli <= after_[i]) {
          after_[i] -= needs.computeMilli;
          --need;
        }
      }
      afterMilli = fragment(cpuAfter, after_, view.gpuType);
    }
    std::fill(scores.begin(), scores.end(), fgdScore(before, afterMilli));
  }

  // F of a node state, memoised by its canonical key.
  double fragment(std::int64_t cpuMilli, std::span<const std::int32_t> milli, int gpuType) const {
    if (milli.size() > kMemoGpus) return fgdNodeFragmentMilli(cpuMilli, milli, gpuType, resolved_);
    StateKey key;
    key.cpuRank = static_cast<std::int16_t>(
        std::upper_bound(cpuThresholds_.begin(), cpuThresholds_.end(), cpuMilli) -
        cpuThresholds_.begin());
    key.gpuType = static_cast<std::int16_t>(gpuType);
    key.gpus = static_cast<std::int16_t>(milli.size());
    for (std::size_t i = 0; i < milli.size(); ++i) {
      if (milli[i] < 0 || milli[i] > 0xffff) {
        return fgdNodeFragmentMilli(cpuMilli, milli, gpuType, resolved_);
      }
      // Insertion into descending order (at most kMemoGpus entries).
      auto r = static_cast<std::uint16_t>(milli[i]);
      std::size_t j = i;
      for (; j > 0 && key.milli[j - 1] < r; --j) key.milli[j] = key.milli[j - 1];
      key.milli[j] = r;
    }
    auto [it, inserted] = memo_.try_emplace(key, 0.0);
    if (inserted) it->second = fgdNodeFragmentMilli(cpuMilli, milli, gpuType, resolved_);
    return it->second;
  }

  std::vector<TaskShape> workload_;
  std::vector<std::int64_t> cpuThresholds_;  // distinct shape CPU figures, ascending
  // Memoised state; see the threading contract in artifact_policies.h.
  mutable const model::GpuCatalog* catalog_ = nullptr;
  mutable int catalogSize_ = -1;
  mutable std::vector<TaskShape> resolved_;
  mutable NodeViews views_;  // read only when a node or slot is recomputed
  mutable std::vector<NodeCache> nodes_;
  mutable PodShapeSlots<Slot> slots_;
  mutable std::unordered_map<StateKey, double, StateKeyHash> memo_;
  mutable std::vector<std::int32_t> after_;
  mutable std::vector<std::int8_t> uncached_;
};

}  // namespace

Result<std::unique_ptr<ScorePlugin>> createFgd(const PluginArgs& args) {
  auto reader = ArgReader::open(FgdScore::kName, args, {"workload"});
  if (!reader) return fail(reader.error());
  auto shapes = parseTaskShapes(args);
  if (!shapes) {
    return fail(Error::invalid(std::string(FgdScore::kName) + ": " + shapes.error().message));
  }
  return std::make_unique<FgdScore>(std::move(*shapes));
}

}  // namespace tessera::sched::artifact
