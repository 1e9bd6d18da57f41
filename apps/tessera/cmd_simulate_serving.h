#pragma once
// `tessera simulate serving`: a request trace (Azure LLM 2023 or Mooncake) replayed against a
// model deployment on a GPU fleet, one run per scaling policy (docs/serving-simulator.md).
// Wiring only: the simulation lives in src/sim/serving_*.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cmd_simulate.h"

namespace tessera::cli {

struct SimulateServingOptions {
  std::string tracePath;
  std::optional<std::string> traceFormat;  // azure | mooncake | qps; default from the extension
  std::optional<std::string> tokensFrom;   // qps: the trace whose token lengths are drawn
  std::optional<double> qpsMean;           // qps: mean requests/s (default: tokensFrom's)
  double qpsSpanSeconds = 3600;            // qps: the series stretched to this span (0: as is)
  std::uint64_t seed = 1;                  // qps: the arrival draw
  double sloTarget = 0.99;
  bool nodeCache = false;            // every node's disk holds the weights at t = 0
  std::string modelError = "1,1,1";  // actual prefill speed, decode speed, cold start
  std::string tokenScale = "1,1";    // prompt and output length multiples (a shape experiment)
  int routerQueueDepth = 0;          // the router's flow control (0: none)
  int clairvoyantRuns = 60;          // simulations per GPU share the clairvoyant may take
  std::string policies = "all";
  std::string gpuType = "H100-80GB";
  std::optional<std::string> modelPath;  // a ServingModel YAML; default Llama-3.1-8B
  double sloTtftMs = 2000;
  double sloPrefillFactor = 2;
  double timeScale = 1;
  int nodes = 4;
  int gpusPerNode = 8;
  int jobs = 1;  // 0: one per core
  bool startAtMin = false;
  bool prefixCache = false;           // replicas skip the prefill of prompt blocks they hold
  std::string replicaShare = "auto";  // tessera's GPU share per replica: auto or (0, 1]
  int warmupSeconds = 300;  // lead-in replayed before the measured window  // autoscaled policies
                            // start at min, not the first minute's demand
  std::optional<std::string> outDir;
  std::vector<std::string> policyArgs;  // POLICY.KEY=VALUE
  SimulateFormat format = SimulateFormat::kTable;
};

// `tessera simulate serving-matrix` (docs/serving-simulator.md, "Robustness matrix").
struct SimulateMatrixOptions {
  std::string dataDir = "../shared/data";
  double minutes = 20;  // each trace's first N minutes at rate 1 (the QPS shape over N minutes)
  // Held-out windows: each recorded trace's window starts this many minutes in.
  double skipMinutes = 0;
  // The traces: azure-conv, mooncake, gentd26-qps (from --data), builtin-chat (the built-in hour
  // with its flash crowd, whole at each rate: not windowed by --minutes or --skip-minutes).
  std::string traces = "azure-conv,mooncake,gentd26-qps";
  std::uint64_t seed = 1;           // the QPS shape's and the built-in hour's draw
  std::string qpsTokens = "azure";  // azure | mooncake: the QPS shape's prompt and output lengths
  std::string rates = "0.25,0.5,1,2,4";
  std::string gpus = "H100-80GB,A100-80GB,L40S";
  std::string warmStarts = "on,off";
  std::string coldStarts = "node-cache,remote";
  std::string modelError = "1,1,1";
  std::string tokenScale = "1,1";  // every trace's prompt and output lengths times these
  int routerQueueDepth = 0;
  int clairvoyantRuns = 16;
  int jobs = 1;
  std::vector<std::string> policyArgs;  // POLICY.KEY=VALUE, every cell
  std::string format = "markdown";      // markdown | json
};
int runSimulateMatrix(const SimulateMatrixOptions& options, std::ostream& out, std::ostream& err);
CLI::App* addSimulateMatrix(CLI::App& simulate, SimulateMatrixOptions& options);

// `tessera simulate replica`: one replica under a closed loop (docs/serving-simulator.md, "The
// model against measurements").
struct SimulateReplicaOptions {
  std::string gpuType = "H100-80GB";
  std::optional<std::string> modelPath;
  int inputTokens = 1024;
  int outputTokens = 128;
  std::string concurrency = "1,2,4,8,16,32,64";
  std::string format = "table";  // table | json
};
int runSimulateReplica(const SimulateReplicaOptions& options, std::ostream& out, std::ostream& err);
CLI::App* addSimulateReplica(CLI::App& simulate, SimulateReplicaOptions& options);

// Returns the process exit code (docs/cli.md).
int runSimulateServing(const SimulateServingOptions& options, std::ostream& out, std::ostream& err);

// Adds the `serving` subcommand to `simulate`, writing its flags into `options`.
CLI::App* addSimulateServing(CLI::App& simulate, SimulateServingOptions& options);

// -o,--output table|json|csv (any case), shown and refused by name ("must be table, json or
// csv, got \"xml\""), never as the enum's numbers.
void addSimulateFormatOption(CLI::App& command, SimulateFormat& format);

}  // namespace tessera::cli
