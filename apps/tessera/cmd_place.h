#pragma once
// `tessera place`: plan where a batch of replica requests goes on a cluster described by a
// file, and why; for what does not fit, an eviction plan or the capacity to add.

#include <optional>
#include <ostream>
#include <string>

#include "cli.h"

namespace tessera::cli {

enum class PlaceMode {
  kBatch,       // best-fit-decreasing over the whole batch (sched::planBatch)
  kSequential,  // one request after another, in file order (PlacementEngine::place)
};

struct PlaceOptions {
  std::string clusterPath;
  std::string requestsPath;
  std::optional<std::string> profilePath;  // default: sched::defaultProfile()
  PlaceMode mode = PlaceMode::kBatch;
  OutputFormat format = OutputFormat::kTable;
  std::optional<std::string> explainReplica;  // full rejection list and score breakdown
};

// Returns the process exit code (docs/cli.md).
int runPlace(const PlaceOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
