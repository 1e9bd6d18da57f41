#pragma once
// `tessera serve`: the control plane as a service (HTTP API, kube-scheduler extender,
// Prometheus metrics). docs/cli.md and docs/api.md describe it.

#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "common/result.h"
#include "serve_settings.h"

namespace tessera::cli {

class ServeCommand {
 public:
  explicit ServeCommand(CLI::App& app);
  bool parsed() const { return command_->parsed(); }
  int run(std::ostream& out, std::ostream& err);

 private:
  // Fills what no flag set from $TESSERA_* variables, then from the --config file.
  Result<void> resolve();

  CLI::App* command_;
  ServeOptions options_;
};

}  // namespace tessera::cli
