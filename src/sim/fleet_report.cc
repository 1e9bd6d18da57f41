#include "sim/fleet_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "sim/svg.h"

namespace tessera::sim {
namespace {

double round3(double v) {
  return std::round(v * 1000) / 1000;
}

nlohmann::json distributionJson(const Distribution& d) {
  return {{"count", d.count},     {"p50", round3(d.p50)}, {"p90", round3(d.p90)},
          {"p99", round3(d.p99)}, {"max", round3(d.max)}, {"mean", round3(d.mean)}};
}

constexpr const char* kTierKeys[3] = {"host_memory", "local_disk", "remote"};

const char* colorOf(std::string_view policy) {
  if (policy == "whole-gpu") return "#9e9e9e";
  if (policy == "time-slicing") return "#ff7f0e";
  if (policy == "binpack") return "#1f77b4";
  if (policy == "tessera") return "#d62728";
  return "#17becf";
}

}  // namespace

nlohmann::json fleetJson(const FleetReport& r) {
  nlohmann::json j = {{"fleet", r.fleet},
                      {"source", r.source},
                      {"nodes", r.nodes},
                      {"gpus", r.gpus},
                      {"slo_target", r.sloTarget},
                      {"deployments", nlohmann::json::array()},
                      {"policies", nlohmann::json::object()}};
  for (const FleetDeployment& d : r.deployments) {
    j["deployments"].push_back({{"name", d.name},
                                {"model", d.model},
                                {"slo_ttft_ms", d.sloTtftMs},
                                {"priority", d.priority},
                                {"traffic", d.traffic},
                                {"requests", d.trace.requests.size()}});
  }
  for (const FleetPolicyResult& p : r.policies) {
    nlohmann::json tiers = nlohmann::json::object(), seconds = nlohmann::json::object();
    for (std::size_t t = 0; t < 3; ++t) {
      tiers[kTierKeys[t]] = p.coldStartsByTier[t];
      seconds[kTierKeys[t]] = distributionJson(p.coldStartSeconds[t]);
    }
    seconds["all"] = distributionJson(p.coldStartAll);
    nlohmann::json deps = nlohmann::json::object();
    for (const FleetDeploymentResult& d : p.deployments) {
      const ServingPolicyResult& x = d.run;
      deps[d.name] = {{"model", d.model},
                      {"slo_attainment", round3(x.sloAttainment * 1000) / 1000},
                      {"gpu_hours", round3(x.gpuHours)},
                      {"ttft_p50_ms", round3(x.ttftP50Ms)},
                      {"ttft_p99_ms", round3(x.ttftP99Ms)},
                      {"cold_starts", x.coldStarts},
                      {"evicted", x.evicted},
                      {"requests", x.requests},
                      {"served", x.served},
                      {"unserved", x.unserved},
                      {"rejected", x.rejected},
                      {"placement_failures", x.placementFailures},
                      {"peak_replicas", x.peakReplicas},
                      {"replica_share", round3(x.replicaShare)}};
    }
    j["policies"][p.policy] = {
        {"gpu_hours", round3(p.gpuHours)},
        {"replica_gpu_hours", round3(p.replicaGpuHours)},
        {"cost", round3(p.cost)},
        {"peak_gpus", p.peakGpus},
        {"mean_gpus", round3(p.meanGpus)},
        {"slo_attainment", round3(p.sloAttainment * 1000) / 1000},
        {"deployments_meeting_target", p.deploymentsMeetingTarget},
        {"min_deployment_attainment", round3(p.minDeploymentAttainment * 1000) / 1000},
        {"mean_gpu_memory_utilization", round3(p.meanMemoryUtilization)},
        {"mean_gpu_memory_allocated", round3(p.meanMemoryAllocated)},
        {"mean_gpu_compute_utilization", round3(p.meanComputeUtilization)},
        {"cold_starts", p.coldStarts},
        {"cold_starts_by_tier", tiers},
        {"cold_start_seconds", seconds},
        {"evictions", p.evictions},
        {"placement_failures", p.placementFailures},
        {"pending_replica_seconds", round3(p.pendingReplicaSeconds)},
        {"worst_ttft_p99_ms", round3(p.ttftP99Ms)},
        {"wall_seconds", round3(p.wallSeconds)},
        {"deployments", deps}};
  }
  const auto find = [&](std::string_view name) -> const FleetPolicyResult* {
    for (const FleetPolicyResult& p : r.policies) {
      if (p.policy == name) return &p;
    }
    return nullptr;
  };
  const FleetPolicyResult* whole = find("whole-gpu");
  const FleetPolicyResult* tessera = find("tessera");
  if (whole != nullptr && tessera != nullptr && whole->gpuHours > 0 && whole->cost > 0) {
    j["savings"] = {
        {"gpu_hours_vs_whole_gpu", round3(tessera->gpuHours / whole->gpuHours)},
        {"cost_vs_whole_gpu", round3(tessera->cost / whole->cost)},
        {"peak_gpus_vs_whole_gpu",
         whole->peakGpus > 0 ? round3(static_cast<double>(tessera->peakGpus) / whole->peakGpus)
                             : 0.0}};
  }
  if (r.recorded) {
    j["recorded_loads"] = {{"source", r.recorded->source},
                           {"base_model_seconds", distributionJson(r.recorded->baseModel)},
                           {"lora_seconds", distributionJson(r.recorded->lora)}};
  }
  return j;
}

void writeFleetTimelineCsv(std::ostream& out, const FleetReport& r) {
  out << "time_s,policy,gpus_in_use,replicas,memory_used,memory_allocated,compute\n";
  for (const FleetPolicyResult& p : r.policies) {
    for (const loop::FleetSample& f : p.timeline) {
      out << f.timeS << ',' << p.policy << ',' << f.gpusInUse << ',' << f.replicas << ','
          << round3(f.memoryUsed) << ',' << round3(f.memoryAllocated) << ',' << round3(f.compute)
          << '\n';
    }
  }
}

std::string fleetPlotSvg(const FleetReport& r) {
  using svg::escape;
  using svg::num;
  constexpr double kW = 560, kH = 260, kLeft = 60, kRight = 20, kTop = 40, kBottom = 40;
  double maxT = 1;
  double maxGpus = 1;
  for (const FleetPolicyResult& p : r.policies) {
    for (const loop::FleetSample& f : p.timeline) {
      maxT = std::max(maxT, f.timeS);
      maxGpus = std::max(maxGpus, static_cast<double>(f.gpusInUse));
    }
  }
  const auto [tTop, tStep] = svg::axis(maxT / 60, 6);
  std::ostringstream s;
  const double width = 2 * kW;
  const double height = 2 * kH + 40;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
    << num(height) << "\" font-family=\"sans-serif\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  struct Panel {
    const char* title;
    const char* label;
    double top;
    double step;
    std::function<double(const loop::FleetSample&)> y;
  };
  const auto [gTop, gStep] = svg::axis(maxGpus, 5);
  const std::vector<Panel> panels = {
      {"GPU compute utilisation (cards in use)", "tensor activity (%)", 100, 20,
       [](const loop::FleetSample& f) { return 100 * f.compute; }},
      {"GPU memory used (cards in use)", "weights + KV in use (%)", 100, 20,
       [](const loop::FleetSample& f) { return 100 * f.memoryUsed; }},
      {"Cards in use", "GPUs", gTop, gStep,
       [](const loop::FleetSample& f) { return static_cast<double>(f.gpusInUse); }},
  };
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const Panel& pn = panels[i];
    const double x0 = static_cast<double>(i % 2) * kW;
    const double y0 = static_cast<double>(i / 2) * kH;
    const double w = kW - kLeft - kRight, h = kH - kTop - kBottom;
    auto px = [&](double minutes) { return x0 + kLeft + minutes / tTop * w; };
    auto py = [&](double v) { return y0 + kTop + h - std::clamp(v, 0.0, pn.top) / pn.top * h; };
    s << "<text x=\"" << num(x0 + kLeft + w / 2) << "\" y=\"" << num(y0 + 24)
      << "\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" << escape(pn.title)
      << "</text>\n";
    for (double v = 0; v <= pn.top + 1e-9; v += pn.step) {
      s << "<line x1=\"" << num(px(0)) << "\" x2=\"" << num(px(tTop)) << "\" y1=\"" << num(py(v))
        << "\" y2=\"" << num(py(v)) << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << num(px(0) - 6)
        << "\" y=\"" << num(py(v) + 4) << "\" text-anchor=\"end\" font-size=\"11\">" << num(v, "%g")
        << "</text>\n";
    }
    for (double t = 0; t <= tTop + 1e-9; t += tStep) {
      s << "<text x=\"" << num(px(t)) << "\" y=\"" << num(y0 + kTop + h + 16)
        << "\" text-anchor=\"middle\" font-size=\"11\">" << num(t, "%g") << "</text>\n";
    }
    s << "<text x=\"" << num(x0 + kLeft + w / 2) << "\" y=\"" << num(y0 + kH - 6)
      << "\" text-anchor=\"middle\" font-size=\"12\">minutes</text>\n"
      << "<text transform=\"translate(" << num(x0 + 16) << "," << num(y0 + kTop + h / 2)
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << escape(pn.label)
      << "</text>\n";
    for (const FleetPolicyResult& p : r.policies) {
      std::string points;
      for (const loop::FleetSample& f : p.timeline) {
        points += num(px(f.timeS / 60)) + "," + num(py(pn.y(f))) + " ";
      }
      s << "<polyline fill=\"none\" stroke-width=\"1.6\" stroke=\"" << colorOf(p.policy)
        << "\" points=\"" << points << "\"><title>" << escape(p.policy) << "</title></polyline>\n";
    }
  }
  // Legend in the fourth quadrant.
  double ly = kH + kTop + 10;
  for (const FleetPolicyResult& p : r.policies) {
    s << "<line x1=\"" << num(kW + kLeft) << "\" x2=\"" << num(kW + kLeft + 24) << "\" y1=\""
      << num(ly) << "\" y2=\"" << num(ly) << "\" stroke-width=\"3\" stroke=\"" << colorOf(p.policy)
      << "\"/>\n<text x=\"" << num(kW + kLeft + 30) << "\" y=\"" << num(ly + 4)
      << "\" font-size=\"12\">" << escape(p.policy) << ": " << num(p.gpuHours, "%.1f")
      << " GPU-h, compute " << num(100 * p.meanComputeUtilization, "%.0f") << " %, memory "
      << num(100 * p.meanMemoryUtilization, "%.0f") << " %, SLO "
      << num(100 * p.sloAttainment, "%.2f") << " %</text>\n";
    ly += 22;
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace tessera::sim
