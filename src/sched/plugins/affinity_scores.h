#pragma once
// Score plugins about where things already are: the model's weights, the deployment's other
// replicas, the NUMA layout. See docs/plugins.md.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "common/result.h"
#include "sched/plugin.h"

namespace tessera::sched {

// `resident` when a replica of the same model from another deployment already sits on one of
// the option's GPUs (weights can be shared or copied device to device), `cached` when the
// node's local cache holds the weights (a fast load), else 0. The deployment's own replicas do
// not count: replicas of one deployment spread (ReplicaAntiAffinity) rather than stack.
class ModelAffinityScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ModelAffinity";
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);
  ModelAffinityScore(std::int64_t resident, std::int64_t cached);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;

 private:
  std::int64_t resident_;
  std::int64_t cached_;
};

// Fewer replicas of the same deployment on the node and on the option's GPUs is better:
// 100 / (1 + on the node + on the option's GPUs), so a node or GPU failure takes as few of a
// deployment's replicas as possible and they do not queue on one card while others idle. A request without a
// deployment counts replicas of its model (the engine files them under the model's name);
// with neither, every option scores 100.
class ReplicaAntiAffinityScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ReplicaAntiAffinity";
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;
  // The options with the fewest of the deployment's replicas score 100, every other 0: with a
  // weight above all other weights together (the default profile), the chosen option is
  // always one of the fewest, whatever packing or weight reuse say; between those, they
  // decide. All options alike: 100 everywhere.
  void normalize(std::span<std::int64_t> scores) const override;
};

// 100 when the option's GPUs all sit on one NUMA node, else 100 × the largest same-node
// share; 50 when any GPU's NUMA node is unknown. Unlike the NumaAlignment filter it only
// prefers, for replicas that do not insist.
class NumaLocalityScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "NumaLocality";
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;
};

}  // namespace tessera::sched
