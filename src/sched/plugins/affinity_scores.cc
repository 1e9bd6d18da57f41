#include "sched/plugins/affinity_scores.h"

#include <algorithm>
#include <array>

#include "sched/cluster_state.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

// Unknown NUMA placement is neither rewarded nor punished fully.
constexpr std::int64_t kUnknownNumaScore = 50;

}  // namespace

// ---- ModelAffinity ------------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> ModelAffinityScore::create(const PluginArgs& args) {
  auto reader = ArgReader::open(kName, args, {"resident", "cached"});
  if (!reader) return fail(reader.error());
  auto resident = reader->integer("resident", 100, 0, 100);
  if (!resident) return fail(resident.error());
  auto cached = reader->integer("cached", 60, 0, 100);
  if (!cached) return fail(cached.error());
  return std::make_unique<ModelAffinityScore>(*resident, *cached);
}

ModelAffinityScore::ModelAffinityScore(std::int64_t resident, std::int64_t cached)
    : resident_(resident), cached_(cached) {}

void ModelAffinityScore::score(const DecisionContext& ctx, std::span<const Option> options,
                               std::span<std::int64_t> out) const {
  const std::string_view model = ctx.request.model.name;
  const std::int32_t modelId = ctx.state.nameId(model);  // -1: resident nowhere
  // The deployment's own replicas do not attract it: spreading them wins (ReplicaAntiAffinity);
  // weights another deployment of the model holds do (a canary next to production).
  const std::int32_t deploymentId = ctx.state.nameId(
      ctx.request.deployment.empty() ? ctx.request.model.name : ctx.request.deployment);
  // The engine lists a node's options together; remember the last node's cache answer.
  NodeId lastNode = -1;
  bool lastCached = false;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const Option& option = options[i];
    if (model.empty()) {
      out[i] = 0;
      continue;
    }
    const auto gpus = optionGpus(option);
    if (std::any_of(gpus.begin(), gpus.end(),
                    [&](GpuId g) { return ctx.state.modelResidentOnGpu(g, modelId, deploymentId); })) {
      out[i] = resident_;
      continue;
    }
    if (option.node != lastNode) {
      lastNode = option.node;
      lastCached = option.node >= 0 && ctx.state.modelCachedOnNode(option.node, model);
    }
    out[i] = lastCached ? cached_ : 0;
  }
}

// ---- ReplicaAntiAffinity ------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> ReplicaAntiAffinityScore::create(const PluginArgs& args) {
  return createWithoutArgs<ReplicaAntiAffinityScore, ScorePlugin>(args);
}

void ReplicaAntiAffinityScore::score(const DecisionContext& ctx, std::span<const Option> options,
                                     std::span<std::int64_t> out) const {
  // The engine records a replica without a deployment under its model's name
  // (PlacementEngine::toPlacement); count the same way.
  const std::string_view deployment =
      ctx.request.deployment.empty() ? ctx.request.model.name : ctx.request.deployment;
  const std::int32_t deploymentId = ctx.state.nameId(deployment);
  NodeId lastNode = -1;
  std::int64_t onNode = 0;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const NodeId node = options[i].node;
    if (deployment.empty() || node < 0) {
      out[i] = 100;
      continue;
    }
    if (node != lastNode) {
      lastNode = node;
      onNode = ctx.state.deploymentReplicasOnNode(node, deploymentId);
    }
    // A replica on one of the option's GPUs counts twice: it shares the node and the card.
    std::int64_t onGpus = 0;
    for (GpuId g : optionGpus(options[i])) onGpus += ctx.state.deploymentReplicasOnGpu(g, deploymentId);
    out[i] = 100 / (1 + onNode + onGpus);
  }
}

void ReplicaAntiAffinityScore::normalize(std::span<std::int64_t> scores) const {
  // Min-max would leave a partial difference (counts 0, 2, 3 score 100, 10, 0) that packing
  // can outvote; the step keeps "fewest first" a rule, not a tendency.
  if (scores.empty()) return;
  const std::int64_t best = *std::max_element(scores.begin(), scores.end());
  for (std::int64_t& s : scores) s = s == best ? 100 : 0;
}

// ---- NumaLocality -------------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> NumaLocalityScore::create(const PluginArgs& args) {
  return createWithoutArgs<NumaLocalityScore, ScorePlugin>(args);
}

void NumaLocalityScore::score(const DecisionContext& ctx, std::span<const Option> options,
                              std::span<std::int64_t> out) const {
  for (std::size_t i = 0; i < options.size(); ++i) {
    const auto gpus = optionGpus(options[i]);
    if (gpus.empty()) {
      out[i] = 100;  // nothing to align
      continue;
    }
    // At most kMaxGpusPerReplica GPUs: count same-NUMA peers directly, no map.
    std::array<int, kMaxGpusPerReplica> numa{};
    bool unknown = false;
    for (std::size_t k = 0; k < gpus.size(); ++k) {
      numa[k] = ctx.state.gpu(gpus[k]).spec.numaNode;
      unknown = unknown || numa[k] < 0;
    }
    if (unknown) {
      out[i] = kUnknownNumaScore;
      continue;
    }
    std::int64_t largest = 0;
    for (std::size_t k = 0; k < gpus.size(); ++k) {
      const auto same = std::count(
          numa.begin(), numa.begin() + static_cast<std::ptrdiff_t>(gpus.size()), numa[k]);
      largest = std::max<std::int64_t>(largest, same);
    }
    out[i] = 100 * largest / static_cast<std::int64_t>(gpus.size());
  }
}

}  // namespace tessera::sched
