#include "cmd_simulate.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cmd_simulate_fleet.h"
#include "cmd_simulate_serving.h"
#include "model/gpu_catalog.h"
#include "out_dir.h"
#include "sim/experiment.h"
#include "sim/report.h"
#include "sim/synthetic.h"
#include "sim/trace.h"
#include "table.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kSimulateCommand = "simulate fgd";
constexpr std::string_view kNodeListName = "openb_node_list_gpu_node.csv";

struct Inputs {
  std::vector<sim::FgdTrace> traces;
  std::string source;  // one line: where the traces came from
};

Result<sim::FgdTrace> loadTrace(const std::string& nodesPath, const std::string& podsPath,
                                const model::GpuCatalog& catalog) {
  auto nodes = sim::readNodeList(nodesPath, catalog);
  if (!nodes) return fail(nodes.error());
  auto pods = sim::readPodList(podsPath, catalog);
  if (!pods) return fail(pods.error());
  return sim::makeFgdTrace(sim::traceNameOf(podsPath), std::move(*nodes), std::move(*pods),
                           catalog);
}

Result<Inputs> loadInputs(const SimulateFgdOptions& o, const model::GpuCatalog& catalog) {
  Inputs in;
  if (o.tracesDir) {
    const std::string nodes = *o.tracesDir + "/" + std::string(kNodeListName);
    std::vector<std::string> podFiles;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(*o.tracesDir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("openb_pod_list_") && name.ends_with(".csv")) {
        podFiles.push_back(entry.path().string());
      }
    }
    if (ec) return fail(Error::invalid(*o.tracesDir + ": " + ec.message()));
    if (podFiles.empty()) {
      return fail(Error::invalid(*o.tracesDir + ": no openb_pod_list_*.csv files"));
    }
    std::sort(podFiles.begin(), podFiles.end());
    for (const std::string& pods : podFiles) {
      auto trace = loadTrace(nodes, pods, catalog);
      if (!trace) return fail(trace.error());
      in.traces.push_back(std::move(*trace));
    }
    in.source = fmt::format("{} traces from {}", in.traces.size(), *o.tracesDir);
    return in;
  }
  if (o.nodesPath || o.podsPath) {
    if (!o.nodesPath || !o.podsPath) {
      return fail(Error::invalid("--nodes and --pods go together"));
    }
    auto trace = loadTrace(*o.nodesPath, *o.podsPath, catalog);
    if (!trace) return fail(trace.error());
    in.source = fmt::format("nodes {}, pods {}", *o.nodesPath, *o.podsPath);
    in.traces.push_back(std::move(*trace));
    return in;
  }
  sim::SyntheticTrace synthetic = sim::makeSyntheticTrace(o.syntheticSeed);
  auto trace = sim::makeFgdTrace("synthetic", std::move(synthetic.nodes), std::move(synthetic.pods),
                                 catalog);
  if (!trace) return fail(trace.error());
  in.source =
      fmt::format("the built-in synthetic cluster and workload (--seed {}; docs/simulator.md)",
                  o.syntheticSeed);
  in.traces.push_back(std::move(*trace));
  return in;
}

Result<std::vector<std::string>> parsePolicies(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "all") {
      for (auto p : sim::kPolicyNames) out.emplace_back(p);
      continue;
    }
    if (!sim::isPolicyName(item)) {
      std::string known;
      for (auto p : sim::kPolicyNames) known += (known.empty() ? "" : ", ") + std::string(p);
      return fail(
          Error::invalid("--policy: unknown policy '" + item + "' (known: " + known + ", or all)"));
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  if (out.empty()) return fail(Error::invalid("--policy: no policy named"));
  return out;
}

std::string duration(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  return fmt::format("{}m{:02d}s", s / 60, s % 60);
}

// A one-line progress bar redrawn in place on a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  void update(const sim::ProgressSnapshot& s) {
    if (!enabled_ || s.podsTotal == 0) return;
    const double done = static_cast<double>(s.podsDone) / static_cast<double>(s.podsTotal);
    constexpr int kWidth = 30;
    const int filled = std::clamp(static_cast<int>(done * kWidth), 0, kWidth);
    std::string eta;
    if (done > 0.02 && done < 1)
      eta = ", ~" + duration(s.elapsedSeconds * (1 - done) / done) + " left";
    std::cerr << fmt::format("\r[{}{}] {:3.0f}%  {}/{} runs  {}{}   ", std::string(filled, '#'),
                             std::string(kWidth - filled, '.'), 100 * done, s.runsDone, s.runsTotal,
                             duration(s.elapsedSeconds), eta)
              << std::flush;
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::cerr << "\r" << std::string(79, ' ') << "\r" << std::flush;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

std::string meanSd(const sim::MeanSd& m) {
  if (m.n == 0) return "-";
  return fmt::format("{:.2f} ± {:.2f}", m.mean, m.sd);
}

double meanOf(const sim::PolicySummary& p, auto value) {
  double sum = 0;
  for (const auto& r : p.runs) sum += value(r);
  return p.runs.empty() ? 0 : sum / static_cast<double>(p.runs.size());
}

std::string seedText(const std::vector<int>& seeds) {
  if (seeds.size() > 2 && seeds.back() - seeds.front() + 1 == static_cast<int>(seeds.size())) {
    return fmt::format("{}-{} ({})", seeds.front(), seeds.back(), seeds.size());
  }
  std::string s;
  for (int seed : seeds) s += (s.empty() ? "" : ",") + std::to_string(seed);
  return s;
}

// What the --bound figures mean (docs/simulator.md, "Lower bounds").
void printBoundNote(std::ostream& out, const sim::TraceResult& r) {
  out << fmt::format(
      "\nLP BOUND: fewest unallocated GPUs (%) any placement of the sharing pods the policy "
      "placed\ncan leave (bin-packing LP, CPU, nodes and GPU types ignored). Placing every "
      "sharing pod\nthat arrives before 100 %, no policy leaves fewer than {} %.\n",
      meanSd(r.placeAllBoundAt100));
}

void printTrace(std::ostream& out, const sim::FgdTrace& trace, const sim::TraceResult& r,
                const std::vector<sim::Reproduction>* repro, bool bound) {
  out << fmt::format(
      "trace {}: {} nodes, {} GPUs, {} tasks; target workload {} of {} shapes covering "
      "{:.2f}% of tasks\n",
      r.trace, trace.nodes.size(), r.gpuCount, trace.pods.size(), r.typical.shapes.size(),
      r.typical.distinctShapes, r.typical.coveragePct());
  out << "arrival order and node ranks: "
      << (r.replayed ? "the artifact's (--reference)" : "Tessera's seeded generator") << "\n\n";
  std::vector<Column> cols = {{"POLICY"},
                              {"UNALLOCATED GPU % @100% ARRIVED", Align::kRight},
                              {"FRAG RATE @100%", Align::kRight},
                              {"FAILED PODS", Align::kRight},
                              {"RUN TIME", Align::kRight}};
  if (bound) cols.push_back({"LP BOUND", Align::kRight});
  if (repro) {
    cols.push_back({"ARTIFACT", Align::kRight});
    cols.push_back({"DIFF (PP)", Align::kRight});
    cols.push_back({"BUCKETS ≤0.01PP", Align::kRight});
  }
  Table table(std::move(cols));
  for (std::size_t i = 0; i < r.policies.size(); ++i) {
    const sim::PolicySummary& p = r.policies[i];
    const auto& rate = p.meanCurve.fragRatePct[100];
    std::vector<std::string> row = {
        p.policy, meanSd(p.unallocatedAt100), rate ? fmt::format("{:.2f}%", *rate) : "-",
        fmt::format("{:.0f}", meanOf(p, [](const sim::RunResult& x) { return x.failed; })),
        fmt::format("{:.2f}s", meanOf(p, [](const sim::RunResult& x) { return x.seconds; }))};
    if (bound) row.push_back(meanSd(p.boundAt100));
    if (repro) {
      const sim::Reproduction& q = (*repro)[i];
      if (q.seeds > 0) {
        row.push_back(fmt::format("{:.2f}", q.artifactAt100));
        row.push_back(fmt::format("{:+.2f}", q.diffAt100));
        row.push_back(fmt::format("{}/{}", q.bucketsWithin, q.buckets));
      } else {
        row.insert(row.end(), {"-", "-", "-"});
      }
    }
    table.addRow(std::move(row));
  }
  table.print(out, "  ");
  if (bound) printBoundNote(out, r);
}

void printMatrix(std::ostream& out, const std::vector<sim::TraceResult>& results,
                 const std::vector<std::string>& policies,
                 const std::vector<std::vector<sim::Reproduction>>* repro, bool bound) {
  std::vector<Column> cols = {{"TRACE"}};
  for (const auto& p : policies) cols.push_back({p, Align::kRight});
  const std::vector<Column> policyCols = cols;  // the reproduction table below has no bound
  if (bound) cols.push_back({"PLACE-ALL BOUND", Align::kRight});
  Table table(cols);
  for (const auto& r : results) {
    std::vector<std::string> row = {r.trace + (r.replayed ? "" : " *")};
    for (const auto& p : r.policies) {
      std::string cell = meanSd(p.unallocatedAt100);
      if (bound) {
        cell += p.boundAt100.n > 0 ? fmt::format(" (>= {:.2f})", p.boundAt100.mean) : " (>= -)";
      }
      row.push_back(std::move(cell));
    }
    if (bound) row.push_back(meanSd(r.placeAllBoundAt100));
    table.addRow(std::move(row));
  }
  out << "unallocated GPU % at 100 % arrived (mean ± s.d. over seeds)"
      << "; * = Tessera's own arrival order (no reference for the trace)\n";
  if (bound) {
    out << "(>= x): the LP lower bound for the sharing pods the policy placed; PLACE-ALL BOUND: "
           "for every sharing pod arrived\n";
  }
  out << '\n';
  table.print(out, "  ");
  if (!repro) return;
  Table diff(policyCols);
  for (std::size_t t = 0; t < results.size(); ++t) {
    std::vector<std::string> row = {results[t].trace};
    bool any = false;
    for (const auto& q : (*repro)[t]) {
      row.push_back(q.seeds > 0 ? fmt::format("{:+.2f}", q.diffAt100) : "-");
      any = any || q.seeds > 0;
    }
    if (any) diff.addRow(std::move(row));
  }
  out << "\nours - artifact at 100 % arrived (pp, mean over the seeds both have)\n\n";
  diff.print(out, "  ");
}

Result<void> writeOutputs(const std::string& dir, const std::vector<sim::TraceResult>& results,
                          const std::vector<std::vector<sim::Reproduction>>* repro,
                          std::vector<std::string>& written) {
  auto out = OutDir::create(dir);
  if (!out) return fail(out.error());
  auto write = [&](const std::string& name, const std::function<void(std::ostream&)>& body) {
    return out->write(name, body);
  };
  for (const auto& r : results) {
    TESSERA_RETURN_IF_ERROR(
        write(r.trace + "-curves.csv", [&](std::ostream& f) { sim::writeCurvesCsv(f, r); }));
    TESSERA_RETURN_IF_ERROR(
        write(r.trace + "-plot.svg", [&](std::ostream& f) { f << sim::plotSvg(r); }));
  }
  TESSERA_RETURN_IF_ERROR(
      write("summary.csv", [&](std::ostream& f) { sim::writeSummaryCsv(f, results, repro); }));
  written = out->written();
  return {};
}

}  // namespace

int runSimulateFgd(const SimulateFgdOptions& o, std::ostream& out, std::ostream& err) {
  const auto catalog = model::GpuCatalog::builtin();
  auto policies = parsePolicies(o.policies);
  if (!policies) return reportError(err, kSimulateCommand, policies.error());
  auto seeds = sim::parseSeedList(o.seeds.value_or("42-51"));
  if (!seeds)
    return reportError(err, kSimulateCommand, Error::invalid("--seeds: " + seeds.error().message));
  if (o.tracesDir && (o.nodesPath || o.podsPath)) {
    return reportError(err, kSimulateCommand,
                       Error::invalid("--traces replaces --nodes and --pods"));
  }
  if (o.jobs < 0) return reportError(err, kSimulateCommand, Error::invalid("--jobs must be >= 0"));
  if (!(o.tuneRatio > 0)) {
    return reportError(err, kSimulateCommand, Error::invalid("--tune-ratio must be > 0"));
  }
  auto inputs = loadInputs(o, catalog);
  if (!inputs) return reportError(err, kSimulateCommand, inputs.error());
  std::optional<sim::ExpectedResults> expected;
  if (o.expectedDir) {
    auto loaded = sim::loadExpectedResults(*o.expectedDir);
    if (!loaded) return reportError(err, kSimulateCommand, loaded.error());
    expected = std::move(*loaded);
  }

  sim::ExperimentOptions eo;
  eo.policies = *policies;
  eo.seeds = *seeds;
  eo.referenceDir = o.referenceDir;
  eo.tuneRatio = o.tuneRatio;
  eo.bound = o.bound;
  eo.jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  ProgressBar bar(o.progress && ::isatty(STDERR_FILENO) == 1);
  const auto started = std::chrono::steady_clock::now();
  auto results = sim::runExperiments(inputs->traces, catalog, eo,
                                     [&](const sim::ProgressSnapshot& s) { bar.update(s); });
  bar.finish();
  if (!results) return reportError(err, kSimulateCommand, results.error());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::vector<std::vector<sim::Reproduction>> repro;
  if (expected) {
    for (const auto& r : *results) repro.push_back(sim::compareWithExpected(r, *expected));
  }
  const auto* reproPtr = expected ? &repro : nullptr;
  std::vector<std::string> written;
  if (o.outDir) {
    if (auto ok = writeOutputs(*o.outDir, *results, reproPtr, written); !ok) {
      return reportError(err, kSimulateCommand, ok.error());
    }
  }

  switch (o.format) {
    case SimulateFormat::kJson: {
      nlohmann::json j;
      if (o.tracesDir) {
        j["traces"] = nlohmann::json::array();
        for (std::size_t t = 0; t < results->size(); ++t) {
          j["traces"].push_back(sim::traceJson((*results)[t], expected ? &repro[t] : nullptr));
        }
      } else {
        j = sim::traceJson(results->front(), expected ? &repro.front() : nullptr);
      }
      j["wall_seconds"] = std::round(wall * 100) / 100;
      j["jobs"] = eo.jobs;
      out << j.dump(2) << '\n';
      break;
    }
    case SimulateFormat::kCsv:
      sim::writeSummaryCsv(out, *results, reproPtr);
      break;
    case SimulateFormat::kTable: {
      out << "FGD experiment on " << inputs->source << "\n";
      out << fmt::format("seeds {}, tuned to {}x GPU capacity, {} job(s), {} wall\n\n",
                         seedText(*seeds), o.tuneRatio, eo.jobs, duration(wall));
      if (results->size() == 1) {
        printTrace(out, inputs->traces.front(), results->front(),
                   expected ? &repro.front() : nullptr, o.bound);
      } else {
        printMatrix(out, *results, *policies, reproPtr, o.bound);
      }
      for (const auto& path : written) out << "\nwrote " << path;
      if (!written.empty()) out << '\n';
      break;
    }
  }
  return kExitOk;
}

SimulateCommand::SimulateCommand(CLI::App& app) {
  simulate_ = app.add_subcommand("simulate",
                                 "Trace-driven experiments with the placement engine "
                                 "in the loop");
  simulate_->require_subcommand(1);
  fgd_ = simulate_->add_subcommand(
      "fgd",
      "The FGD paper's experiment (ATC '23) on the Alibaba GPU trace or a built-in "
      "synthetic cluster: unallocated GPUs vs arrived load per policy");
  SimulateFgdOptions& o = options_;
  fgd_->add_option("--nodes", o.nodesPath, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->check(CLI::ExistingFile);
  fgd_->add_option("--pods", o.podsPath, "Pod list CSV (openb_pod_list_*.csv)")
      ->check(CLI::ExistingFile);
  fgd_->add_option("--traces", o.tracesDir,
                   "Run every openb_pod_list_*.csv of a folder (node list from the same folder)")
      ->check(CLI::ExistingDirectory);
  fgd_->add_option("--policy", o.policies,
                   "Policies, comma-separated: random, dotprod, clustering, packing, bestfit, "
                   "fgd, tessera, or all")
      ->default_str("all");
  fgd_->add_option("--seeds", o.seeds, "Seeds: 42-51, 42,45 or 42")->default_str("42-51");
  fgd_->add_option("--reference", o.referenceDir,
                   "fgd-simulator-reference folder: replay the artifact's arrival orders and "
                   "node ranks")
      ->check(CLI::ExistingDirectory);
  fgd_->add_option("--expected", o.expectedDir,
                   "fgd-simulator-expected-results folder: compare with the artifact's results")
      ->check(CLI::ExistingDirectory);
  fgd_->add_option("--jobs,-j", o.jobs, "Runs in parallel (0: one per core)")->default_str("1");
  fgd_->add_option("--out-dir", o.outDir, "Write curves (CSV) and plots (SVG) here");
  fgd_->add_option("--seed", o.syntheticSeed,
                   "Seed of the built-in synthetic cluster and workload (no --nodes/--pods)")
      ->default_str("42");
  fgd_->add_option("--tune-ratio", o.tuneRatio,
                   "Tune the workload to this multiple of GPU capacity")
      ->default_str("1.3");
  fgd_->add_flag("!--no-progress", o.progress, "No progress bar on stderr");
  fgd_->add_flag("--bound", o.bound,
                 "Also report LP lower bounds on the unallocated GPUs at 100 % arrived: for the "
                 "sharing pods each policy placed, and for all that arrived");
  addSimulateFormatOption(*fgd_, o.format);
  servingOptions_ = std::make_unique<SimulateServingOptions>();
  serving_ = addSimulateServing(*simulate_, *servingOptions_);
  matrixOptions_ = std::make_unique<SimulateMatrixOptions>();
  matrix_ = addSimulateMatrix(*simulate_, *matrixOptions_);
  replicaOptions_ = std::make_unique<SimulateReplicaOptions>();
  replica_ = addSimulateReplica(*simulate_, *replicaOptions_);
  fleetOptions_ = std::make_unique<SimulateFleetOptions>();
  fleet_ = addSimulateFleet(*simulate_, *fleetOptions_);
}

SimulateCommand::~SimulateCommand() = default;

bool SimulateCommand::parsed() const {
  return fgd_->parsed() || serving_->parsed() || matrix_->parsed() || replica_->parsed() ||
         fleet_->parsed();
}

int SimulateCommand::run(std::ostream& out, std::ostream& err) const {
  if (serving_->parsed()) return runSimulateServing(*servingOptions_, out, err);
  if (matrix_->parsed()) return runSimulateMatrix(*matrixOptions_, out, err);
  if (replica_->parsed()) return runSimulateReplica(*replicaOptions_, out, err);
  if (fleet_->parsed()) return runSimulateFleet(*fleetOptions_, out, err);
  return runSimulateFgd(options_, out, err);
}

}  // namespace tessera::cli
