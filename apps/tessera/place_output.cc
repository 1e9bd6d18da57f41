#include "place_output.h"

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sched/state_json.h"
#include "table.h"

namespace tessera::cli {
namespace {

using nlohmann::json;
using sched::breakdownJson;
using sched::migProfileName;
using sched::placementJson;

const char* modeName(PlaceMode mode) {
  return mode == PlaceMode::kBatch ? "batch" : "sequential";
}

std::string nodeName(const sched::ClusterState& state, sched::NodeId node) {
  return node >= 0 ? state.node(node).spec.name : std::string("-");
}

std::string gpuName(const sched::ClusterState& state, sched::GpuId gpu) {
  return state.gpu(gpu).spec.id;
}

std::string gpuList(const sched::ClusterState& state, const sched::Placement& p) {
  std::vector<std::string> names;
  for (const sched::GpuAssignment& a : p.gpus) {
    const std::string mig = migProfileName(state, a);
    names.push_back(mig.empty() ? gpuName(state, a.gpu)
                                : fmt::format("{}[{}@{}]", gpuName(state, a.gpu), mig,
                                              static_cast<int>(a.migStart)));
  }
  return names.empty() ? "-" : fmt::format("{}", fmt::join(names, ","));
}

std::int64_t reservedTotalMib(const sched::Placement& p) {
  std::int64_t total = 0;
  for (const sched::GpuAssignment& a : p.gpus) total += a.reservedMib;
  return total;
}

std::string replicaNames(const sched::ClusterState& state, const sched::GpuRecord& g) {
  std::vector<std::string> names;
  for (sched::ReplicaId rid : g.replicas) names.push_back(state.replica(rid).placement.replicaId);
  return names.empty() ? "-" : fmt::format("{}", fmt::join(names, ","));
}

std::string gpuUse(const sched::GpuRecord& g) {
  if (g.replicas.empty()) return g.spec.migEnabled ? "mig, idle" : "idle";
  if (g.spec.migEnabled) return "mig";
  return g.exclusive ? "exclusive" : "shared";
}

std::string evictionText(const sched::ClusterState& state, const EvictionAdvice& advice) {
  const sched::EvictionPlan& plan = advice.plan;
  if (plan.feasible && plan.victims.empty()) {
    return fmt::format("fits without eviction on {}{}", plan.node,
                       plan.placement ? ", GPUs " + gpuList(state, *plan.placement) : "");
  }
  if (plan.feasible) {
    return fmt::format("evict {} on {}, then place on GPUs {}", fmt::join(plan.victims, ", "),
                       plan.node, plan.placement ? gpuList(state, *plan.placement) : "-");
  }
  if (!plan.capacity.empty()) return "no eviction helps; " + plan.capacity;
  return plan.reason.empty() ? "no eviction plan and no capacity advice" : plan.reason;
}

void printExplanation(const Explanation& e, const sched::ClusterState& state, std::ostream& out) {
  const sched::Decision& d = e.decision;
  out << "\nExplanation for " << e.replicaId << " (decided on " << e.basis << ")\n";
  if (d.placement) {
    out << fmt::format("  Chosen: node {}, GPUs {}, total score {} among {} feasible option{}\n",
                       nodeName(state, d.placement->node), gpuList(state, *d.placement),
                       d.totalScore, d.feasibleOptions, d.feasibleOptions == 1 ? "" : "s");
    Table scores({{"PLUGIN"},
                  {"WEIGHT", Align::kRight},
                  {"SCORE", Align::kRight},
                  {"WEIGHTED", Align::kRight}});
    for (const sched::ScoreTerm& t : d.breakdown) {
      scores.addRow({t.plugin, std::to_string(t.weight), std::to_string(t.score),
                     std::to_string(t.weight * t.score)});
    }
    if (!scores.empty()) {
      out << "\n  Score breakdown of the chosen option:\n";
      scores.print(out, "  ");
    }
  } else {
    out << "  Unplaceable: " << (d.summary.empty() ? "no feasible option" : d.summary) << '\n';
  }
  out << fmt::format("\n  Rejections ({}):\n", d.rejections.size());
  if (d.rejections.empty()) {
    out << "  none: every node and GPU passed every filter\n";
    return;
  }
  Table rejections({{"NODE"}, {"GPU"}, {"PLUGIN"}, {"REASON"}});
  for (const sched::Rejection& r : d.rejections) {
    rejections.addRow({r.node, r.gpu.empty() ? "(node)" : r.gpu, r.plugin, r.reason});
  }
  rejections.print(out, "  ");
}

json explanationJson(const Explanation& e, const sched::ClusterState& state) {
  const sched::Decision& d = e.decision;
  return {{"replica", e.replicaId},
          {"placed", d.placement.has_value()},
          {"basis", e.basis},
          {"placement", d.placement ? placementJson(state, *d.placement) : json(nullptr)},
          {"totalScore", d.placement ? json(d.totalScore) : json(nullptr)},
          {"scoreBreakdown", breakdownJson(d.breakdown)},
          {"feasibleOptions", d.feasibleOptions},
          {"summary", d.summary},
          {"rejections", sched::rejectionsJson(d.rejections)}};
}

}  // namespace

void printPlanTable(const PlanReport& report, const sched::ClusterState& state, std::ostream& out) {
  out << fmt::format("Placement plan ({}): {} of {} request{} placed, {} unplaceable.\n",
                     modeName(report.mode), report.assignments.size(), report.requestCount,
                     report.requestCount == 1 ? "" : "s", report.unplaceable.size());

  if (!report.assignments.empty()) {
    out << "\nAssignments\n";
    Table table({{"REPLICA"},
                 {"MODEL"},
                 {"NODE"},
                 {"GPUS"},
                 {"MODE"},
                 {"MEM/GPU", Align::kRight},
                 {"MEM TOTAL", Align::kRight},
                 {"SCORE", Align::kRight}});
    for (const AssignedReplica& a : report.assignments) {
      const sched::Placement& p = a.placement;
      const std::int64_t perGpu = p.gpus.empty() ? 0 : p.gpus.front().reservedMib;
      table.addRow({p.replicaId, p.modelName, nodeName(state, p.node), gpuList(state, p),
                    model::sharingModeName(p.mode), formatMib(perGpu),
                    formatMib(reservedTotalMib(p)), a.score ? std::to_string(*a.score) : "-"});
    }
    table.print(out);
  }

  if (!report.unplaceable.empty()) {
    out << "\nUnplaceable\n";
    Table table({{"REPLICA"}, {"MODEL"}, {"NEEDS", Align::kRight}, {"REASON"}});
    for (const RefusedReplica& r : report.unplaceable) {
      const sched::Needs needs = sched::deriveNeeds(r.request, state.options());
      table.addRow({r.request.replicaId, r.request.model.name,
                    fmt::format("{} x {}", needs.gpuCount, formatMib(needs.memoryMib)), r.reason});
    }
    table.print(out);
    out << "\nWhat would make them fit (each judged alone, on the cluster after the plan)\n";
    for (const EvictionAdvice& e : report.evictions) {
      out << "  " << e.request.replicaId << ": " << evictionText(state, e) << '\n';
    }
  }

  out << "\nGPUs after the plan\n";
  Table gpus({{"NODE"},
              {"GPU"},
              {"TYPE"},
              {"USE"},
              {"MEMORY", Align::kRight},
              {"CHARGED", Align::kRight},
              {"FREE", Align::kRight},
              {"MEM%", Align::kRight},
              {"COMPUTE%", Align::kRight},
              {"REPLICAS"}});
  int used = 0;
  int live = 0;
  for (const sched::GpuRecord& g : state.gpus()) {
    if (g.node < 0 || state.node(g.node).removed) continue;
    ++live;
    if (!g.replicas.empty()) ++used;
    gpus.addRow({nodeName(state, g.node), g.spec.id, sched::gpuTypeName(state, g), gpuUse(g),
                 formatMib(g.spec.memoryMib), formatMib(g.chargedMib + g.foreignMib),
                 formatMib(g.freeMemoryMib()),
                 formatPercent(g.chargedMib + g.foreignMib, g.spec.memoryMib),
                 formatPercent(g.bookedComputeMilli, g.spec.computeMilli), replicaNames(state, g)});
  }
  gpus.print(out);
  out << fmt::format("{} of {} GPUs hold at least one replica.\n", used, live);

  if (report.explanation) printExplanation(*report.explanation, state, out);
}

json planToJson(const PlanReport& report, const sched::ClusterState& state) {
  json assignments = json::array();
  for (const AssignedReplica& a : report.assignments) {
    json row = placementJson(state, a.placement);
    row["score"] = a.score ? json(*a.score) : json(nullptr);
    row["scoreBreakdown"] = breakdownJson(a.breakdown);
    assignments.push_back(std::move(row));
  }

  json unplaceable = json::array();
  for (const RefusedReplica& r : report.unplaceable) {
    const sched::Needs needs = sched::deriveNeeds(r.request, state.options());
    unplaceable.push_back({{"replica", r.request.replicaId},
                           {"model", r.request.model.name},
                           {"gpuCount", needs.gpuCount},
                           {"memoryPerGpuMib", needs.memoryMib},
                           {"reason", r.reason}});
  }

  json evictions = json::array();
  for (const EvictionAdvice& e : report.evictions) {
    const sched::EvictionPlan& plan = e.plan;
    json row = sched::evictionJson(state, plan);
    row["replica"] = e.request.replicaId;
    evictions.push_back(std::move(row));
  }

  json gpus = json::array();
  for (const sched::GpuRecord& g : state.gpus()) {
    if (g.node < 0 || state.node(g.node).removed) continue;
    gpus.push_back(sched::gpuJson(state, g));
  }

  json doc = {{"mode", modeName(report.mode)},         {"requests", report.requestCount},
              {"assignments", std::move(assignments)}, {"unplaceable", std::move(unplaceable)},
              {"evictions", std::move(evictions)},     {"gpus", std::move(gpus)}};
  if (report.explanation) doc["explain"] = explanationJson(*report.explanation, state);
  return doc;
}

}  // namespace tessera::cli
