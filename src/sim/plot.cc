// The SVG plot of an FGD experiment: unallocated GPU % and fragmentation rate against
// arrived load, one line per policy.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/report.h"
#include "sim/svg.h"

namespace tessera::sim {
namespace {

constexpr double kPanelWidth = 520;
constexpr double kPanelHeight = 330;
constexpr double kLeft = 60, kRight = 20, kTop = 50, kBottom = 50;

const char* colorOf(std::string_view policy) {
  if (policy == "random") return "#9e9e9e";
  if (policy == "dotprod") return "#8c6d31";
  if (policy == "clustering") return "#2ca02c";
  if (policy == "packing") return "#9467bd";
  if (policy == "bestfit") return "#1f77b4";
  if (policy == "fgd") return "#ff7f0e";
  if (policy == "tessera") return "#d62728";
  return "#17becf";
}

using svg::escape;
using svg::num;

std::pair<double, double> axis(double max) { return svg::axis(max, 5); }

void panel(std::ostringstream& svg, double x0, const TraceResult& r, const char* title,
           const char* yLabel, bool rate) {
  const double w = kPanelWidth - kLeft - kRight;
  const double h = kPanelHeight - kTop - kBottom;
  double maxY = 0;
  for (const PolicySummary& p : r.policies) {
    for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
      const auto& a = p.meanCurve.allocPct[k];
      const auto& f = p.meanCurve.fragRatePct[k];
      if (rate && f) maxY = std::max(maxY, *f);
      if (!rate && a) maxY = std::max(maxY, 100.0 - *a);
    }
  }
  const auto [top, step] = rate ? std::pair<double, double>{100, 20} : axis(maxY);
  auto px = [&](double x) { return x0 + kLeft + x / 130.0 * w; };
  auto py = [&](double y) { return kTop + h - y / top * h; };
  svg << "<text x=\"" << num(x0 + kLeft + w / 2) << "\" y=\"30\" text-anchor=\"middle\" "
      << "font-size=\"15\" font-weight=\"bold\">" << escape(title) << "</text>\n";
  for (double y = 0; y <= top + 1e-9; y += step) {
    svg << "<line x1=\"" << num(px(0)) << "\" x2=\"" << num(px(130)) << "\" y1=\"" << num(py(y))
        << "\" y2=\"" << num(py(y)) << "\" stroke=\"#e0e0e0\"/>\n"
        << "<text x=\"" << num(px(0) - 6) << "\" y=\"" << num(py(y) + 4)
        << "\" text-anchor=\"end\" font-size=\"11\">" << num(y) << "</text>\n";
  }
  for (int x = 0; x <= 130; x += 10) {
    svg << "<text x=\"" << num(px(x)) << "\" y=\"" << num(kTop + h + 16)
        << "\" text-anchor=\"middle\" font-size=\"11\">" << x << "</text>\n";
  }
  svg << "<line x1=\"" << num(px(100)) << "\" x2=\"" << num(px(100)) << "\" y1=\"" << num(py(0))
      << "\" y2=\"" << num(py(top)) << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n";
  svg << "<rect x=\"" << num(px(0)) << "\" y=\"" << num(kTop) << "\" width=\"" << num(w)
      << "\" height=\"" << num(h) << "\" fill=\"none\" stroke=\"#444\"/>\n";
  svg << "<text x=\"" << num(x0 + kLeft + w / 2) << "\" y=\"" << num(kPanelHeight - 12)
      << "\" text-anchor=\"middle\" font-size=\"12\">arrived GPU load (% of capacity)</text>\n";
  svg << "<text transform=\"translate(" << num(x0 + 16) << "," << num(kTop + h / 2)
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << escape(yLabel)
      << "</text>\n";
  for (const PolicySummary& p : r.policies) {
    std::string points;
    for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
      const auto& a = p.meanCurve.allocPct[k];
      const auto& f = p.meanCurve.fragRatePct[k];
      if (!a || (rate && !f)) continue;
      const double y = rate ? *f : 100.0 - *a;
      points += num(px(static_cast<double>(k))) + "," + num(py(std::clamp(y, 0.0, top))) + " ";
    }
    svg << "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" << colorOf(p.policy)
        << "\" points=\"" << points << "\"><title>" << escape(p.policy) << "</title></polyline>\n";
  }
}

}  // namespace

std::string plotSvg(const TraceResult& r) {
  const double width = 2 * kPanelWidth;
  const double legendHeight = 30;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
      << num(kPanelHeight + legendHeight + 20) << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string seeds = std::to_string(r.policies.empty() ? 0 : r.policies.front().runs.size());
  panel(svg, 0, r, ("Unallocated GPUs — " + r.trace + " (mean of " + seeds + " seeds)").c_str(),
        "unallocated GPU (%)", false);
  panel(svg, kPanelWidth, r, ("Fragmentation rate — " + r.trace).c_str(),
        "fragment / unallocated GPU (%)", true);
  double x = kLeft;
  const double y = kPanelHeight + 20;
  for (const PolicySummary& p : r.policies) {
    svg << "<line x1=\"" << num(x) << "\" x2=\"" << num(x + 24) << "\" y1=\"" << num(y)
        << "\" y2=\"" << num(y) << "\" stroke-width=\"3\" stroke=\"" << colorOf(p.policy)
        << "\"/>\n<text x=\"" << num(x + 30) << "\" y=\"" << num(y + 4) << "\" font-size=\"12\">"
        << escape(p.policy) << " " << fixed2(p.unallocatedAt100.mean) << "% at 100%</text>\n";
    x += 150;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tessera::sim
