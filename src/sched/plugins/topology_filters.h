#pragma once
// Option-level filters: whether a set of GPUs on one node suits a multi-GPU replica.
// See docs/plugins.md.

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "sched/plugin.h"

namespace tessera::sched {

// A replica with model.nvlinkRequired and more than one GPU gets GPUs that all share one
// known NVLink group (fully NVLink-connected).
class GpuTopologyFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "GpuTopology";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kOptionCheck; }
  bool passOption(const DecisionContext& ctx, const Option& option) const override;
  std::string whyOption(const DecisionContext& ctx, const Option& option) const override;
};

// A replica with model.numaAligned gets GPUs that all sit on one known NUMA node. GPUs
// whose NUMA node is unknown fail only such requests.
class NumaAlignmentFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "NumaAlignment";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kOptionCheck; }
  bool passOption(const DecisionContext& ctx, const Option& option) const override;
  std::string whyOption(const DecisionContext& ctx, const Option& option) const override;
};

}  // namespace tessera::sched
