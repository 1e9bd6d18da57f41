#pragma once
// What an FGD experiment reports: the comparison with the artifact's cached results (the
// reproduction report), JSON, CSV and a self-contained SVG plot.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "sim/experiment.h"
#include "sim/reference.h"

namespace tessera::sim {

// The artifact's cached results (shared/data/fgd-simulator-expected-results/).
struct ExpectedResults {
  std::vector<ExpectedRun> alloc;     // analysis_allo_discrete.csv
  std::vector<ExpectedRun> frag;      // analysis_frag_discrete.csv
  std::vector<ExpectedRun> fragRate;  // analysis_frag_ratio_discrete.csv
};
Result<ExpectedResults> loadExpectedResults(const std::string& dir);

// One policy of one trace against the artifact, over the seeds both have.
struct Reproduction {
  std::string policy;
  int seeds = 0;         // seeds compared (0: the artifact has no such runs)
  double oursAt100 = 0;  // mean unallocated GPU % at 100 % arrived
  double artifactAt100 = 0;
  double diffAt100 = 0;     // ours - artifact, percentage points
  int buckets = 0;          // allocation buckets compared, over all seeds
  int bucketsWithin = 0;    // ... that differ by at most 0.01 pp (the rounding of the cache)
  double maxAllocDiff = 0;  // largest |ours - artifact| of an allocation bucket, pp
  double maxFragDiff = 0;   // the same for the fragment amount (% of GPUs)
};
std::vector<Reproduction> compareWithExpected(const TraceResult& result,
                                              const ExpectedResults& expected);

// {"trace", "replayed", "gpus", "typical_shapes", "typical_coverage_pct", "seeds",
//  "policies": {name: {"unallocated_gpu_pct_at_100": {"mean", "sd"}, "runs": [...],
//  "curve": [{"arrived_pct", "alloc_pct", "unallocated_gpu_pct", "frag_pct",
//  "frag_rate_pct"}, ...]}}, "reproduction" (when given)}.
nlohmann::json traceJson(const TraceResult& result,
                         const std::vector<Reproduction>* reproduction = nullptr);

// Long-format curves: trace,policy,seed,arrived_pct,alloc_pct,unallocated_gpu_pct,frag_pct,
// frag_rate_pct; one row per run and bucket, plus seed "mean" rows for the mean curves.
void writeCurvesCsv(std::ostream& out, const TraceResult& result, bool header = true);
// trace,policy,seeds,unallocated_gpu_pct_at_100_mean,..._sd[,artifact_mean,diff_pp]
void writeSummaryCsv(std::ostream& out, const std::vector<TraceResult>& results,
                     const std::vector<std::vector<Reproduction>>* reproductions);

// Two panels, unallocated GPU % and fragmentation rate against arrived load, one line per
// policy (mean over seeds); standalone SVG, no scripts or external resources.
std::string plotSvg(const TraceResult& result);

// "%.2f" without locale surprises.
std::string fixed2(double value);

}  // namespace tessera::sim
