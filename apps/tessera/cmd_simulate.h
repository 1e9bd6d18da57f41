#pragma once
// `tessera simulate fgd`: the FGD paper's experiment (Weng et al., ATC '23) on the Alibaba
// GPU trace, or on a built-in synthetic cluster, with the placement engine in the loop.
// Wiring only: the experiment lives in src/sim (docs/simulator.md).

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.h"

namespace tessera::cli {

enum class SimulateFormat { kTable, kJson, kCsv };

struct SimulateFgdOptions {
  std::optional<std::string> nodesPath;     // node list CSV
  std::optional<std::string> podsPath;      // pod list CSV
  std::optional<std::string> tracesDir;     // every openb_pod_list_*.csv of a folder
  std::optional<std::string> referenceDir;  // fgd-simulator-reference: exact replay
  std::optional<std::string> expectedDir;   // fgd-simulator-expected-results: comparison
  std::optional<std::string> outDir;        // curves CSV and SVG plots
  std::string policies = "random,dotprod,clustering,packing,bestfit,fgd,tessera";
  std::optional<std::string> seeds;  // default 42-51
  int jobs = 1;                      // 0: one per core
  std::uint64_t syntheticSeed = 42;  // the built-in cluster and workload
  double tuneRatio = 1.3;
  bool progress = true;  // a progress bar on stderr when it is a terminal
  bool bound = false;    // LP lower bounds at 100 % arrived (sched/packing_lp.h)
  SimulateFormat format = SimulateFormat::kTable;
};

// Returns the process exit code (docs/cli.md).
int runSimulateFgd(const SimulateFgdOptions& options, std::ostream& out, std::ostream& err);

struct SimulateServingOptions;  // cmd_simulate_serving.h
struct SimulateMatrixOptions;
struct SimulateReplicaOptions;
struct SimulateFleetOptions;

// Registers `simulate` and its subcommands `fgd` and `serving` on the app. Lives as long as the
// app; not copyable (the parser holds pointers into it).
class SimulateCommand {
 public:
  explicit SimulateCommand(CLI::App& app);
  ~SimulateCommand();
  SimulateCommand(const SimulateCommand&) = delete;
  SimulateCommand& operator=(const SimulateCommand&) = delete;

  bool parsed() const;
  int run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* simulate_;
  CLI::App* fgd_;
  CLI::App* serving_;
  SimulateFgdOptions options_;
  std::unique_ptr<SimulateServingOptions> servingOptions_;
  CLI::App* matrix_;
  std::unique_ptr<SimulateMatrixOptions> matrixOptions_;
  CLI::App* replica_;
  std::unique_ptr<SimulateReplicaOptions> replicaOptions_;
  CLI::App* fleet_;
  std::unique_ptr<SimulateFleetOptions> fleetOptions_;
};

}  // namespace tessera::cli
