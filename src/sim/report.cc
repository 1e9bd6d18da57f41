#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::sim {
namespace {

const ExpectedRun* findRun(const std::vector<ExpectedRun>& runs, const std::string& workload,
                           const std::string& policy, int seed) {
  for (const ExpectedRun& r : runs) {
    if (r.workload == workload && r.policy == policy && r.seed == seed) return &r;
  }
  return nullptr;
}

nlohmann::json optionalNumber(const std::optional<double>& v) {
  return v ? nlohmann::json(std::round(*v * 1e4) / 1e4) : nlohmann::json(nullptr);
}

std::string cell4(const std::optional<double>& v) {
  if (!v) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", *v);
  return buf;
}

void curveRows(std::ostream& out, const std::string& trace, const std::string& policy,
               const std::string& seed, const Curve& c) {
  for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
    if (!c.allocPct[k]) continue;
    out << trace << ',' << policy << ',' << seed << ',' << k << ',' << cell4(c.allocPct[k]) << ','
        << cell4(100.0 - *c.allocPct[k]) << ',' << cell4(c.fragPct[k]) << ','
        << cell4(c.fragRatePct[k]) << '\n';
  }
}

}  // namespace

std::string fixed2(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

Result<ExpectedResults> loadExpectedResults(const std::string& dir) {
  ExpectedResults out;
  auto alloc = readExpectedResults(dir + "/analysis_allo_discrete.csv");
  if (!alloc) return fail(alloc.error());
  out.alloc = std::move(*alloc);
  auto frag = readExpectedResults(dir + "/analysis_frag_discrete.csv");
  if (!frag) return fail(frag.error());
  out.frag = std::move(*frag);
  auto rate = readExpectedResults(dir + "/analysis_frag_ratio_discrete.csv");
  if (!rate) return fail(rate.error());
  out.fragRate = std::move(*rate);
  return out;
}

std::vector<Reproduction> compareWithExpected(const TraceResult& result,
                                              const ExpectedResults& expected) {
  const std::string workload = "openb_pod_list_" + result.trace;
  std::vector<Reproduction> out;
  for (const PolicySummary& p : result.policies) {
    Reproduction r;
    r.policy = p.policy;
    const std::string id = artifactPolicyId(p.policy);
    double ours = 0, theirs = 0;
    for (const RunResult& run : p.runs) {
      if (id.empty()) break;
      const ExpectedRun* a = findRun(expected.alloc, workload, id, run.seed);
      if (a == nullptr) continue;
      const auto& e100 = a->values[100];
      const auto o100 = run.unallocatedAt100();
      if (e100 && o100) {
        ++r.seeds;
        ours += *o100;
        theirs += 100.0 - *e100;
      }
      for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
        if (!a->values[k] || !run.curve.allocPct[k]) continue;
        const double d = std::abs(*run.curve.allocPct[k] - *a->values[k]);
        ++r.buckets;
        if (d <= 0.01 + 1e-9) ++r.bucketsWithin;
        r.maxAllocDiff = std::max(r.maxAllocDiff, d);
      }
      if (const ExpectedRun* f = findRun(expected.frag, workload, id, run.seed)) {
        for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
          if (!f->values[k] || !run.curve.fragPct[k]) continue;
          r.maxFragDiff = std::max(r.maxFragDiff, std::abs(*run.curve.fragPct[k] - *f->values[k]));
        }
      }
    }
    if (r.seeds > 0) {
      r.oursAt100 = ours / r.seeds;
      r.artifactAt100 = theirs / r.seeds;
      r.diffAt100 = r.oursAt100 - r.artifactAt100;
    }
    out.push_back(r);
  }
  return out;
}

nlohmann::json traceJson(const TraceResult& result, const std::vector<Reproduction>* reproduction) {
  nlohmann::json j;
  j["trace"] = result.trace;
  j["replayed"] = result.replayed;
  j["gpus"] = result.gpuCount;
  j["typical_shapes"] = result.typical.shapes.size();
  j["typical_coverage_pct"] = std::round(result.typical.coveragePct() * 100) / 100;
  nlohmann::json seeds = nlohmann::json::array();
  if (!result.policies.empty()) {
    for (const RunResult& r : result.policies.front().runs) seeds.push_back(r.seed);
  }
  j["seeds"] = seeds;
  nlohmann::json policies = nlohmann::json::object();
  for (const PolicySummary& p : result.policies) {
    nlohmann::json pj;
    pj["unallocated_gpu_pct_at_100"] = {{"mean", std::round(p.unallocatedAt100.mean * 1e4) / 1e4},
                                        {"sd", std::round(p.unallocatedAt100.sd * 1e4) / 1e4}};
    if (p.boundAt100.n > 0) {
      pj["unallocated_gpu_pct_lower_bound_at_100"] = {
          {"mean", std::round(p.boundAt100.mean * 1e4) / 1e4},
          {"sd", std::round(p.boundAt100.sd * 1e4) / 1e4}};
    }
    nlohmann::json runs = nlohmann::json::array();
    for (const RunResult& r : p.runs) {
      nlohmann::json rj = {{"seed", r.seed},
                           {"unallocated_gpu_pct_at_100", optionalNumber(r.unallocatedAt100())},
                           {"pods", r.pods},
                           {"placed", r.placed},
                           {"failed", r.failed},
                           {"seconds", std::round(r.seconds * 1000) / 1000}};
      if (r.boundAt100) {
        rj["unallocated_gpu_pct_lower_bound_at_100"] = std::round(*r.boundAt100 * 1e4) / 1e4;
      }
      if (r.placeAllBoundAt100) {
        rj["place_all_lower_bound_pct_at_100"] = std::round(*r.placeAllBoundAt100 * 1e4) / 1e4;
      }
      runs.push_back(std::move(rj));
    }
    pj["runs"] = runs;
    nlohmann::json curve = nlohmann::json::array();
    for (std::size_t k = 0; k < static_cast<std::size_t>(kBuckets); ++k) {
      const Curve& c = p.meanCurve;
      if (!c.allocPct[k]) continue;
      curve.push_back({{"arrived_pct", k},
                       {"alloc_pct", optionalNumber(c.allocPct[k])},
                       {"unallocated_gpu_pct", optionalNumber(100.0 - *c.allocPct[k])},
                       {"frag_pct", optionalNumber(c.fragPct[k])},
                       {"frag_rate_pct", optionalNumber(c.fragRatePct[k])}});
    }
    pj["curve"] = curve;
    policies[p.policy] = pj;
  }
  j["policies"] = policies;
  if (result.placeAllBoundAt100.n > 0) {
    j["place_all_lower_bound_pct_at_100"] = {
        {"mean", std::round(result.placeAllBoundAt100.mean * 1e4) / 1e4},
        {"sd", std::round(result.placeAllBoundAt100.sd * 1e4) / 1e4}};
  }
  if (reproduction != nullptr) {
    nlohmann::json rj = nlohmann::json::object();
    for (const Reproduction& r : *reproduction) {
      if (r.seeds == 0) continue;
      rj[r.policy] = {
          {"seeds", r.seeds},
          {"ours_unallocated_gpu_pct_at_100", std::round(r.oursAt100 * 1e4) / 1e4},
          {"artifact_unallocated_gpu_pct_at_100", std::round(r.artifactAt100 * 1e4) / 1e4},
          {"diff_pp", std::round(r.diffAt100 * 1e4) / 1e4},
          {"buckets_compared", r.buckets},
          {"buckets_within_0_01", r.bucketsWithin},
          {"max_alloc_diff_pp", std::round(r.maxAllocDiff * 1e4) / 1e4},
          {"max_frag_diff_pp", std::round(r.maxFragDiff * 1e4) / 1e4}};
    }
    j["reproduction"] = rj;
  }
  return j;
}

void writeCurvesCsv(std::ostream& out, const TraceResult& result, bool header) {
  if (header) {
    out << "trace,policy,seed,arrived_pct,alloc_pct,unallocated_gpu_pct,frag_pct,"
           "frag_rate_pct\n";
  }
  for (const PolicySummary& p : result.policies) {
    for (const RunResult& r : p.runs) {
      curveRows(out, result.trace, p.policy, std::to_string(r.seed), r.curve);
    }
    curveRows(out, result.trace, p.policy, "mean", p.meanCurve);
  }
}

void writeSummaryCsv(std::ostream& out, const std::vector<TraceResult>& results,
                     const std::vector<std::vector<Reproduction>>* reproductions) {
  // The LP bounds (--bound) when any trace has them.
  const bool bounds = std::any_of(results.begin(), results.end(), [](const TraceResult& r) {
    return r.placeAllBoundAt100.n > 0;
  });
  out << "trace,policy,seeds,unallocated_gpu_pct_at_100_mean,unallocated_gpu_pct_at_100_sd";
  if (reproductions) out << ",artifact_unallocated_gpu_pct_at_100_mean,diff_pp,artifact_seeds";
  if (bounds) {
    out << ",unallocated_gpu_pct_lower_bound_at_100_mean,place_all_lower_bound_pct_at_100_mean";
  }
  out << '\n';
  for (std::size_t t = 0; t < results.size(); ++t) {
    const TraceResult& tr = results[t];
    for (std::size_t p = 0; p < tr.policies.size(); ++p) {
      const PolicySummary& ps = tr.policies[p];
      out << tr.trace << ',' << ps.policy << ',' << ps.unallocatedAt100.n << ','
          << cell4(ps.unallocatedAt100.mean) << ',' << cell4(ps.unallocatedAt100.sd);
      if (reproductions) {
        const Reproduction& r = (*reproductions)[t][p];
        if (r.seeds > 0) {
          out << ',' << cell4(r.artifactAt100) << ',' << cell4(r.diffAt100) << ',' << r.seeds;
        } else {
          out << ",,,0";
        }
      }
      if (bounds) {
        out << ',' << (ps.boundAt100.n > 0 ? cell4(ps.boundAt100.mean) : "") << ','
            << (tr.placeAllBoundAt100.n > 0 ? cell4(tr.placeAllBoundAt100.mean) : "");
      }
      out << '\n';
    }
  }
}

}  // namespace tessera::sim
