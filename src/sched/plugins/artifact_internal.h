#pragma once
// Details shared by the artifact policies (artifact_policies.h): their factories and the
// compact per-node view they all score from.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "sched/cluster_state.h"
#include "sched/plugin.h"
#include "sched/plugins/artifact_policies.h"

namespace tessera::sched::artifact {

Result<std::unique_ptr<ScorePlugin>> createRandom(const PluginArgs& args);
Result<std::unique_ptr<ScorePlugin>> createDotProd(const PluginArgs& args);
Result<std::unique_ptr<ScorePlugin>> createGpuClustering(const PluginArgs& args);
Result<std::unique_ptr<ScorePlugin>> createGpuPacking(const PluginArgs& args);
Result<std::unique_ptr<ScorePlugin>> createBestFit(const PluginArgs& args);
Result<std::unique_ptr<ScorePlugin>> createFgd(const PluginArgs& args);

// The artifact's normalisers (pkg/type/open-gpu-share/utils MaxSpecCpu, MaxSpecGpu).
inline constexpr std::int64_t kMaxSpecCpuMilli = 128'000;
inline constexpr std::int64_t kMaxSpecGpuMilli = 8'000;

// A sharing pod in the artifact's sense (GpuNumber == 1 && MilliGpu < 1000): it may go to any
// GPU with enough free milli and the choice of GPU matters; other GPU pods take whole GPUs.
// True when a node of catalogue type `gpuType` (-1: no GPUs) can take `shape`: shapes without
// gpuTypes take any type; the others only the types in gpuTypeIndices.
bool typeAccepts(const TaskShape& shape, int gpuType);

// The shapes with their GPU type names resolved against `catalog`, leniently, as the artifact
// does: a name the catalogue lacks matches no node, and a type listed twice
// ("V100M16|V100M32|V100M32" in the trace) counts once. (resolveTaskShapes is the strict
// variant for arguments a user wrote.)
std::vector<TaskShape> matchShapeTypes(const model::GpuCatalog& catalog,
                                       std::vector<TaskShape> shapes);

inline bool isSharingPod(const Needs& needs) {
  return needs.gpuCount == 1 && needs.computeMilli < kArtifactMilliPerGpu;
}

// What the artifact sees of a node, in its own terms (simontype.NodeResource).
struct NodeView {
  std::uint64_t generation = 0;  // NodeRecord::generation this view was built from; 0: none
  std::int64_t freeCpuMilli = 0;
  std::int64_t freeGpuMilliTotal = 0;  // R
  int gpuType = -1;                    // catalogue index of the node's GPUs; -1: none
  GpuId firstGpu = -1;                 // with `contiguous`: GPU index = id - firstGpu
  bool contiguous = true;
  std::uint32_t gpuPodTags = 0;            // GpuClustering: bit 0 share-gpu, bit k k-gpu
  std::vector<std::int32_t> freeGpuMilli;  // r_i in GPU index order
};

// One NodeView per node, rebuilt when the node's generation moves. Cost: O(1) per lookup;
// O(GPUs + replicas) once per node change.
class NodeViews {
 public:
  const NodeView& get(const ClusterState& state, NodeId node);
  // The GPU's index on its node (the artifact's device index).
  static int gpuIndex(const ClusterState& state, const NodeView& view, GpuId gpu) {
    if (view.contiguous) return gpu - view.firstGpu;
    return state.gpu(gpu).indexInNode;
  }

 private:
  void rebuild(const ClusterState& state, NodeId node, NodeView& view) const;
  std::vector<NodeView> views_;
};

// Memo slots of the memoising plugins (ArtifactFgd, PackingGradient): per pod shape (CPU,
// per-GPU milli, GPU count) one Slot per node. Past kMaxShapes shapes (long-lived use) it
// starts over. Cost: one hash lookup per decision.
template <typename Slot>
class PodShapeSlots {
 public:
  static constexpr std::size_t kMaxShapes = 512;

  // The pod shape's slots, at least `nodes` of them: a decision walks them in node order.
  std::vector<Slot>& forPod(const Needs& needs, std::size_t nodes) {
    if (ids_.size() >= kMaxShapes) clear();
    const Key key{needs.cpuMilli, needs.computeMilli, needs.gpuCount};
    const auto id = ids_.try_emplace(key, ids_.size()).first->second;
    if (slots_.size() <= id) slots_.resize(id + 1);
    if (slots_[id].size() < nodes) slots_[id].resize(nodes);
    return slots_[id];
  }
  void clear() {
    ids_.clear();
    slots_.clear();
  }

 private:
  struct Key {
    std::int64_t cpuMilli = 0;
    std::int32_t gpuMilli = 0;
    int gpus = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& s) const noexcept {
      std::uint64_t h = static_cast<std::uint64_t>(s.cpuMilli) * 0x9e3779b97f4a7c15ULL;
      h ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.gpuMilli)) << 8) ^
           static_cast<std::uint64_t>(s.gpus);
      h *= 0xff51afd7ed558ccdULL;
      return static_cast<std::size_t>(h ^ (h >> 32));
    }
  };
  std::unordered_map<Key, std::size_t, KeyHash> ids_;
  std::vector<std::vector<Slot>> slots_;  // [pod shape id][node]
};

}  // namespace tessera::sched::artifact
