#pragma once
// The placement engine: filter -> assemble options -> score -> choose -> reserve.
// It owns no state of its own beyond scratch buffers: the books are in ClusterState, the
// policy in the plugins.
//
// Threading: one engine per owning thread; not safe for concurrent calls.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/cluster_state.h"
#include "sched/profile.h"

namespace tessera::sched {

// Why a node or GPU was rejected (FailedNodes in a kube-scheduler extender answer).
struct Rejection {
  std::string node;
  std::string gpu;     // empty: the whole node was rejected
  std::string plugin;  // the filter that said no
  std::string reason;
};

struct ScoreTerm {
  std::string plugin;
  std::int64_t weight = 0;
  std::int64_t score = 0;  // normalised, 0..100
};

struct RejectionCount {
  std::string plugin;
  int nodes = 0;
  int gpus = 0;
};

struct Decision {
  std::optional<Placement> placement;  // empty: unplaceable
  std::int64_t totalScore = 0;
  std::vector<ScoreTerm> breakdown;  // the winner's score per plugin
  int feasibleOptions = 0;
  // Filled when explanations were asked for, or when nothing fits.
  std::vector<Rejection> rejections;
  // How many nodes / GPUs each filter turned away (always filled when nothing fits).
  std::vector<RejectionCount> rejectionCounts;
  std::string summary;  // one line: why nothing fits (empty on success)
  // The request itself was refused (invalid, or its replica id is already placed): says
  // nothing about whether a request of the same shape would fit.
  bool requestRefused = false;
};

struct DecideOptions {
  bool explain = false;          // collect a reason for every rejected node and GPU
  bool explainFailures = true;   // when nothing fits, explain anyway (one more full pass)
  // When nothing fits, count rejections per filter (one more full pass, no strings). A
  // simulator that only needs "it failed" turns both off.
  bool diagnoseFailures = true;
  std::optional<NodeId> onlyNode;  // consider this node only (eviction what-ifs, extenders)
};

class PlacementEngine {
 public:
  PlacementEngine(PluginSet plugins, EngineOptions options);

  // Chooses where `request` goes without changing the state.
  Decision decide(const ClusterState& state, const model::PlacementRequest& request,
                  DecideOptions opts = {});
  // decide() and, on success, apply ReplicaPlaced (the reservation), stamped with the state's
  // clock (ClusterState::clock).
  Decision place(ClusterState& state, const model::PlacementRequest& request,
                 DecideOptions opts = {});

  // Scores every feasible node (best option per node), for extenders' prioritize calls.
  struct NodeScore {
    NodeId node = -1;
    std::int64_t score = 0;
  };
  std::vector<NodeScore> scoreNodes(const ClusterState& state,
                                    const model::PlacementRequest& request,
                                    DecideOptions opts = {});

  const EngineOptions& options() const { return options_; }
  const PluginSet& plugins() const { return plugins_; }

 private:
  // kFast uses the capacity index; kCount scans everything and counts rejections; kExplain
  // also records a reason for each.
  enum class Pass : std::uint8_t { kFast, kCount, kExplain };
  // Fills candidates_ with every feasible option.
  void collectOptions(const DecisionContext& ctx, const DecideOptions& opts, Pass pass,
                      Decision& out);
  void considerNode(const DecisionContext& ctx, NodeId node, std::span<const GpuId> gpus,
                    Pass pass, Decision& out);
  bool nodePasses(const DecisionContext& ctx, NodeId node, Pass pass, Decision& out);
  bool gpuPasses(const DecisionContext& ctx, GpuId gpu, Pass pass, Decision& out);
  void reject(Pass pass, Decision& out, std::string_view plugin, bool node,
              std::string nodeName, std::string gpuId, const std::function<std::string()>& why);
  // Scores candidates_ into total_ (and perPlugin_).
  void scoreCandidates(const DecisionContext& ctx);
  std::size_t choose(const ClusterState& state) const;
  // Drops candidates_[index], which the books refuse, recording why as a rejection.
  void refuseCandidate(const ClusterState& state, std::size_t index, const std::string& why,
                       const DecideOptions& opts, Decision& out);
  static std::string summarize(const ClusterState& state, const Decision& d);

  PluginSet plugins_;
  EngineOptions options_;
  // The filters that implement each check, in profile order.
  std::vector<const FilterPlugin*> nodeFilters_, gpuFilters_, optionFilters_;
  // Scratch buffers reused across decisions (no allocation on the hot path once warm).
  std::vector<Option> candidates_;
  std::vector<std::int64_t> total_;
  std::vector<std::vector<std::int64_t>> perPlugin_;
  std::vector<std::int8_t> nodeVerdict_;  // per node: 0 unknown, 1 pass, -1 fail
  std::vector<std::pair<NodeId, GpuId>> passing_;
  std::vector<GpuId> group_;
};

// What placing `request` as `option` books: per-GPU memory (estimate x safety factor, the
// whole card when exclusive, the slice when MIG), compute and bandwidth. The engine uses it
// for its decisions; callers that adopt replicas already running (a cluster file, a node
// agent's report) use it so that both book alike.
Placement placementFor(const ClusterState& state, const model::PlacementRequest& request,
                       const Needs& needs, const Option& option);

// ---- Batch planning -------------------------------------------------------------------

// Everything about a request that the filters and the eviction search look at, except its
// replica id: two requests with the same key get the same verdict on the same books.
std::string requestShapeKey(const model::PlacementRequest& request);

struct Unplaceable {
  std::string replicaId;
  std::string reason;
};
struct BatchPlan {
  std::vector<Placement> assignments;
  std::vector<Unplaceable> unplaceable;
};
// Best-fit-decreasing: largest total memory (GPUs x per-GPU memory) first (then per-GPU
// memory, more GPUs, higher priority), each placed with the engine on a scratch copy of the
// state. `commit` applies the assignments to `state` as well.
BatchPlan planBatch(PlacementEngine& engine, ClusterState& state,
                    std::vector<model::PlacementRequest> requests, bool commit);

// ---- Eviction planning ----------------------------------------------------------------

struct EvictionPlan {
  bool feasible = false;
  std::vector<std::string> victims;  // replica ids to unload, in order
  std::optional<Placement> placement;  // where the request goes after the evictions
  std::string node;
  // When even eviction cannot help: capacity that would, checked with the engine on a copy
  // of the cluster before it is offered. Either one node's CPU / host memory (the GPUs are
  // there) ...
  std::string growNode;
  std::int64_t addCpuMilli = 0;
  std::int64_t addHostMemoryMib = 0;
  // ... or a new node with these GPUs, labelled and tainted like `likeNode` (empty: bare).
  int gpusToAdd = 0;
  std::string gpuTypeToAdd;
  std::string likeNode;
  std::string capacity;  // the remedy in words, or why none was found
  std::string reason;
  // The request itself was refused (malformed, or its replica id is placed already): the
  // plan says so about this request only, not about every request of its shape.
  bool requestRefused = false;
};
// The cheapest set of strictly lower-priority replicas (lowest priority, then least
// recently used, first) on one node whose unloading lets `request` fit there. Replicas named
// in `keep` are never victims (a plan does not advise evicting what it has just placed).
EvictionPlan planEviction(PlacementEngine& engine, const ClusterState& state,
                          const model::PlacementRequest& request,
                          std::span<const std::string> keep = {});

}  // namespace tessera::sched
