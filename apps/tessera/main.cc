// tessera: one binary, one subcommand per job. Parsing and dispatch only; each command lives
// in its own cmd_*.cc.

#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli.h"
#include "cmd_agent.h"
#include "cmd_catalog.h"
#include "cmd_place.h"
#include "cmd_profile.h"
#include "cmd_serve.h"
#include "cmd_simulate.h"
#include "cmd_simulate_fleet.h"
#include "cmd_validate.h"
#include "common/text.h"

namespace {

using tessera::cli::OutputFormat;

// Flag values are read as strings and checked against a closed set, so that a bad value's
// message lists the valid ones ("--output: yaml not in {table,json}").
struct OutputFlag {
  std::string value = "table";
  OutputFormat format() const {
    return value == "json" ? OutputFormat::kJson : OutputFormat::kTable;
  }
};

void addOutputFlag(CLI::App& command, OutputFlag& flag) {
  command
      .add_option("-o,--output", flag.value,
                  "Output format: table (for people) or json (for programs)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

std::string versionText() {
  return std::string("tessera ") + TESSERA_VERSION;
}

int runVersion(OutputFormat format) {
  if (format == OutputFormat::kJson) {
    std::cout << "{\"version\": \"" << TESSERA_VERSION << "\"}\n";
  } else {
    std::cout << versionText() << '\n';
  }
  return tessera::cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera: placement, autoscaling and fast loading for GPU inference fleets.",
               "tessera"};
  app.set_version_flag("--version", versionText());
  app.require_subcommand(1);
  app.footer("Exit codes: 0 success, 1 internal error, 2 bad input. See docs/cli.md.");
  // CLI11's messages, prefixed with the command line that failed ("tessera place: ...").
  app.failure_message([](const CLI::App* top, const CLI::Error& e) {
    std::string where = top->get_name();
    const CLI::App* deepest = top;
    for (const CLI::App* sub = top; sub != nullptr;) {
      const auto subs = sub->get_subcommands();
      if (subs.empty()) break;
      sub = subs.front();
      deepest = sub;
      where += " " + sub->get_name();
    }
    std::string message = e.what();
    if (e.get_name() == "RequiredError" &&
        message.find("subcommand") != std::string::npos) {
      // Say which command was missing, or which word was not one, and what would have been.
      std::vector<std::string> names;
      for (const CLI::App* sub : deepest->get_subcommands({})) names.push_back(sub->get_name());
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      const std::vector<std::string> rest = deepest->remaining();
      if (!rest.empty() && !rest.front().starts_with("-")) {
        message = "unknown command '" + rest.front() + "'";
        std::vector<std::string_view> candidates(names.begin(), names.end());
        if (const auto near = tessera::closestName(rest.front(), candidates)) {
          message += " (did you mean '" + std::string(*near) + "'?)";
        }
        message += "; commands: " + known;
      } else {
        message = "a command is required: one of " + known;
      }
    }
    return where + ": " + message + "\nRun '" + where + " --help' for more information.\n";
  });

  tessera::cli::PlaceOptions place;
  CLI::App* placeCmd = app.add_subcommand(
      "place", "Plan where replica requests go on a cluster, with the reasons for every refusal");
  placeCmd->add_option("--cluster", place.clusterPath, "Cluster file (nodes, GPUs, replicas)")
      ->required()
      ->check(CLI::ExistingFile);
  placeCmd->add_option("--requests", place.requestsPath, "Requests file (replicas to place)")
      ->required()
      ->check(CLI::ExistingFile);
  placeCmd
      ->add_option("--profile", place.profilePath,
                   "Placement profile (plugins, weights); default: the built-in profile")
      ->check(CLI::ExistingFile);
  std::string placeMode = "batch";
  placeCmd
      ->add_option("--mode", placeMode,
                   "batch: best-fit-decreasing over all requests; sequential: in file order")
      ->check(CLI::IsMember({"batch", "sequential"}))
      ->capture_default_str();
  placeCmd->add_option("--explain", place.explainReplica,
                       "Print every rejection and the score breakdown for this replica id");
  OutputFlag placeOutput;
  addOutputFlag(*placeCmd, placeOutput);

  tessera::cli::CatalogOptions catalog;
  CLI::App* catalogCmd =
      app.add_subcommand("catalog", "List the built-in GPU types: figures and MIG profiles");
  catalogCmd->add_option("--type", catalog.type, "Show one type (name or alias) in detail");
  OutputFlag catalogOutput;
  addOutputFlag(*catalogCmd, catalogOutput);

  tessera::cli::SimulateCommand simulate(app);
  tessera::cli::ServeCommand serve(app);
  tessera::cli::ProfileCommand profile(app);
  tessera::cli::AgentCommand agent(app);
  tessera::cli::PlanCliOptions planOptions;
  CLI::App* planCmd = tessera::cli::addPlan(app, planOptions);

  tessera::cli::ValidateOptions validate;
  CLI::App* validateCmd = app.add_subcommand(
      "validate",
      "Check configuration files (Cluster, PlacementRequests, PlacementProfile, ServerConfig, "
      "AgentConfig, ServingModel, Fleet) as the commands that read them do");
  validateCmd->add_option("files", validate.files, "Files to check; a Cluster file's models are known to the requests files")
      ->required()
      ->check(CLI::ExistingFile);
  OutputFlag validateOutput;
  addOutputFlag(*validateCmd, validateOutput);

  CLI::App* versionCmd = app.add_subcommand("version", "Print the version");
  OutputFlag versionOutput;
  addOutputFlag(*versionCmd, versionOutput);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 has its own exit codes (105-115) for parse errors; ours is 2 for all bad input.
    const int code = app.exit(e, std::cout, std::cerr);
    return code == 0 ? tessera::cli::kExitOk : tessera::cli::kExitUsage;
  }

  try {
    if (placeCmd->parsed()) {
      place.format = placeOutput.format();
      place.mode = placeMode == "sequential" ? tessera::cli::PlaceMode::kSequential
                                             : tessera::cli::PlaceMode::kBatch;
      return tessera::cli::runPlace(place, std::cout, std::cerr);
    }
    if (catalogCmd->parsed()) {
      catalog.format = catalogOutput.format();
      return tessera::cli::runCatalog(catalog, std::cout, std::cerr);
    }
    if (simulate.parsed()) return simulate.run(std::cout, std::cerr);
    if (serve.parsed()) return serve.run(std::cout, std::cerr);
    if (profile.parsed()) return profile.run(std::cout, std::cerr);
    if (agent.parsed()) return agent.run(std::cout, std::cerr);
    if (planCmd->parsed()) return tessera::cli::runPlan(planOptions, std::cout, std::cerr);
    if (validateCmd->parsed()) {
      validate.format = validateOutput.format();
      return tessera::cli::runValidate(validate, std::cout, std::cerr);
    }
    if (versionCmd->parsed()) return runVersion(versionOutput.format());
  } catch (const std::exception& e) {
    // Errors are values across modules; an exception reaching here is a bug.
    std::cerr << "tessera: internal error: " << e.what() << '\n';
    return tessera::cli::kExitInternal;
  }
  return tessera::cli::kExitUsage;  // require_subcommand(1) makes this unreachable
}
