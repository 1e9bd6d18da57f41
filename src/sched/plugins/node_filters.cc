#include "sched/plugins/node_filters.h"

#include <algorithm>

#include "sched/cluster_state.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

void appendReason(std::string& out, std::string_view reason) {
  if (!out.empty()) out += "; ";
  out += reason;
}

bool blocksScheduling(const model::Taint& taint) {
  return taint.effect == "NoSchedule" || taint.effect == "NoExecute";
}

bool tolerated(const model::Taint& taint, const std::vector<model::Toleration>& tolerations) {
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const model::Toleration& t) { return t.tolerates(taint); });
}

}  // namespace

// ---- NodeHealth ---------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> NodeHealthFilter::create(const PluginArgs& args) {
  return createWithoutArgs<NodeHealthFilter, FilterPlugin>(args);
}

bool NodeHealthFilter::passNode(const DecisionContext& ctx, NodeId node) const {
  const NodeRecord& n = ctx.state.node(node);
  return !n.removed && n.spec.healthy && !n.spec.cordoned;
}

std::string NodeHealthFilter::whyNode(const DecisionContext& ctx, NodeId node) const {
  const NodeRecord& n = ctx.state.node(node);
  std::string why;
  if (n.removed) appendReason(why, "node was removed");
  if (!n.spec.healthy) appendReason(why, "node is unhealthy");
  if (n.spec.cordoned) appendReason(why, "node is cordoned");
  return why;
}

bool NodeHealthFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  return ctx.state.gpu(gpu).healthy();
}

std::string NodeHealthFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  return ctx.state.gpu(gpu).healthy() ? std::string() : "GPU is unhealthy";
}

// ---- TaintToleration ----------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> TaintTolerationFilter::create(const PluginArgs& args) {
  return createWithoutArgs<TaintTolerationFilter, FilterPlugin>(args);
}

bool TaintTolerationFilter::passNode(const DecisionContext& ctx, NodeId node) const {
  for (const model::Taint& taint : ctx.state.node(node).spec.taints) {
    if (blocksScheduling(taint) && !tolerated(taint, ctx.request.tolerations)) return false;
  }
  return true;
}

std::string TaintTolerationFilter::whyNode(const DecisionContext& ctx, NodeId node) const {
  std::string why;
  for (const model::Taint& taint : ctx.state.node(node).spec.taints) {
    if (!blocksScheduling(taint) || tolerated(taint, ctx.request.tolerations)) continue;
    std::string t = taint.key;
    if (!taint.value.empty()) t += "=" + taint.value;
    appendReason(why, "taint " + t + ":" + taint.effect + " is not tolerated");
  }
  return why;
}

// ---- NodeSelector -------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> NodeSelectorFilter::create(const PluginArgs& args) {
  return createWithoutArgs<NodeSelectorFilter, FilterPlugin>(args);
}

bool NodeSelectorFilter::passNode(const DecisionContext& ctx, NodeId node) const {
  const auto& labels = ctx.state.node(node).spec.labels;
  for (const auto& [key, value] : ctx.request.nodeSelector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

std::string NodeSelectorFilter::whyNode(const DecisionContext& ctx, NodeId node) const {
  const auto& labels = ctx.state.node(node).spec.labels;
  std::string why;
  for (const auto& [key, value] : ctx.request.nodeSelector) {
    auto it = labels.find(key);
    if (it == labels.end()) {
      appendReason(why, "needs label " + key + "=" + value + ", node has no label " + key);
    } else if (it->second != value) {
      appendReason(why,
                   "needs label " + key + "=" + value + ", node has " + key + "=" + it->second);
    }
  }
  return why;
}

// ---- NodeResources ------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> NodeResourcesFilter::create(const PluginArgs& args) {
  return createWithoutArgs<NodeResourcesFilter, FilterPlugin>(args);
}

bool NodeResourcesFilter::passNode(const DecisionContext& ctx, NodeId node) const {
  const NodeRecord& n = ctx.state.node(node);
  return n.freeCpuMilli() >= ctx.needs.cpuMilli && n.freeHostMemoryMib() >= ctx.needs.hostMemoryMib;
}

std::string NodeResourcesFilter::whyNode(const DecisionContext& ctx, NodeId node) const {
  const NodeRecord& n = ctx.state.node(node);
  std::string why;
  if (n.freeCpuMilli() < ctx.needs.cpuMilli) {
    appendReason(why, "needs " + std::to_string(ctx.needs.cpuMilli) + "m CPU, " +
                          std::to_string(n.freeCpuMilli()) + "m free of " +
                          std::to_string(n.spec.cpuMilli) + "m");
  }
  if (n.freeHostMemoryMib() < ctx.needs.hostMemoryMib) {
    appendReason(why, "needs " + std::to_string(ctx.needs.hostMemoryMib) + " MiB host memory, " +
                          std::to_string(n.freeHostMemoryMib()) + " MiB free of " +
                          std::to_string(n.spec.hostMemoryMib) + " MiB");
  }
  return why;
}

}  // namespace tessera::sched
