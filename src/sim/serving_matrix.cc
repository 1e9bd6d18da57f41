#include "sim/serving_matrix.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

namespace tessera::sim {
namespace {

ServingTrace atRate(const ServingTrace& t, double rate) {
  ServingTrace out = t;
  for (ServingRequest& r : out.requests) {
    r.arrivalUs = std::llround(static_cast<double>(r.arrivalUs) / rate);
  }
  return out;
}

const ServingPolicyResult* find(const ServingReport& r, std::string_view policy) {
  for (const auto& p : r.policies) {
    if (p.policy == policy) return &p;
  }
  return nullptr;
}

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f %%", 100 * v);
  return b;
}

std::string matrixNum(double v, const char* f = "%.2f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

bool isBaseline(std::string_view policy) {
  return policy != "tessera" && policy != "clairvoyant";
}

}  // namespace

const char* verdictName(CellVerdict::Kind kind) {
  switch (kind) {
    case CellVerdict::Kind::kNotApplicable:
      return "n/a";
    case CellVerdict::Kind::kPass:
      return "pass";
    case CellVerdict::Kind::kMiss:
      return "miss";
  }
  return "?";
}

CellVerdict judgeCell(const MatrixCell& cell, double withinClairvoyant) {
  CellVerdict v;
  const double target = cell.report.sloTarget;
  for (const auto& p : cell.report.policies) {
    if (!isBaseline(p.policy) || p.sloAttainment < target) continue;
    if (!v.bestBaseline || p.gpuHours < v.bestBaselineGpuHours) {
      v.bestBaseline = p.policy;
      v.bestBaselineGpuHours = p.gpuHours;
    }
  }
  const ServingPolicyResult* c = find(cell.report, "clairvoyant");
  const ServingPolicyResult* t = find(cell.report, "tessera");
  if (c == nullptr || t == nullptr) {
    v.why = "the cell ran without tessera or the clairvoyant";
    return v;
  }
  if (c->sloAttainment < target) {
    v.why = c->infeasible.value_or("the clairvoyant misses the target");
    return v;
  }
  std::vector<std::string> misses;
  if (t->sloAttainment < target) misses.push_back("attainment " + pct(t->sloAttainment));
  if (t->gpuHours > withinClairvoyant * c->gpuHours + 1e-9) {
    misses.push_back(matrixNum(t->gpuHours / c->gpuHours) + "x the clairvoyant's GPU-hours");
  }
  if (v.bestBaseline && t->gpuHours > v.bestBaselineGpuHours + 1e-9) {
    misses.push_back("more GPU-hours than " + *v.bestBaseline + " (" +
                     matrixNum(v.bestBaselineGpuHours) + ")");
  }
  v.kind = misses.empty() ? CellVerdict::Kind::kPass : CellVerdict::Kind::kMiss;
  for (const auto& m : misses) v.why += (v.why.empty() ? "" : "; ") + m;
  return v;
}

MatrixSummary summarizeMatrix(const std::vector<MatrixCell>& cells, double withinClairvoyant) {
  MatrixSummary m;
  std::vector<double> ratios;
  for (const MatrixCell& c : cells) {
    ++m.cells;
    auto trace = std::find_if(m.passByTrace.begin(), m.passByTrace.end(),
                              [&](const auto& p) { return p.first == c.trace; });
    if (trace == m.passByTrace.end()) trace = m.passByTrace.insert(trace, {c.trace, 0});
    const CellVerdict v = judgeCell(c, withinClairvoyant);
    switch (v.kind) {
      case CellVerdict::Kind::kPass:
        ++m.pass;
        ++trace->second;
        break;
      case CellVerdict::Kind::kMiss:
        ++m.miss;
        break;
      case CellVerdict::Kind::kNotApplicable:
        ++m.notApplicable;
        break;
    }
    const ServingPolicyResult* t = find(c.report, "tessera");
    const ServingPolicyResult* cv = find(c.report, "clairvoyant");
    if (t == nullptr || cv == nullptr || cv->sloAttainment < c.report.sloTarget) continue;
    ++m.reachable;
    if (t->sloAttainment >= c.report.sloTarget) ++m.tesseraAtTarget;
    m.tesseraGpuHours += t->gpuHours;
    // The same test as judgeCell's.
    if (t->gpuHours <= withinClairvoyant * cv->gpuHours + 1e-9) ++m.withinClairvoyant;
    if (cv->gpuHours > 0) ratios.push_back(t->gpuHours / cv->gpuHours);
  }
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    const std::size_t n = ratios.size();
    m.medianVsClairvoyant = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  }
  return m;
}

Result<std::vector<MatrixCell>> runServingMatrix(const std::vector<MatrixTrace>& traces,
                                                 const model::GpuCatalog& catalog,
                                                 const MatrixOptions& o) {
  if (traces.empty()) return fail(Error::invalid("the matrix has no trace"));
  for (double r : o.rates) {
    if (!(r > 0) || !std::isfinite(r)) return fail(Error::invalid("rates must be numbers > 0"));
    for (const MatrixTrace& t : traces) {
      TESSERA_RETURN_IF_ERROR(checkServingSpan(static_cast<double>(t.trace.spanUs()) / 1e6 / r,
                                               t.name + " at rate " + matrixNum(r, "%g")));
    }
  }
  // The scaled traces, shared read-only by the cells.
  std::map<std::pair<std::size_t, double>, ServingTrace> scaled;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (double r : o.rates) scaled.emplace(std::pair{i, r}, atRate(traces[i].trace, r));
  }
  struct Job {
    std::size_t trace;
    double rate;
    bool warm;
    std::string gpu;
    bool cacheHit;
  };
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (double r : o.rates) {
      for (bool warm : o.warmStarts) {
        for (const std::string& gpu : o.gpus) {
          for (bool hit : o.nodeCacheHits) jobs.push_back({i, r, warm, gpu, hit});
        }
      }
    }
  }
  std::vector<MatrixCell> cells(jobs.size());
  std::vector<std::optional<Error>> errors(jobs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t k = next++; k < jobs.size(); k = next++) {
      const Job& j = jobs[k];
      const ServingTrace& trace = scaled.at({j.trace, j.rate});
      ServingOptions so = o.base;
      so.fleet.gpuType = j.gpu;
      so.fleet.modelCachedOnDisk = j.cacheHit;
      so.warmStart = j.warm;
      MatrixCell& cell = cells[k];
      cell.trace = traces[j.trace].name;
      cell.rate = j.rate;
      cell.warmStart = j.warm;
      cell.gpu = j.gpu;
      cell.nodeCacheHit = j.cacheHit;
      ServingReport& rep = cell.report;
      rep.trace = cell.trace;
      rep.requests = static_cast<int>(trace.requests.size());
      rep.gpuType = j.gpu;
      rep.model = so.model.name;
      rep.sloTtftMs = so.sloTtftMs;
      rep.sloPrefillFactor = so.sloPrefillFactor;
      rep.timeScale = 1 / j.rate;
      rep.sloTarget = so.sloTarget;
      auto perf = servingPerf(catalog, so);
      if (!perf) {
        errors[k] = perf.error();
        continue;
      }
      rep.lowerBound = servingLowerBound(trace, *perf, so, so.sloTarget);
      for (const std::string& policy : o.policies) {
        auto r = runServing(trace, catalog, so, policy);
        if (!r) {
          errors[k] = Error::invalid(cell.trace + " at rate " + matrixNum(j.rate, "%g") + " on " +
                                     j.gpu + ", " + policy + ": " + r.error().message);
          break;
        }
        r->timeline.clear();  // the matrix keeps the summary only
        r->decisions.clear();
        rep.policies.push_back(std::move(*r));
      }
    }
  };
  const int threads = std::max(1, o.jobs);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const auto& e : errors) {
    if (e) return fail(*e);
  }
  return cells;
}

nlohmann::json matrixJson(const std::vector<MatrixCell>& cells, const MatrixOptions& o) {
  nlohmann::json out;
  nlohmann::json list = nlohmann::json::array();
  for (const MatrixCell& c : cells) {
    const CellVerdict v = judgeCell(c, o.withinClairvoyant);
    nlohmann::json j = servingJson(c.report);
    j["rate"] = c.rate;
    j["warm_start"] = c.warmStart;
    j["node_cache_hit"] = c.nodeCacheHit;
    j["verdict"] = verdictName(v.kind);
    j["why"] = v.why;
    j["best_baseline"] = v.bestBaseline ? nlohmann::json(*v.bestBaseline) : nlohmann::json(nullptr);
    list.push_back(std::move(j));
  }
  out["cells"] = std::move(list);
  const MatrixSummary m = summarizeMatrix(cells, o.withinClairvoyant);
  nlohmann::json byTrace = nlohmann::json::object();
  for (const auto& [name, n] : m.passByTrace) byTrace[name] = n;
  out["summary"] = {
      {"cells", m.cells},
      {"pass", m.pass},
      {"miss", m.miss},
      {"n/a", m.notApplicable},
      {"pass_by_trace", byTrace},
      {"reachable", m.reachable},
      {"tessera_at_target", m.tesseraAtTarget},
      {"within_clairvoyant_cells", m.withinClairvoyant},
      {"median_tessera_vs_clairvoyant",
       m.medianVsClairvoyant ? nlohmann::json(std::round(*m.medianVsClairvoyant * 1000) / 1000)
                             : nlohmann::json(nullptr)},
      {"tessera_gpu_hours_reachable", std::round(m.tesseraGpuHours * 10) / 10},
      {"within_clairvoyant", o.withinClairvoyant},
      {"model_error",
       {{"prefill_speed", o.base.actual.prefillSpeed},
        {"decode_speed", o.base.actual.decodeSpeed},
        {"cold_start", o.base.actual.coldStart}}}};
  return out;
}

void writeMatrixMarkdown(std::ostream& out, const std::vector<MatrixCell>& cells,
                         const MatrixOptions& o) {
  std::vector<std::pair<const MatrixCell*, CellVerdict>> misses;
  std::string trace;
  for (const MatrixCell& c : cells) {
    if (c.trace != trace) {
      trace = c.trace;
      out << "\n#### " << trace << "\n\n"
          << "| rate | warm start | GPU | cold start | tessera | clairvoyant | lower bound | "
             "tessera / clairvoyant | cheapest baseline at target | verdict |\n"
          << "|---|---|---|---|---|---|---|---|---|---|\n";
    }
    const CellVerdict v = judgeCell(c, o.withinClairvoyant);
    if (v.kind == CellVerdict::Kind::kMiss) misses.emplace_back(&c, v);
    const ServingPolicyResult* t = find(c.report, "tessera");
    const ServingPolicyResult* cv = find(c.report, "clairvoyant");
    auto cellOf = [](const ServingPolicyResult* p) {
      return p ? pct(p->sloAttainment) + ", " + matrixNum(p->gpuHours) : std::string("-");
    };
    const double bound = c.report.lowerBoundOr(-1);
    out << "| " << matrixNum(c.rate, "%g") << " | " << (c.warmStart ? "on" : "off") << " | "
        << c.gpu << " | " << (c.nodeCacheHit ? "node cache" : "remote") << " | " << cellOf(t)
        << " | " << cellOf(cv) << " | " << (bound >= 0 ? matrixNum(bound) : std::string("none"))
        << " | "
        << (t && cv && cv->gpuHours > 0 ? matrixNum(t->gpuHours / cv->gpuHours) : std::string("-"))
        << " | "
        << (v.bestBaseline ? *v.bestBaseline + ", " + matrixNum(v.bestBaselineGpuHours)
                           : std::string("none"))
        << " | " << verdictName(v.kind) << " |\n";
  }
  const MatrixSummary m = summarizeMatrix(cells, o.withinClairvoyant);
  std::string byTrace;
  for (const auto& [name, n] : m.passByTrace) {
    byTrace += (byTrace.empty() ? "" : ", ") + name + " " + std::to_string(n);
  }
  out << "\n"
      << m.cells << " cells: " << m.pass << " pass (" << byTrace << "), " << m.miss << " miss, "
      << m.notApplicable << " n/a (the clairvoyant cannot reach the target).\n"
      << "Where the clairvoyant reaches the target (" << m.reachable
      << " cells): tessera reaches it in " << m.tesseraAtTarget << ", costs at most "
      << matrixNum(o.withinClairvoyant, "%g") << "x the clairvoyant's GPU-hours in "
      << m.withinClairvoyant << ", "
      << (m.medianVsClairvoyant ? matrixNum(*m.medianVsClairvoyant) + "x" : std::string("none"))
      << " in the median cell, " << matrixNum(m.tesseraGpuHours, "%.1f") << " GPU-hours in all.\n";
  if (!misses.empty()) {
    out << "\nMisses:\n\n";
    for (const auto& [c, v] : misses) {
      out << "- " << c->trace << ", rate " << matrixNum(c->rate, "%g") << ", warm start "
          << (c->warmStart ? "on" : "off") << ", " << c->gpu << ", "
          << (c->nodeCacheHit ? "node cache" : "remote") << ": " << v.why << "\n";
    }
  }
}

}  // namespace tessera::sim
