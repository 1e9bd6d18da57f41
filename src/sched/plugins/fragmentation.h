#pragma once
// Fragmentation-gradient scoring for inference replicas.
//
// The idea is FGD (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
// with Fragmentation Gradient Descent", USENIX ATC '23): measure how much free GPU capacity
// the expected workload could not use, and place each task where that measure grows least.
// FGD works in GPU compute (milli-GPUs) per node with CPU-only and GPU-type cases; for LLM
// inference the scarce resource is GPU memory, so here:
//
//   - a shape m is a per-GPU need (memoryMib, computeMilli) with a weight p_m;
//   - the fragment of a GPU for m is the GPU's free memory (MiB) when m cannot fit on it
//     (memory or compute; on a MIG GPU "fit" means a free or creatable instance), else 0;
//   - F(gpu) = Σ_m p_m · fragment_m(gpu);
//   - score(option) = -Σ over the option's GPUs of (F_after - F_before), min-max normalised,
//     so the option that increases fragmentation least (or decreases it most) wins.
// Unlike FGD's logistic squashing into 0..100 (which quantises into coarse, tie-prone bins),
// the raw integer gradient is normalised linearly over the batch.
//
// The mix comes from the `workload` argument, or, when absent, from the cluster itself: the
// per-GPU shapes of every replica placed now (memory = raw estimate × the state's safety
// factor, compute as booked), weighted by count, keeping the most common shapes that cover
// 95 % of replicas (FGD's "typical pods" threshold, at most 64 shapes), plus the request
// being placed with weight 1.
//
// The derived mix is kept per node and refreshed only for nodes whose generation changed
// (NodeRecord::generation never repeats, even across copies of a state), so a decision
// costs one generation comparison per node plus the replicas of the nodes that changed
// since the previous call, and the scores stay a function of the state and the request,
// never of what the plugin saw before.
//
// Cost per option GPU: two fit queries, each two binary searches over the mix's distinct
// memory and compute values and one table read. No allocation once warm.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "sched/plugin.h"

namespace tessera::sched {

class FragmentationScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "Fragmentation";

  // One entry of the expected workload. memoryMib is per GPU, as the memory-fit filter sees
  // it (after the safety factor); gpus == 0 marks a CPU-only shape, which is ignored (a
  // per-GPU fragment does not depend on where CPU-only work goes).
  struct Shape {
    std::int64_t memoryMib = 0;
    std::int32_t computeMilli = 0;
    int gpus = 1;
    double weight = 1;
  };

  // args: {workload: [{memoryMib, computeMilli = 0, gpus = 1, weight = 1}, ...]} (optional).
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);
  // An empty workload means "derive the mix from the cluster".
  explicit FragmentationScore(std::vector<Shape> workload);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;
  void normalize(std::span<std::int64_t> scores) const override;

  // F(gpu) for the current decision's mix, in MiB × weight units (weights are counts for a
  // derived mix, parts per million for an explicit one). For tests and reports.
  std::int64_t gpuFragment(const DecisionContext& ctx, GpuId gpu) const;

 private:
  // A weighted set of (memory, compute) shapes that answers "how much weight fits within
  // this much free memory and compute" with a 2-D prefix-sum table.
  class FitTable {
   public:
    struct Entry {
      std::int64_t memoryMib;
      std::int32_t computeMilli;
      std::int64_t weight;
    };
    void build(std::span<const Entry> entries);
    std::int64_t fitting(std::int64_t memoryMib, std::int32_t computeMilli) const;
    std::int64_t total() const { return total_; }

   private:
    std::vector<std::int64_t> memory_;   // distinct, ascending
    std::vector<std::int32_t> compute_;  // distinct, ascending
    std::vector<std::int64_t> prefix_;   // (memory_.size()+1) × (compute_.size()+1)
    std::int64_t total_ = 0;
  };

  // The cluster-derived mix: each node's shapes as of its generation, and their sum.
  using ShapeKey = std::pair<std::int64_t, std::int32_t>;  // (memoryMib, computeMilli)
  struct NodeShapes {
    std::uint64_t generation = 0;  // 0: not looked at (live nodes start at 1)
    std::vector<ShapeKey> shapes;  // one per replica with GPUs
  };
  struct DerivedMix {
    std::vector<NodeShapes> nodes;  // by NodeId
    std::map<ShapeKey, std::int64_t> counts;
    std::vector<FitTable::Entry> entries;
    FitTable table;
  };

  // What one GPU looks like for the fit questions: memory that counts as fragment, the
  // largest need that could still be placed, free compute, and whether anything may go.
  struct GpuView {
    std::int64_t freeMib = 0;
    std::int64_t fitMib = 0;
    std::int32_t freeComputeMilli = 0;
    bool open = true;
  };

  const FitTable& mixFor(const ClusterState& state) const;
  std::int64_t fragment(const FitTable& mix, const DecisionContext& ctx, const GpuView& view) const;

  bool derived_;
  FitTable fixed_;
  mutable DerivedMix mix_;
};

}  // namespace tessera::sched
