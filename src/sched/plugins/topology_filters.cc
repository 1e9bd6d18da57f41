#include "sched/plugins/topology_filters.h"

#include <span>

#include "sched/cluster_state.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

// True when every GPU of the option has the same known value of `field`.
template <typename Field>
bool allOnOne(const ClusterState& state, std::span<const GpuId> gpus, Field field) {
  if (gpus.empty()) return true;
  const int first = field(state.gpu(gpus[0]).spec);
  if (first < 0) return false;
  for (GpuId g : gpus.subspan(1)) {
    if (field(state.gpu(g).spec) != first) return false;
  }
  return true;
}

// "node-a/0 in 0, node-a/1 in 1, node-a/2 unknown"
template <typename Field>
std::string describe(const ClusterState& state, std::span<const GpuId> gpus, Field field) {
  std::string s;
  for (GpuId g : gpus) {
    const int v = field(state.gpu(g).spec);
    s += (s.empty() ? "" : ", ") + gpuLabel(state, g) + " " +
         (v < 0 ? std::string("unknown") : "in " + std::to_string(v));
  }
  return s;
}

int nvlinkGroup(const model::GpuSpec& spec) {
  return spec.nvlinkGroup;
}
int numaNode(const model::GpuSpec& spec) {
  return spec.numaNode;
}

}  // namespace

// ---- GpuTopology --------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> GpuTopologyFilter::create(const PluginArgs& args) {
  return createWithoutArgs<GpuTopologyFilter, FilterPlugin>(args);
}

bool GpuTopologyFilter::passOption(const DecisionContext& ctx, const Option& option) const {
  if (!ctx.request.model.nvlinkRequired || option.gpuCount <= 1) return true;
  return allOnOne(ctx.state, optionGpus(option), nvlinkGroup);
}

std::string GpuTopologyFilter::whyOption(const DecisionContext& ctx, const Option& option) const {
  if (passOption(ctx, option)) return {};
  return "needs " + std::to_string(option.gpuCount) + " GPUs in one NVLink group; NVLink groups: " +
         describe(ctx.state, optionGpus(option), nvlinkGroup);
}

// ---- NumaAlignment ------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> NumaAlignmentFilter::create(const PluginArgs& args) {
  return createWithoutArgs<NumaAlignmentFilter, FilterPlugin>(args);
}

bool NumaAlignmentFilter::passOption(const DecisionContext& ctx, const Option& option) const {
  if (!ctx.request.model.numaAligned) return true;
  return allOnOne(ctx.state, optionGpus(option), numaNode);
}

std::string NumaAlignmentFilter::whyOption(const DecisionContext& ctx, const Option& option) const {
  if (passOption(ctx, option)) return {};
  return "needs all GPUs on one NUMA node; NUMA nodes: " +
         describe(ctx.state, optionGpus(option), numaNode);
}

}  // namespace tessera::sched
