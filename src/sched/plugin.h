#pragma once
// Policy lives in plugins; the engine and ClusterState are mechanism.
//
// A FilterPlugin rejects nodes, GPUs or whole options (a node plus a GPU set). Checks are
// split in two so the hot path never builds strings: pass*() answers yes/no, why*() says
// why in words and is only called to explain a rejection. Contract: why*() returns a
// non-empty reason exactly when the matching pass*() returns false.
//
// A ScorePlugin scores a batch of feasible options at once (one virtual call per plugin per
// decision) and maps its raw scores onto 0..100 in normalize(); the engine multiplies by
// the profile's weight and sums. Higher is better.
//
// Plugins are stateless with respect to the cluster (they read ClusterState) and are
// constructed from their arguments by a factory registered under their name
// (registerBuiltinPlugins). Threading: a plugin may be called from one thread at a time.
//
// The request's replicaId is not policy: no plugin may read it (k8s::Extender reuses one
// pod's filter and prioritize answers for every pod of the same shape on the same state).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "model/workload.h"
#include "sched/types.h"

namespace tessera::sched {

class ClusterState;

// Everything a plugin may look at for one decision.
struct DecisionContext {
  const ClusterState& state;
  const model::PlacementRequest& request;
  const Needs& needs;
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view name() const = 0;

  // Which of passNode / passGpu / passOption this plugin implements (the others keep the
  // default "pass"); the engine calls only those, which saves a virtual call per GPU and
  // check the plugin does not make.
  enum Check : std::uint8_t { kNodeCheck = 1, kGpuCheck = 2, kOptionCheck = 4 };
  virtual std::uint8_t checks() const { return kNodeCheck | kGpuCheck | kOptionCheck; }

  // Called once per decision before any pass*(): the place to resolve per-request lookups
  // (type names, label sets) into a form the per-GPU checks read cheaply. Default: nothing.
  virtual void prepare(const DecisionContext&) const {}

  virtual bool passNode(const DecisionContext&, NodeId) const { return true; }
  virtual std::string whyNode(const DecisionContext&, NodeId) const { return {}; }
  virtual bool passGpu(const DecisionContext&, GpuId) const { return true; }
  virtual std::string whyGpu(const DecisionContext&, GpuId) const { return {}; }
  virtual bool passOption(const DecisionContext&, const Option&) const { return true; }
  virtual std::string whyOption(const DecisionContext&, const Option&) const { return {}; }
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view name() const = 0;
  // Called once per decision before score(). Default: nothing.
  virtual void prepare(const DecisionContext&) const {}
  // Writes one raw score per option into `out` (same length).
  virtual void score(const DecisionContext& ctx, std::span<const Option> options,
                     std::span<std::int64_t> out) const = 0;
  // Maps raw scores onto 0..100 in place. Default: clamp (raw scores already 0..100).
  virtual void normalize(std::span<std::int64_t> scores) const;
};

// Plugin arguments as a JSON value (the profile loader converts YAML to it).
using PluginArgs = nlohmann::json;
using FilterFactory = std::function<Result<std::unique_ptr<FilterPlugin>>(const PluginArgs&)>;
using ScoreFactory = std::function<Result<std::unique_ptr<ScorePlugin>>(const PluginArgs&)>;

// Named plugin factories. Filled by explicit calls at start-up (no static self-registration:
// static libraries drop it).
class PluginRegistry {
 public:
  Result<void> addFilter(std::string name, FilterFactory factory);
  Result<void> addScore(std::string name, ScoreFactory factory);
  Result<std::unique_ptr<FilterPlugin>> makeFilter(std::string_view name,
                                                   const PluginArgs& args) const;
  Result<std::unique_ptr<ScorePlugin>> makeScore(std::string_view name,
                                                 const PluginArgs& args) const;
  std::vector<std::string> filterNames() const;
  std::vector<std::string> scoreNames() const;

 private:
  std::map<std::string, FilterFactory, std::less<>> filters_;
  std::map<std::string, ScoreFactory, std::less<>> scores_;
};

// Registers every built-in filter and score plugin (see docs/plugins.md).
void registerBuiltinPlugins(PluginRegistry& registry);

// Linear min-max map of raw scores onto 0..100 (all equal -> all 100). Integer arithmetic.
void normalizeMinMax(std::span<std::int64_t> scores);

}  // namespace tessera::sched
