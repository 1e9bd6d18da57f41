// PackingGradient (packing_gradient.h): usable-capacity gradient + stranded GPU + type
// pressure, memoised per node generation and pod shape.
//
// Cost model of one decision: per node with options, one generation check (NodeCache) and,
// for pods with at most one GPU, one memo slot per pod shape holding the raw score of every
// GPU choice; per option, one table read. When a node changed, its per-shape instance counts
// are recounted once (O(|workload| × GPUs)); a slot is refilled in O(|workload|) per distinct
// GPU choice, since a choice changes one GPU and the node's CPU. Divisions by the shapes'
// CPU and milli figures are multiplications by precomputed reciprocals.

#include "sched/plugins/packing_gradient.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/cluster_state.h"
#include "sched/plugins/artifact_internal.h"
#include "sched/plugins/pattern_guide.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

// Nodes with more GPUs than this are scored without the per-shape memo.
constexpr std::size_t kMemoGpus = 8;
// Raw score units per milli-GPU of cost.
constexpr double kRawPerMilli = 1000.0;

using artifact::typeAccepts;

// usable_m of one shape (see the header), in milli-GPU. The reference the memoised paths
// reproduce bit for bit.
double shapeUsable(const TaskShape& m, std::int64_t freeCpuMilli,
                   std::span<const std::int32_t> freeGpuMilli, int gpuType) {
  if (m.gpus <= 0 || m.gpuMilli <= 0 || !typeAccepts(m, gpuType)) return 0;
  std::int64_t instances = 0;
  if (m.gpus == 1) {
    for (std::int32_t r : freeGpuMilli) instances += std::max<std::int32_t>(r, 0) / m.gpuMilli;
  } else {
    std::int64_t fitting = 0;
    for (std::int32_t r : freeGpuMilli) fitting += r >= m.gpuMilli ? 1 : 0;
    instances = fitting / m.gpus;
  }
  if (m.cpuMilli > 0) {
    instances = std::min(instances, std::max<std::int64_t>(freeCpuMilli, 0) / m.cpuMilli);
  }
  return static_cast<double>(instances) * m.gpus * m.gpuMilli;
}

// floor(a / d) for a >= 0 by one multiplication with ceil(2^64 / d): exact for a, d < 2^32
// (the error a / 2^64 stays below 1 / d); larger values divide.
class Divisor {
 public:
  __extension__ using Wide = unsigned __int128;

  Divisor() = default;
  explicit Divisor(std::int64_t d) : d_(d > 0 ? d : 1) {
    const Wide one = 1;
    reciprocal_ = ((one << 64) + static_cast<Wide>(d_) - 1) / static_cast<Wide>(d_);
  }
  std::int64_t divide(std::int64_t a) const {
    if (a <= 0) return 0;
    if (a < kLimit && d_ < kLimit) {
      return static_cast<std::int64_t>((static_cast<Wide>(a) * reciprocal_) >> 64);
    }
    return a / d_;
  }

 private:
  static constexpr std::int64_t kLimit = std::int64_t{1} << 32;
  std::int64_t d_ = 1;
  Wide reciprocal_ = 0;
};

// One GPU of a hypothetical placement: its free milli before and after.
struct GpuChange {
  std::int32_t before = 0;
  std::int32_t after = 0;
};

class PackingGradientScore final : public ScorePlugin {
 public:
  PackingGradientScore(std::vector<TaskShape> workload, PackingGradientWeights weights)
      : workload_(std::move(workload)), weights_(weights) {
    if (weights_.lpWaste != 0 || weights_.patternOrder != 0 || weights_.completionReserve != 0) {
      guide_ = PatternGuide::build(workload_);
    }
    double cpu = 0;
    double gpu = 0;
    for (const TaskShape& m : workload_) {
      if (m.gpus <= 0 || m.gpuMilli <= 0) continue;
      cpu += m.weight * static_cast<double>(m.cpuMilli);
      gpu += m.weight * m.gpus * m.gpuMilli;
      typed_ = typed_ || !m.gpuTypes.empty();
    }
    cpuPerGpuMilli_ = gpu > 0 ? weights_.cpuPerGpuScale * cpu / gpu : 0;
    demandShare_.assign(workload_.size(), 0);
    for (std::size_t i = 0; i < workload_.size(); ++i) {
      const TaskShape& m = workload_[i];
      if (gpu > 0 && m.gpus > 0 && m.gpuMilli > 0) {
        demandShare_[i] = m.weight * m.gpus * m.gpuMilli / gpu;
      }
    }
  }

  std::string_view name() const override { return kPackingGradientName; }

  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override {
    if (options.empty()) return;
    const ClusterState& state = ctx.state;
    const Needs& needs = ctx.needs;
    prepareFor(state);
    const bool pressure = typed_ && weights_.typePressure != 0 && needs.gpuCount > 0;
    if (pressure) {
      computePressure(state);
      const double podMilli =
          static_cast<double>(std::int64_t{needs.computeMilli} * needs.gpuCount);
      pressureRaw_.resize(pressure_.size());
      for (std::size_t t = 0; t < pressure_.size(); ++t) {
        pressureRaw_[t] = toRaw(weights_.typePressure * pressure_[t] * podMilli);
      }
    }
    // One GPU or none, shared: the engine's options for trace pods; their raw scores are
    // memoised per node and GPU index. Anything else is computed directly.
    const bool memoShape = needs.gpuCount <= 1;
    std::vector<Slot>* slots = memoShape ? &slots_.forPod(needs, state.nodes().size()) : nullptr;
    // The engine lists a node's options together: per node, one cache lookup, one memo slot
    // and one pressure value; per option, one table read.
    NodeId last = -1;
    const NodeCache* node = nullptr;
    const std::int32_t* raws = nullptr;
    std::int64_t nodePressure = 0;
    for (std::size_t i = 0; i < options.size(); ++i) {
      const Option& o = options[i];
      if (o.node != last) {
        last = o.node;
        node = &nodeCache(state, last);
        raws = memoShape && node->memoised ? slotFor(state, last, *node, *slots, needs) : nullptr;
        nodePressure = pressure && node->gpuType >= 0
                           ? pressureRaw_[static_cast<std::size_t>(node->gpuType)]
                           : 0;
      }
      if (raws != nullptr && o.gpuCount == needs.gpuCount) {
        if (o.gpuCount == 0) {
          out[i] = raws[0];
          continue;
        }
        const auto gpu = static_cast<std::size_t>(gpuIndex(state, *node, o.gpus[0]));
        if (gpu < node->gpus && o.mode == model::SharingMode::kShared) {
          out[i] = std::int64_t{raws[gpu]} + nodePressure;
          continue;
        }
      }
      std::int64_t taken = 0;
      out[i] = toRaw(directCost(ctx, *node, o, taken));
      if (pressure && node->gpuType >= 0) {
        out[i] += toRaw(weights_.typePressure * pressure_[static_cast<std::size_t>(node->gpuType)] *
                        static_cast<double>(taken));
      }
    }
  }

  // The best option gets 100, one δ raw units (δ / 1000 milli-GPU) below it 100 − δ: the
  // argmax is the plugin's own, at full resolution.
  void normalize(std::span<std::int64_t> scores) const override {
    if (scores.empty()) return;
    std::int64_t best = scores[0];
    for (const std::int64_t s : scores) best = std::max(best, s);  // a plain loop vectorises
    for (std::int64_t& s : scores) s = std::max<std::int64_t>(s - best + 100, 0);
  }

 private:
  // A shape of the workload that a node type can serve, in workload order.
  struct ActiveShape {
    Divisor cpu;  // by cpuMilli (unused when cpuMilli is 0)
    Divisor milli;
    std::int64_t cpuMilli = 0;
    std::int32_t gpuMilli = 0;
    int gpus = 0;
    double weight = 0;
  };
  // Per node, for the generation `generation`: what every pod shape shares.
  struct NodeCache {
    std::uint64_t generation = 0;
    double usable = 0;    // U(node) now
    double stranded = 0;  // S(node) now
    std::int64_t freeMilli = 0;
    int gpuType = -1;
    std::size_t gpus = 0;
    GpuId firstGpu = -1;  // with `contiguous`: GPU index = id - firstGpu
    bool contiguous = true;
    bool memoised = true;  // at most kMemoGpus GPUs
    // Per active shape of the node's type: its GPU instances (k = 1) or the GPUs that fit
    // it (k > 1) now.
    std::vector<std::int64_t> counts;
    // With the pattern guide, per GPU index: the pods' milli (ascending), reducedCost and
    // completionCpu now; and N(node), the sum of the latter.
    std::vector<std::vector<std::int32_t>> contents;
    std::vector<double> reduced;
    std::vector<std::int64_t> completion;
    std::int64_t completionSum = 0;
    std::int64_t freeCpu = 0;
  };
  // Per pod shape and node: the raw score before type pressure, by GPU index (index 0 for a
  // CPU-only pod).
  struct Slot {
    std::uint64_t generation = 0;
    std::array<std::int32_t, kMemoGpus> raw{};
  };

  // Clamped so that a memo slot holds it in 32 bits (±2·10^6 milli-GPU of cost, far beyond
  // any node's capacity times the weights).
  static std::int32_t toRaw(double cost) {
    const double raw = std::floor(-cost * kRawPerMilli + 0.5);
    return static_cast<std::int32_t>(std::clamp(raw, -2.0e9, 2.0e9));
  }

  static int gpuIndex(const ClusterState& state, const NodeCache& node, GpuId gpu) {
    if (node.contiguous) return gpu - node.firstGpu;
    return state.gpu(gpu).indexInNode;
  }

  double strandedOf(std::int64_t freeCpuMilli, std::int64_t freeGpuMilli) const {
    if (!(cpuPerGpuMilli_ > 0)) return 0;
    const double supported =
        static_cast<double>(std::max<std::int64_t>(freeCpuMilli, 0)) / cpuPerGpuMilli_;
    return std::max(0.0, static_cast<double>(freeGpuMilli) - supported);
  }

  void prepareFor(const ClusterState& state) const {
    const model::GpuCatalog& catalog = state.catalog();
    if (&catalog != catalog_ || catalog.size() != catalogSize_) {
      catalog_ = &catalog;
      catalogSize_ = catalog.size();
      resolved_ = artifact::matchShapeTypes(catalog, workload_);
      // The shapes that count on a node of each type, in workload order (so that sums over
      // them equal usableCapacityMilli's); the last list, empty, is for nodes without GPUs.
      active_.assign(static_cast<std::size_t>(catalogSize_) + 1, {});
      for (int t = 0; t < catalogSize_; ++t) {
        for (const TaskShape& m : resolved_) {
          if (m.gpus <= 0 || m.gpuMilli <= 0 || !(m.weight > 0) || !typeAccepts(m, t)) continue;
          active_[static_cast<std::size_t>(t)].push_back(
              {Divisor(m.cpuMilli), Divisor(m.gpuMilli), m.cpuMilli, m.gpuMilli, m.gpus, m.weight});
        }
      }
      nodes_.clear();
      slots_.clear();
    }
    if (nodes_.size() < state.nodes().size()) nodes_.resize(state.nodes().size());
  }

  const std::vector<ActiveShape>& activeFor(int gpuType) const {
    if (gpuType < 0 || gpuType >= catalogSize_) return active_.back();
    return active_[static_cast<std::size_t>(gpuType)];
  }

  // ρ_T for every type T (see the header).
  void computePressure(const ClusterState& state) const {
    const auto types = static_cast<std::size_t>(std::max(catalogSize_, 0));
    freeByType_.assign(types, 0);
    pressure_.assign(types, 0);
    double total = 0;
    for (NodeId n = 0; n < static_cast<NodeId>(state.nodes().size()); ++n) {
      if (state.node(n).removed) continue;
      const NodeCache& node = nodeCache(state, n);
      if (node.gpuType < 0 || static_cast<std::size_t>(node.gpuType) >= types) continue;
      const auto free = static_cast<double>(std::max<std::int64_t>(node.freeMilli, 0));
      freeByType_[static_cast<std::size_t>(node.gpuType)] += free;
      total += free;
    }
    for (std::size_t i = 0; i < resolved_.size(); ++i) {
      const TaskShape& m = resolved_[i];
      if (m.gpuTypes.empty() || demandShare_[i] <= 0) continue;
      double eligible = 0;
      for (int t : m.gpuTypeIndices) eligible += freeByType_[static_cast<std::size_t>(t)];
      if (eligible <= 0) continue;
      for (int t : m.gpuTypeIndices) {
        pressure_[static_cast<std::size_t>(t)] += demandShare_[i] * total / eligible;
      }
    }
  }

  // Per active shape: the instances `freeCpuMilli` allows (max when the shape needs none).
  void cpuInstances(const std::vector<ActiveShape>& active, std::int64_t freeCpuMilli) const {
    cpuInstances_.resize(active.size());
    for (std::size_t j = 0; j < active.size(); ++j) {
      cpuInstances_[j] = active[j].cpuMilli > 0 ? active[j].cpu.divide(freeCpuMilli)
                                                : std::numeric_limits<std::int64_t>::max();
    }
  }

  // U of the node after `changes` (GPUs whose free milli changes) with CPU instances in
  // cpuInstances_: the same per-shape values, summed in the same order, as
  // usableCapacityMilli.
  double usableAfter(const std::vector<ActiveShape>& active, const NodeCache& node,
                     std::span<const GpuChange> changes) const {
    double usable = 0;
    for (std::size_t j = 0; j < active.size(); ++j) {
      const ActiveShape& shape = active[j];
      std::int64_t instances = node.counts[j];
      for (const GpuChange& c : changes) {
        if (shape.gpus == 1) {
          instances += shape.milli.divide(c.after) - shape.milli.divide(c.before);
        } else {
          instances += (c.after >= shape.gpuMilli ? 1 : 0) - (c.before >= shape.gpuMilli ? 1 : 0);
        }
      }
      if (shape.gpus > 1) instances /= shape.gpus;
      instances = std::min(instances, cpuInstances_[j]);
      usable += shape.weight * (static_cast<double>(instances) * shape.gpus * shape.gpuMilli);
    }
    return usable;
  }

  // Cost of the node after `changes` and the CPU in cpuInstances_ (`cpuAfter`).
  double costAfter(const std::vector<ActiveShape>& active, const NodeCache& node,
                   std::int64_t cpuAfter, std::span<const GpuChange> changes) const {
    double cost = node.usable - usableAfter(active, node, changes);
    if (weights_.stranding != 0) {
      std::int64_t freeAfter = node.freeMilli;
      for (const GpuChange& c : changes) {
        freeAfter += std::max<std::int32_t>(c.after, 0) - std::max<std::int32_t>(c.before, 0);
      }
      cost += weights_.stranding * (strandedOf(cpuAfter, freeAfter) - node.stranded);
    }
    return cost;
  }

  // The hit path is inline; refreshNode and fillSlot are kept out of line.
  const NodeCache& nodeCache(const ClusterState& state, NodeId node) const {
    NodeCache& cache = nodes_[static_cast<std::size_t>(node)];
    const std::uint64_t generation = state.node(node).generation;
    if (cache.generation != generation || generation == 0) refreshNode(state, node, cache);
    return cache;
  }

  [[gnu::noinline]] void refreshNode(const ClusterState& state, NodeId node,
                                     NodeCache& cache) const {
    const std::uint64_t generation = state.node(node).generation;
    const artifact::NodeView& view = views_.get(state, node);
    cache.generation = generation;
    cache.gpuType = view.gpuType;
    cache.gpus = view.freeGpuMilli.size();
    cache.firstGpu = view.firstGpu;
    cache.contiguous = view.contiguous;
    cache.memoised = view.freeGpuMilli.size() <= kMemoGpus;
    cache.freeMilli = 0;
    for (std::int32_t r : view.freeGpuMilli) cache.freeMilli += std::max<std::int32_t>(r, 0);
    const std::vector<ActiveShape>& active = activeFor(view.gpuType);
    cache.counts.assign(active.size(), 0);
    for (std::size_t j = 0; j < active.size(); ++j) {
      const ActiveShape& shape = active[j];
      std::int64_t count = 0;
      for (std::int32_t r : view.freeGpuMilli) {
        count += shape.gpus == 1 ? shape.milli.divide(r) : (r >= shape.gpuMilli ? 1 : 0);
      }
      cache.counts[j] = count;
    }
    cpuInstances(active, view.freeCpuMilli);
    cache.usable = usableAfter(active, cache, {});
    cache.stranded = strandedOf(view.freeCpuMilli, cache.freeMilli);
    cache.freeCpu = view.freeCpuMilli;
    if (!guide_.empty()) refreshPatterns(state, node, cache);
  }

  // The pattern guide's per-GPU view of a node (NodeCache::contents and what follows).
  void refreshPatterns(const ClusterState& state, NodeId node, NodeCache& cache) const {
    const auto& gpus = state.node(node).gpuIds;
    cache.contents.resize(gpus.size());
    cache.reduced.resize(gpus.size());
    cache.completion.resize(gpus.size());
    cache.completionSum = 0;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      std::vector<std::int32_t>& pods = cache.contents[i];
      pods.clear();
      for (ReplicaId r : state.gpu(gpus[i]).replicas) {
        if (state.replica(r).removed) continue;
        for (const GpuAssignment& a : state.replica(r).placement.gpus) {
          if (a.gpu == gpus[i]) pods.push_back(a.computeMilli);
        }
      }
      std::sort(pods.begin(), pods.end());
      cache.reduced[i] = guide_.reducedCost(pods, cache.freeCpu);
      cache.completion[i] = guide_.completionCpu(pods);
      cache.completionSum += cache.completion[i];
    }
  }

  // max(0, need − cpu) / κ: CPU that open patterns lack, as GPU milli.
  double shortfall(std::int64_t need, std::int64_t cpu) const {
    if (!(cpuPerGpuMilli_ > 0)) return 0;
    const std::int64_t lack = need - std::max<std::int64_t>(cpu, 0);
    return lack > 0 ? static_cast<double>(lack) / cpuPerGpuMilli_ : 0;
  }

  // Terms 4 and 5 for a pod of `milli` on GPU index `gpu`, the node keeping `cpuAfter`;
  // `after` gets the GPU's pods with it.
  double patternTerms(const NodeCache& cache, std::size_t gpu, std::int32_t milli,
                      std::int64_t cpuAfter, std::vector<std::int32_t>& after) const {
    const std::vector<std::int32_t>& before = cache.contents[gpu];
    after.assign(before.begin(), before.end());
    after.insert(std::upper_bound(after.begin(), after.end(), milli), milli);
    const double waste = guide_.reducedCost(after, cpuAfter) - cache.reduced[gpu];
    double cost = weights_.lpWaste * 1000 * waste;
    if (milli < 1000) {
      cost += weights_.patternOrder *
              static_cast<int>(guide_.placementClass(after, before.empty(), cpuAfter));
    }
    return cost;
  }

  // Term 6 when GPU index `gpu` (or none, -1) gets a pod whose pods are then `after`.
  double reserveTerm(const NodeCache& cache, std::ptrdiff_t gpu,
                     std::span<const std::int32_t> after, std::int64_t cpuAfter) const {
    if (weights_.completionReserve == 0) return 0;
    std::int64_t need = cache.completionSum;
    if (gpu >= 0) {
      need += guide_.completionCpu(after) - cache.completion[static_cast<std::size_t>(gpu)];
    }
    return weights_.completionReserve *
           (shortfall(need, cpuAfter) - shortfall(cache.completionSum, cache.freeCpu));
  }

  // The raw scores of every GPU choice on a node (index 0 for a CPU-only pod).
  const std::int32_t* slotFor(const ClusterState& state, NodeId node, const NodeCache& cache,
                              std::vector<Slot>& slots, const Needs& needs) const {
    Slot& slot = slots[static_cast<std::size_t>(node)];
    if (slot.generation != cache.generation || cache.generation == 0) {
      fillSlot(state, node, cache, slot, needs);
    }
    return slot.raw.data();
  }

  [[gnu::noinline]] void fillSlot(const ClusterState& state, NodeId node, const NodeCache& cache,
                                  Slot& slot, const Needs& needs) const {
    const artifact::NodeView& view = views_.get(state, node);
    const std::vector<ActiveShape>& active = activeFor(view.gpuType);
    const std::int64_t cpuAfter = view.freeCpuMilli - needs.cpuMilli;
    cpuInstances(active, cpuAfter);
    const std::span<const std::int32_t> free(view.freeGpuMilli);
    const bool guided = !guide_.empty();
    if (needs.gpuCount == 0) {
      double cost = costAfter(active, cache, cpuAfter, {});
      if (guided) cost += reserveTerm(cache, -1, {}, cpuAfter);
      slot.raw[0] = toRaw(cost);
    } else {
      for (std::size_t i = 0; i < free.size(); ++i) {
        // GPUs with the same free milli leave the same node behind (without the guide,
        // which also looks at the pods on the GPU).
        const auto same =
            std::find(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(i), free[i]);
        if (!guided && same != free.begin() + static_cast<std::ptrdiff_t>(i)) {
          slot.raw[i] = slot.raw[static_cast<std::size_t>(same - free.begin())];
          continue;
        }
        const GpuChange change{free[i], std::max(0, free[i] - needs.computeMilli)};
        double cost = costAfter(active, cache, cpuAfter, {&change, 1});
        if (guided && i < cache.contents.size()) {
          cost += patternTerms(cache, i, needs.computeMilli, cpuAfter, contents_);
          const bool shares = needs.computeMilli < 1000;
          cost += reserveTerm(cache, shares ? static_cast<std::ptrdiff_t>(i) : -1, contents_,
                              cpuAfter);
        }
        slot.raw[i] = toRaw(cost);
      }
    }
    slot.generation = cache.generation;
  }

  // Any option, from the GPUs it names and what it books on them; `taken` gets the compute
  // it books in total.
  double directCost(const DecisionContext& ctx, const NodeCache& cache, const Option& o,
                    std::int64_t& taken) const {
    const ClusterState& state = ctx.state;
    const artifact::NodeView& view = views_.get(state, o.node);
    after_.assign(view.freeGpuMilli.begin(), view.freeGpuMilli.end());
    taken = 0;
    for (GpuId g : optionGpus(o)) {
      const std::int32_t milli = o.mode == model::SharingMode::kShared
                                     ? ctx.needs.computeMilli
                                     : computeTakenMilli(ctx, o, g);
      taken += milli;
      const int index = gpuIndex(state, cache, g);
      if (index < 0 || static_cast<std::size_t>(index) >= after_.size()) continue;
      auto& r = after_[static_cast<std::size_t>(index)];
      r = std::max(0, r - milli);
    }
    changes_.clear();
    for (std::size_t i = 0; i < after_.size(); ++i) {
      if (after_[i] != view.freeGpuMilli[i]) changes_.push_back({view.freeGpuMilli[i], after_[i]});
    }
    const std::vector<ActiveShape>& active = activeFor(view.gpuType);
    const std::int64_t cpuAfter = view.freeCpuMilli - ctx.needs.cpuMilli;
    cpuInstances(active, cpuAfter);
    double cost = costAfter(active, cache, cpuAfter, changes_);
    if (guide_.empty()) return cost;
    // Terms 4-6 as fillSlot computes them: 4 and 5 for a pod on one shared GPU, 6 for all.
    std::ptrdiff_t gpu = -1;
    contents_.clear();
    if (o.mode == model::SharingMode::kShared && o.gpuCount == 1) {
      const int index = gpuIndex(state, cache, optionGpus(o)[0]);
      if (index >= 0 && static_cast<std::size_t>(index) < cache.contents.size()) {
        cost += patternTerms(cache, static_cast<std::size_t>(index), ctx.needs.computeMilli,
                             cpuAfter, contents_);
        if (ctx.needs.computeMilli < 1000) gpu = index;
      }
    }
    return cost + reserveTerm(cache, gpu, contents_, cpuAfter);
  }

  std::vector<TaskShape> workload_;
  PackingGradientWeights weights_;
  bool typed_ = false;
  double cpuPerGpuMilli_ = 0;        // κ
  std::vector<double> demandShare_;  // d_m, parallel to workload_
  // Memoised state; see the threading contract in the header.
  mutable const model::GpuCatalog* catalog_ = nullptr;
  mutable int catalogSize_ = -1;
  mutable std::vector<TaskShape> resolved_;
  mutable std::vector<std::vector<ActiveShape>> active_;  // per type; last: no GPUs
  mutable artifact::NodeViews views_;
  mutable std::vector<NodeCache> nodes_;
  mutable artifact::PodShapeSlots<Slot> slots_;
  mutable std::vector<double> freeByType_;
  mutable std::vector<double> pressure_;
  mutable std::vector<std::int64_t> pressureRaw_;  // per type, for a pod of this decision
  mutable std::vector<std::int64_t> cpuInstances_;
  mutable std::vector<std::int32_t> after_;
  mutable std::vector<GpuChange> changes_;
  PatternGuide guide_;  // empty when terms 4-6 are off or the workload has no sharing shape
  mutable std::vector<std::int32_t> contents_;
};

}  // namespace

double usableCapacityMilli(std::int64_t freeCpuMilli, std::span<const std::int32_t> freeGpuMilli,
                           int gpuType, std::span<const TaskShape> workload) {
  double sum = 0;
  for (const TaskShape& m : workload) {
    if (!(m.weight > 0)) continue;
    sum += m.weight * shapeUsable(m, freeCpuMilli, freeGpuMilli, gpuType);
  }
  return sum;
}

double strandedGpuMilli(std::int64_t freeCpuMilli, std::span<const std::int32_t> freeGpuMilli,
                        double cpuPerGpuMilli) {
  if (!(cpuPerGpuMilli > 0)) return 0;
  std::int64_t free = 0;
  for (std::int32_t r : freeGpuMilli) free += std::max<std::int32_t>(r, 0);
  const double supported =
      static_cast<double>(std::max<std::int64_t>(freeCpuMilli, 0)) / cpuPerGpuMilli;
  return std::max(0.0, static_cast<double>(free) - supported);
}

Result<std::unique_ptr<ScorePlugin>> createPackingGradient(const PluginArgs& args) {
  const std::string name(kPackingGradientName);
  auto reader = ArgReader::open(name, args,
                                {"workload", "stranding", "cpuPerGpuScale", "typePressure",
                                 "lpWaste", "patternOrder", "completionReserve"});
  if (!reader) return fail(reader.error());
  const PluginArgs* list = reader->find("workload");
  if (list == nullptr) return fail(Error::invalid(name + ": 'workload' is required"));
  auto shapes = parseTaskShapes(PluginArgs{{"workload", *list}});
  if (!shapes) return fail(Error::invalid(name + ": " + shapes.error().message));
  PackingGradientWeights w;
  auto stranding = reader->number("stranding", w.stranding, 0, 1e6);
  if (!stranding) return fail(stranding.error());
  auto scale = reader->number("cpuPerGpuScale", w.cpuPerGpuScale, 1e-6, 1e6);
  if (!scale) return fail(scale.error());
  auto pressure = reader->number("typePressure", w.typePressure, 0, 1e6);
  if (!pressure) return fail(pressure.error());
  w.stranding = *stranding;
  w.cpuPerGpuScale = *scale;
  w.typePressure = *pressure;
  // Up to 1000: 1000 × a reduced cost of 1 stays inside the memo's ±2·10^6 milli-GPU.
  auto lpWaste = reader->number("lpWaste", w.lpWaste, 0, 1000);
  if (!lpWaste) return fail(lpWaste.error());
  // Bounded so that class 3 and a node's whole shortfall stay inside the memo as well.
  auto order = reader->number("patternOrder", w.patternOrder, 0, 1e5);
  if (!order) return fail(order.error());
  auto reserve = reader->number("completionReserve", w.completionReserve, 0, 100);
  if (!reserve) return fail(reserve.error());
  w.lpWaste = *lpWaste;
  w.patternOrder = *order;
  w.completionReserve = *reserve;
  return std::make_unique<PackingGradientScore>(std::move(*shapes), w);
}

}  // namespace tessera::sched
