#pragma once
// `tessera agent`: the node agent (docs/agent.md).
//   tessera agent run    [--config FILE] [flags]   run the agent until drained or signalled
//   tessera agent drain  [--admin ADDR]            drain a running agent (a preStop hook)
//   tessera agent status [--admin ADDR]            print the running agent's status (JSON)
// Wiring only: the agent lives in src/agent.

#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

struct AgentFlags {
  std::optional<std::string> configPath, nodeName, server, tokenFile, tlsCa, admin, cacheDir,
      gpuDiscovery, nvmlLibrary, logFormat;
  std::optional<double> heartbeatSeconds;
};

class AgentCommand {
 public:
  explicit AgentCommand(CLI::App& app);
  AgentCommand(const AgentCommand&) = delete;
  AgentCommand& operator=(const AgentCommand&) = delete;
  bool parsed() const { return command_->parsed(); }
  int run(std::ostream& out, std::ostream& err);

 private:
  int runAgent(std::ostream& out, std::ostream& err);
  int runDrain(std::ostream& out, std::ostream& err);
  int runStatus(std::ostream& out, std::ostream& err);

  CLI::App* command_;
  CLI::App* runCmd_;
  CLI::App* drainCmd_;
  CLI::App* statusCmd_;
  AgentFlags flags_;
  std::optional<std::string> adminTarget_, adminConfig_;
  double drainTimeoutSeconds_ = 0;  // 0: the config's stop-new-work + in-flight limit + 30 s
};

}  // namespace tessera::cli
