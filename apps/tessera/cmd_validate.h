#pragma once
// `tessera validate FILE...`: checks configuration files the way the commands that read them
// do, without running anything. The kind comes from each file's `kind:` (Cluster,
// PlacementRequests, PlacementProfile, ServerConfig, AgentConfig, ServingModel); models and
// custom GPU types of the Cluster files named are known to the PlacementRequests files, as
// `tessera place` knows them.

#include <ostream>
#include <string>
#include <vector>

#include "cli.h"

namespace tessera::cli {

struct ValidateOptions {
  std::vector<std::string> files;
  OutputFormat format = OutputFormat::kTable;
};

// 0 when every file is valid, 2 when one is not (each error names its file and line).
int runValidate(const ValidateOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
