#pragma once
// `tessera profile PATH`: what a model's files say (weights by dtype, parameters, attention
// shape) and the GPU memory one replica needs, as a table or as the JSON body that
// POST /api/v1/models accepts. docs/profiling.md describes what is read and the formulas.

#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.h"
#include "profile/estimate.h"

namespace tessera::cli {

struct ProfileOptions {
  std::string path;  // .safetensors, .gguf or a model directory
  profile::EstimateOptions estimate;
  std::optional<std::string> name;  // model name; default: the directory or file stem
  OutputFormat format = OutputFormat::kTable;
};

// Returns the process exit code.
int runProfile(const ProfileOptions& options, std::ostream& out, std::ostream& err);

class ProfileCommand {
 public:
  explicit ProfileCommand(CLI::App& app);
  bool parsed() const { return command_->parsed(); }
  int run(std::ostream& out, std::ostream& err);

 private:
  CLI::App* command_;
  ProfileOptions options_;
  std::string output_ = "table";
};

}  // namespace tessera::cli
