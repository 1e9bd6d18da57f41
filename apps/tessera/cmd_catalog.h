#pragma once
// `tessera catalog`: the GPU types Tessera knows, with their figures and MIG profiles.

#include <optional>
#include <ostream>
#include <string>

#include "cli.h"

namespace tessera::cli {

struct CatalogOptions {
  OutputFormat format = OutputFormat::kTable;
  std::optional<std::string> type;  // one type in detail (name or alias)
};

// Returns the process exit code.
int runCatalog(const CatalogOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
