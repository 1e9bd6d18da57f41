#include "sim/serving_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/svg.h"

namespace tessera::sim {
namespace {

double round3(double v) {
  return std::round(v * 1000) / 1000;
}

using svg::escape;
using svg::num;

std::pair<double, double> axis(double max) {
  return svg::axis(max, 4);
}

}  // namespace

double ServingReport::lowerBoundOr(double none) const {
  return lowerBound && lowerBound->gpuHours ? *lowerBound->gpuHours : none;
}

std::optional<double> ServingReport::clairvoyantGpuHours() const {
  for (const auto& p : policies) {
    if (p.policy == "clairvoyant" && !p.infeasible && p.gpuHours > 0) return p.gpuHours;
  }
  return std::nullopt;
}

nlohmann::json servingJson(const ServingReport& report) {
  nlohmann::json j;
  j["trace"] = report.trace;
  j["requests"] = report.requests;
  j["gpu"] = report.gpuType;
  j["model"] = report.model;
  j["slo_ttft_ms"] = report.sloTtftMs;
  j["slo_prefill_factor"] = report.sloPrefillFactor;
  j["time_scale"] = report.timeScale;
  j["slo_target"] = report.sloTarget;
  const double bound = report.lowerBoundOr(-1);
  j["lower_bound_gpu_hours"] = bound >= 0 ? nlohmann::json(round3(bound)) : nlohmann::json(nullptr);
  if (report.lowerBound) {
    const ServingLowerBound& b = *report.lowerBound;
    nlohmann::json lb = {{"work_gpu_hours", round3(b.workGpuHours)},
                         {"coverage_gpu_hours", round3(b.coverageGpuHours)},
                         {"min_share", round3(b.minShare)},
                         {"min_cold_start_s", round3(b.minColdStartS)},
                         {"never_servable", b.neverServable},
                         {"allowed_misses", b.allowedMisses}};
    if (!b.reason.empty()) lb["reason"] = b.reason;
    j["lower_bound"] = std::move(lb);
  }
  const std::optional<double> clairvoyant = report.clairvoyantGpuHours();
  nlohmann::json policies = nlohmann::json::object();
  for (const ServingPolicyResult& r : report.policies) {
    nlohmann::json p;
    p["slo_attainment"] = std::round(r.sloAttainment * 1e6) / 1e6;
    p["gpu_hours"] = round3(r.gpuHours);
    p["meets_target"] = r.sloAttainment >= report.sloTarget;
    p["vs_clairvoyant"] =
        clairvoyant ? nlohmann::json(round3(r.gpuHours / *clairvoyant)) : nlohmann::json(nullptr);
    p["vs_lower_bound"] =
        bound > 0 ? nlohmann::json(round3(r.gpuHours / bound)) : nlohmann::json(nullptr);
    if (r.infeasible) p["infeasible"] = *r.infeasible;
    p["ttft_p50_ms"] = round3(r.ttftP50Ms);
    p["ttft_p99_ms"] = round3(r.ttftP99Ms);
    p["queue_p50_ms"] = round3(r.queueP50Ms);
    p["queue_p99_ms"] = round3(r.queueP99Ms);
    p["scale_events"] = r.scaleEvents();
    p["scale_ups"] = r.scaleUps;
    p["scale_downs"] = r.scaleDowns;
    p["cold_starts"] = r.coldStarts;
    p["cold_starts_by_tier"] = {{cacheTierName(CacheTier::kHostMemory), r.coldStartsByTier[0]},
                                {cacheTierName(CacheTier::kLocalDisk), r.coldStartsByTier[1]},
                                {cacheTierName(CacheTier::kRemote), r.coldStartsByTier[2]}};
    p["slo_met"] = r.sloMet;
    p["served"] = r.served;
    p["unserved"] = r.unserved;
    p["rejected"] = r.rejected;
    p["cut_off"] = r.cutOff;
    p["placement_failures"] = r.placementFailures;
    p["peak_replicas"] = r.peakReplicas;
    p["mean_serving_replicas"] = round3(r.meanServingReplicas);
    p["horizon_s"] = round3(r.horizonS);
    p["wall_seconds"] = std::round(r.wallSeconds * 100) / 100;
    if (!r.detail.empty()) p["detail"] = r.detail;
    if (r.prefixCacheHitRate) p["prefix_cache_hit_rate"] = round3(*r.prefixCacheHitRate);
    policies[r.policy] = std::move(p);
  }
  j["policies"] = std::move(policies);
  return j;
}

void writeServingCsv(std::ostream& out, const ServingReport& report, bool header) {
  if (header) {
    out << "trace,policy,requests,slo_attainment,gpu_hours,ttft_p50_ms,ttft_p99_ms,queue_p50_ms,"
           "queue_p99_ms,scale_events,cold_starts,served,unserved,rejected,cut_off,"
           "placement_failures,peak_replicas,mean_serving_replicas\n";
  }
  for (const ServingPolicyResult& r : report.policies) {
    out << report.trace << ',' << r.policy << ',' << r.requests << ','
        << num(r.sloAttainment, "%.6f") << ',' << num(r.gpuHours, "%.3f") << ','
        << num(r.ttftP50Ms, "%.3f") << ',' << num(r.ttftP99Ms, "%.3f") << ','
        << num(r.queueP50Ms, "%.3f") << ',' << num(r.queueP99Ms, "%.3f") << ',' << r.scaleEvents()
        << ',' << r.coldStarts << ',' << r.served << ',' << r.unserved << ',' << r.rejected << ','
        << r.cutOff << ',' << r.placementFailures << ',' << r.peakReplicas << ','
        << num(r.meanServingReplicas, "%.3f") << '\n';
  }
}

void writeTimelineCsv(std::ostream& out, const ServingPolicyResult& result) {
  out << "time_s,arrivals_per_s,queue,running,replicas_loading,replicas_ready,replicas_draining,"
         "desired\n";
  for (const TimelinePoint& p : result.timeline) {
    out << num(p.timeS, "%.0f") << ',' << num(p.arrivalsPerS, "%.3f") << ',' << p.queue << ','
        << p.running << ',' << p.loading << ',' << p.ready << ',' << p.draining << ',' << p.desired
        << '\n';
  }
}

void writeDecisionsCsv(std::ostream& out, const ServingPolicyResult& result) {
  out << "time_s,serving,recommended,desired,drained,reason\n";
  for (const DecisionRecord& d : result.decisions) {
    std::string reason;
    for (char c : d.reason) reason += c == '"' ? std::string("\"\"") : std::string(1, c);
    out << num(d.timeS, "%.0f") << ',' << d.serving << ',' << d.recommended << ',' << d.desired
        << ',' << d.drained << ",\"" << reason << "\"\n";
  }
}

std::string servingPlotSvg(const ServingReport& report) {
  constexpr double kWidth = 900, kPanel = 170, kLeft = 60, kRight = 60, kTop = 60, kGap = 40;
  const double w = kWidth - kLeft - kRight;
  const double h = kPanel - kGap;
  const auto n = static_cast<double>(report.policies.size());
  const double height = kTop + n * kPanel + 30;
  double maxT = 1, maxRate = 0;
  int maxReplicas = 1;
  for (const auto& r : report.policies) {
    for (const auto& p : r.timeline) {
      maxT = std::max(maxT, p.timeS);
      maxRate = std::max(maxRate, p.arrivalsPerS);
      maxReplicas = std::max(maxReplicas, p.loading + p.ready + p.draining);
    }
  }
  const auto [rateTop, rateStep] = axis(maxRate);
  // Replica counts are whole: whole ticks.
  const double repStep = std::max(1, (maxReplicas + 4) / 5);
  const double repTop = std::ceil(maxReplicas / repStep) * repStep;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\""
      << num(height) << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << num(kWidth / 2) << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" "
      << "font-weight=\"bold\">Replicas vs load — " << escape(report.trace) << " ("
      << report.requests << " requests, " << escape(report.model) << " on "
      << escape(report.gpuType) << ")</text>\n"
      << "<text x=\"" << num(kWidth / 2) << "\" y=\"44\" text-anchor=\"middle\" font-size=\"12\">"
      << "grey: arrivals/s (right axis); blue: ready, orange: loading, red: draining replicas "
         "(left axis)</text>\n";
  for (std::size_t i = 0; i < report.policies.size(); ++i) {
    const ServingPolicyResult& r = report.policies[i];
    const double y0 = kTop + static_cast<double>(i) * kPanel;
    auto px = [&](double t) { return kLeft + t / maxT * w; };
    auto pyRep = [&](double v) { return y0 + h - v / repTop * h; };
    auto pyRate = [&](double v) { return y0 + h - v / rateTop * h; };
    svg << "<text x=\"" << num(kLeft) << "\" y=\"" << num(y0 - 6) << "\" font-size=\"13\" "
        << "font-weight=\"bold\">" << escape(r.policy) << "</text>"
        << "<text x=\"" << num(kLeft + w) << "\" y=\"" << num(y0 - 6)
        << "\" text-anchor=\"end\" font-size=\"11\">SLO " << num(100 * r.sloAttainment, "%.2f")
        << "%, " << num(r.gpuHours, "%.2f") << " GPU-h, " << r.coldStarts
        << " cold starts</text>\n";
    for (double v = 0; v <= repTop + 1e-9; v += repStep) {
      svg << "<line x1=\"" << num(kLeft) << "\" x2=\"" << num(kLeft + w) << "\" y1=\""
          << num(pyRep(v)) << "\" y2=\"" << num(pyRep(v)) << "\" stroke=\"#eee\"/>"
          << "<text x=\"" << num(kLeft - 6) << "\" y=\"" << num(pyRep(v) + 4)
          << "\" text-anchor=\"end\" font-size=\"10\">" << num(v, "%g") << "</text>\n";
    }
    for (double v = 0; v <= rateTop + 1e-9; v += rateStep) {
      svg << "<text x=\"" << num(kLeft + w + 6) << "\" y=\"" << num(pyRate(v) + 4)
          << "\" font-size=\"10\" fill=\"#888\">" << num(v, "%g") << "</text>\n";
    }
    std::string area = num(px(0)) + "," + num(pyRate(0)) + " ";
    std::string ready, loading, draining;
    for (const TimelinePoint& p : r.timeline) {
      area += num(px(p.timeS)) + "," + num(pyRate(p.arrivalsPerS)) + " ";
      ready += num(px(p.timeS)) + "," + num(pyRep(p.ready)) + " ";
      loading += num(px(p.timeS)) + "," + num(pyRep(p.loading)) + " ";
      draining += num(px(p.timeS)) + "," + num(pyRep(p.draining)) + " ";
    }
    if (!r.timeline.empty()) area += num(px(r.timeline.back().timeS)) + "," + num(pyRate(0));
    svg << "<polygon fill=\"#ddd\" stroke=\"none\" points=\"" << area << "\"/>\n"
        << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.8\" points=\"" << ready
        << "\"><title>ready</title></polyline>\n"
        << "<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.2\" points=\"" << loading
        << "\"><title>loading</title></polyline>\n"
        << "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.2\" points=\"" << draining
        << "\"><title>draining</title></polyline>\n"
        << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(y0) << "\" width=\"" << num(w)
        << "\" height=\"" << num(h) << "\" fill=\"none\" stroke=\"#444\"/>\n";
    if (i + 1 == report.policies.size()) {
      const auto [tTop, tStep] = axis(maxT / 60);
      for (double m = 0; m <= tTop + 1e-9 && m * 60 <= maxT + 1e-9; m += tStep) {
        svg << "<text x=\"" << num(px(m * 60)) << "\" y=\"" << num(y0 + h + 14)
            << "\" text-anchor=\"middle\" font-size=\"10\">" << num(m, "%g") << "</text>\n";
      }
      svg << "<text x=\"" << num(kLeft + w / 2) << "\" y=\"" << num(y0 + h + 30)
          << "\" text-anchor=\"middle\" font-size=\"12\">time (minutes)</text>\n";
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tessera::sim
