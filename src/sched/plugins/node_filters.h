#pragma once
// Node-level filters: whether a node may take the replica at all, before any GPU is looked
// at. See docs/plugins.md for what each checks.

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "sched/plugin.h"

namespace tessera::sched {

// The node is live, healthy and not cordoned; the GPU is healthy.
class NodeHealthFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "NodeHealth";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kNodeCheck | kGpuCheck; }
  bool passNode(const DecisionContext& ctx, NodeId node) const override;
  std::string whyNode(const DecisionContext& ctx, NodeId node) const override;
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;
};

// Every NoSchedule / NoExecute taint of the node is tolerated by the request.
// PreferNoSchedule taints never reject.
class TaintTolerationFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "TaintToleration";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kNodeCheck; }
  bool passNode(const DecisionContext& ctx, NodeId node) const override;
  std::string whyNode(const DecisionContext& ctx, NodeId node) const override;
};

// The node's labels contain every key=value pair of the request's nodeSelector.
class NodeSelectorFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "NodeSelector";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kNodeCheck; }
  bool passNode(const DecisionContext& ctx, NodeId node) const override;
  std::string whyNode(const DecisionContext& ctx, NodeId node) const override;
};

// The node's free CPU and host memory cover the replica's.
class NodeResourcesFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "NodeResources";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kNodeCheck; }
  bool passNode(const DecisionContext& ctx, NodeId node) const override;
  std::string whyNode(const DecisionContext& ctx, NodeId node) const override;
};

}  // namespace tessera::sched
