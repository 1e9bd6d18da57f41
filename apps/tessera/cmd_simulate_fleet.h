#pragma once
// `tessera simulate fleet`: many deployments on one fleet under whole-gpu, time-slicing, binpack
// and tessera (docs/fleet-simulator.md). Wiring only: the simulation lives in src/sim/fleet*.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cmd_simulate.h"

namespace tessera::cli {

struct SimulateFleetOptions {
  std::optional<std::string> fleetPath;  // a fleet file instead of the default experiment
  std::string dataDir = "../shared/data";
  int nodes = 8;         // nodes of 8 H100-80GB
  double minutes = 60;   // every deployment's measured window
  int checkpoints = 16;  // GenTD26 checkpoints as models of their own
  double rateScale = 1;  // every deployment's request rate x this
  std::string policies = "all";
  std::uint64_t seed = 1;
  int jobs = 1;                     // policies in parallel (0: one per core)
  std::vector<std::string> prices;  // TYPE=USD per GPU-hour
  std::optional<std::string> outDir;
  SimulateFormat format = SimulateFormat::kTable;
};

int runSimulateFleet(const SimulateFleetOptions& options, std::ostream& out, std::ostream& err);
CLI::App* addSimulateFleet(CLI::App& simulate, SimulateFleetOptions& options);

// `tessera plan`: the smallest fleet per GPU type that meets every SLO under tessera, and what
// whole GPUs (today's set-up) would need, on the same traffic as `simulate fleet`.
struct PlanCliOptions {
  SimulateFleetOptions traffic;  // the experiment's traffic (nodes, policies and jobs unused)
  std::string gpuTypes = "H100-80GB,A100-80GB,L40S";
  std::string policies = "tessera,whole-gpu";
  double sloTarget = 0.99;
  int maxGpus = 512;
  std::string format = "table";  // table | json
};
int runPlan(const PlanCliOptions& options, std::ostream& out, std::ostream& err);
CLI::App* addPlan(CLI::App& app, PlanCliOptions& options);

}  // namespace tessera::cli
