#pragma once
// Readers for the FGD artifact's reference data (shared/data/fgd-simulator-reference/ and
// shared/data/fgd-simulator-expected-results/; their READMEs give the formats):
//   arrival_order/openb_pod_list_<trace>.csv       seq,seed42..seed51: 0-based pod row index
//                                                  arriving at position seq (empty = shorter)
//   node_tiebreak_rank/openb_pod_list_<trace>.csv  node,seed42..seed51: tie-break rank
//   analysis_*_discrete.csv                        one row per run, columns 0..130

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace tessera::sim {

inline constexpr int kBuckets = 131;  // arrived % 0..130

// Seed columns are named "seed<N>".
struct ArrivalOrders {
  std::string label;
  std::vector<int> seeds;
  std::vector<std::vector<int>> orders;  // parallel to seeds
  // The order for one seed, or an error listing the seeds the file has.
  Result<std::span<const int>> forSeed(int seed) const;
};
Result<ArrivalOrders> readArrivalOrders(const std::string& path);

struct NodeRanks {
  std::string label;
  std::vector<int> seeds;
  std::vector<std::string> nodes;       // in file order
  std::vector<std::vector<int>> ranks;  // parallel to seeds; each parallel to nodes
  // Ranks for `nodeNames` (in that order) for one seed; every node must be in the file.
  Result<std::vector<std::int64_t>> forSeed(int seed, std::span<const std::string> nodeNames) const;
};
Result<NodeRanks> readNodeRanks(const std::string& path);

// One row of an expected-results file.
struct ExpectedRun {
  std::string workload;  // "openb_pod_list_default"
  std::string policy;    // "06-FGD"
  double tune = 0;
  int seed = 0;
  std::array<std::optional<double>, kBuckets> values{};
};
Result<std::vector<ExpectedRun>> readExpectedResults(const std::string& path);

// The artifact's policy id ("01-Random" ...) for one of our policy names ("random" ...);
// empty for policies the artifact does not have.
std::string artifactPolicyId(std::string_view policy);

// Where the reference files of a trace live inside the reference folder.
std::string arrivalOrderPath(const std::string& referenceDir, const std::string& trace);
std::string nodeRankPath(const std::string& referenceDir, const std::string& trace);

}  // namespace tessera::sim
