#include "cmd_simulate_serving.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/gpu_catalog.h"
#include "out_dir.h"
#include "sim/serving_report.h"
#include "sim/serving_run.h"
#include "sim/serving_trace.h"
#include "table.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kCommand = "simulate serving";

std::string knownPolicies() {
  std::string known;
  for (auto p : sim::kServingPolicyNames) known += (known.empty() ? "" : ", ") + std::string(p);
  return known;
}

Result<std::vector<std::string>> parsePolicies(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "all") {
      for (auto p : sim::kServingPolicyNames) {
        if (std::find(out.begin(), out.end(), p) == out.end()) out.emplace_back(p);
      }
      continue;
    }
    if (!sim::isServingPolicyName(item)) {
      return fail(Error::invalid("--policy: unknown policy '" + item +
                                 "' (known: " + knownPolicies() + ", or all)"));
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  if (out.empty()) return fail(Error::invalid("--policy: no policy named"));
  return out;
}

Result<sim::ServingOptions> buildOptions(const SimulateServingOptions& o) {
  sim::ServingOptions so;
  if (o.modelPath) {
    auto model = sim::loadServingModelFile(*o.modelPath);
    if (!model) return fail(model.error());
    so.model = std::move(*model);
  }
  if (!(o.sloTtftMs > 0)) return fail(Error::invalid("--slo-ttft-ms must be > 0"));
  if (!(o.sloPrefillFactor >= 0)) return fail(Error::invalid("--slo-prefill-factor must be >= 0"));
  if (!(o.timeScale > 0)) return fail(Error::invalid("--time-scale must be > 0"));
  if (o.nodes < 1 || o.gpusPerNode < 1) {
    return fail(Error::invalid("--nodes and --gpus-per-node must be >= 1"));
  }
  if (o.jobs < 0) return fail(Error::invalid("--jobs must be >= 0"));
  so.sloTtftMs = o.sloTtftMs;
  so.sloPrefillFactor = o.sloPrefillFactor;
  so.fleet.gpuType = o.gpuType;
  so.fleet.nodes = o.nodes;
  so.fleet.gpusPerNode = o.gpusPerNode;
  so.warmStart = !o.startAtMin;
  so.prefixCache = o.prefixCache;
  if (o.warmupSeconds < 0) return fail(Error::invalid("--warmup-seconds must be >= 0"));
  so.warmupSeconds = o.warmupSeconds;
  if (o.replicaShare == "auto") {
    so.replicaShare = 0;
  } else {
    double share = 0;
    std::size_t used = 0;
    try {
      share = std::stod(o.replicaShare, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != o.replicaShare.size() || !(share > 0 && share <= 1)) {
      return fail(Error::invalid("--replica-share must be auto or in (0, 1], got '" +
                                 o.replicaShare + "'"));
    }
    so.replicaShare = share;
  }
  for (const std::string& text : o.policyArgs) {
    const std::size_t dot = text.find('.');
    const std::size_t eq = text.find('=');
    double value = 0;
    std::size_t used = 0;
    bool number = false;
    if (eq != std::string::npos) {
      try {
        value = std::stod(text.substr(eq + 1), &used);
        number = used == text.size() - eq - 1;
      } catch (const std::exception&) {
        number = false;
      }
    }
    if (dot == std::string::npos || eq == std::string::npos || dot > eq || !number) {
      return fail(
          Error::invalid("--policy-arg " + text +
                         ": expected POLICY.KEY=NUMBER, e.g. tessera.targetUtilization=0.7"));
    }
    const std::string policy = text.substr(0, dot);
    if (!sim::isServingPolicyName(policy) || policy == "static-peak" || policy == "clairvoyant") {
      return fail(Error::invalid("--policy-arg " + text + ": '" + policy +
                                 "' is not an autoscaled policy (hpa, weighted, littles-law, kpa, "
                                 "tessera)"));
    }
    so.policySettings.push_back({policy, text.substr(dot + 1, eq - dot - 1), value});
  }
  return so;
}

std::string ms(double v) {
  if (v >= 10'000) return fmt::format("{:.1f}s", v / 1000);
  if (v >= 100) return fmt::format("{:.0f}ms", v);
  return fmt::format("{:.1f}ms", v);
}

void printTable(std::ostream& out, const sim::ServingReport& report, const sim::ReplicaPerf& perf,
                const sim::ServingOptions& so, double wall) {
  out << fmt::format("serving simulation: trace {} ({} requests, time scale {})\n", report.trace,
                     report.requests, report.timeScale);
  out << fmt::format(
      "model {} on {} ({} nodes x {} GPUs); prefill {:.0f} tokens/s, decode step {:.1f} ms + "
      "KV reads; KV cache {} tokens per replica\n",
      report.model, report.gpuType, so.fleet.nodes, so.fleet.gpusPerNode,
      perf.flopsPerSec / perf.flopsPerToken, 1e3 * perf.weightsBytes / perf.bytesPerSec,
      perf.kvCapacityTokens);
  out << fmt::format(
      "TTFT SLO: {} ms, or {}x the prompt's unloaded prefill when longer; wall {:.1f}s\n\n",
      report.sloTtftMs, report.sloPrefillFactor, wall);
  Table table({{"POLICY"},
               {"SLO ATTAINMENT", Align::kRight},
               {"GPU-HOURS", Align::kRight},
               {"VS CLAIRVOYANT", Align::kRight},
               {"VS BOUND", Align::kRight},
               {"TTFT P50", Align::kRight},
               {"TTFT P99", Align::kRight},
               {"QUEUE P99", Align::kRight},
               {"SCALE EVENTS", Align::kRight},
               {"COLD STARTS", Align::kRight},
               {"PEAK", Align::kRight},
               {"UNSERVED", Align::kRight}});
  const auto clairvoyant = report.clairvoyantGpuHours();
  const double bound = report.lowerBound && report.lowerBound->gpuHours
                           ? *report.lowerBound->gpuHours
                           : -1.0;  // none
  for (const sim::ServingPolicyResult& r : report.policies) {
    table.addRow(
        {r.policy, fmt::format("{:.2f}%", 100 * r.sloAttainment), fmt::format("{:.2f}", r.gpuHours),
         clairvoyant ? fmt::format("{:.2f}x", r.gpuHours / *clairvoyant) : "-",
         bound > 0 ? fmt::format("{:.2f}x", r.gpuHours / bound) : "-",
         ms(r.ttftP50Ms), ms(r.ttftP99Ms), ms(r.queueP99Ms), std::to_string(r.scaleEvents()),
         std::to_string(r.coldStarts), std::to_string(r.peakReplicas),
         std::to_string(r.unserved + r.rejected)});
  }
  table.print(out, "  ");
  if (report.lowerBound) {
    const sim::ServingLowerBound& b = *report.lowerBound;
    if (b.gpuHours) {
      out << fmt::format(
          "\nlower bound: {:.3f} GPU-hours for {:.0f} % of requests within the SLO (prefill work "
          "{:.3f}, a {:.2f} share present {:.3f}; {} misses allowed)\n",
          *b.gpuHours, 100 * report.sloTarget, b.workGpuHours, b.minShare, b.coverageGpuHours,
          b.allowedMisses);
    } else {
      out << "\nlower bound: none, " << b.reason << '\n';
    }
  }
  for (const sim::ServingPolicyResult& r : report.policies) {
    if (r.infeasible) out << r.policy << ": target not reachable: " << *r.infeasible << '\n';
  }
}

Result<void> writeOutputs(const std::string& dir, const sim::ServingReport& report,
                          std::vector<std::string>& written) {
  auto out = OutDir::create(dir);
  if (!out) return fail(out.error());
  auto write = [&](const std::string& name, const std::function<void(std::ostream&)>& body) {
    return out->write(name, body);
  };
  for (const auto& r : report.policies) {
    TESSERA_RETURN_IF_ERROR(write(report.trace + "-" + r.policy + "-timeline.csv",
                                  [&](std::ostream& f) { sim::writeTimelineCsv(f, r); }));
    TESSERA_RETURN_IF_ERROR(write(report.trace + "-" + r.policy + "-decisions.csv",
                                  [&](std::ostream& f) { sim::writeDecisionsCsv(f, r); }));
  }
  TESSERA_RETURN_IF_ERROR(write(report.trace + "-timeline.svg",
                                [&](std::ostream& f) { f << sim::servingPlotSvg(report); }));
  TESSERA_RETURN_IF_ERROR(write(report.trace + "-summary.csv",
                                [&](std::ostream& f) { sim::writeServingCsv(f, report); }));
  written = out->written();
  return {};
}

}  // namespace

int runSimulateServing(const SimulateServingOptions& o, std::ostream& out, std::ostream& err) {
  const auto started = std::chrono::steady_clock::now();
  const auto catalog = model::GpuCatalog::builtin();
  auto policies = parsePolicies(o.policies);
  if (!policies) return reportError(err, kCommand, policies.error());
  auto so = buildOptions(o);
  if (!so) return reportError(err, kCommand, so.error());
  auto perf = sim::servingPerf(catalog, *so);
  if (!perf) return reportError(err, kCommand, perf.error());

  sim::ServingTraceFormat format = sim::ServingTraceFormat::kAzure;
  if (o.traceFormat) {
    format = *o.traceFormat == "mooncake" ? sim::ServingTraceFormat::kMooncake
                                          : sim::ServingTraceFormat::kAzure;
  } else {
    auto guessed = sim::servingTraceFormatOf(o.tracePath);
    if (!guessed) return reportError(err, kCommand, guessed.error());
    format = *guessed;
  }
  auto trace = sim::readServingTrace(o.tracePath, format, o.timeScale);
  if (!trace) return reportError(err, kCommand, trace.error());

  // Each run owns its cluster state, engine and autoscaler; results do not depend on --jobs.
  const std::size_t jobs = o.jobs > 0 ? static_cast<std::size_t>(o.jobs)
                                      : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Result<sim::ServingPolicyResult>> results(policies->size());
  for (std::size_t begin = 0; begin < policies->size(); begin += jobs) {
    const std::size_t end = std::min(policies->size(), begin + jobs);
    std::vector<std::future<Result<sim::ServingPolicyResult>>> running;
    for (std::size_t i = begin; i < end; ++i) {
      running.push_back(std::async(jobs > 1 ? std::launch::async : std::launch::deferred, [&, i] {
        return sim::runServing(*trace, catalog, *so, (*policies)[i]);
      }));
    }
    for (std::size_t i = begin; i < end; ++i) results[i] = running[i - begin].get();
  }
  sim::ServingReport report;
  report.trace = trace->name;
  report.requests = static_cast<int>(trace->requests.size());
  report.gpuType = so->fleet.gpuType;
  report.model = so->model.name;
  report.sloTtftMs = so->sloTtftMs;
  report.sloPrefillFactor = so->sloPrefillFactor;
  report.timeScale = o.timeScale;
  report.sloTarget = so->sloTarget;
  report.lowerBound = sim::servingLowerBound(*trace, *perf, *so, so->sloTarget);
  for (auto& r : results) {
    if (!r) return reportError(err, kCommand, r.error());
    report.policies.push_back(std::move(*r));
  }
  std::vector<std::string> written;
  if (o.outDir) {
    if (auto ok = writeOutputs(*o.outDir, report, written); !ok) {
      return reportError(err, kCommand, ok.error());
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  switch (o.format) {
    case SimulateFormat::kJson:
      out << sim::servingJson(report).dump(2) << '\n';
      break;
    case SimulateFormat::kCsv:
      sim::writeServingCsv(out, report);
      break;
    case SimulateFormat::kTable:
      printTable(out, report, *perf, *so, wall);
      for (const auto& path : written) out << "\nwrote " << path;
      if (!written.empty()) out << '\n';
      break;
  }
  return kExitOk;
}

CLI::App* addSimulateServing(CLI::App& simulate, SimulateServingOptions& o) {
  CLI::App* cmd = simulate.add_subcommand(
      "serving",
      "Replay an LLM request trace against a model deployment: SLO attainment, GPU-hours and "
      "scaling per autoscaling policy");
  cmd->add_option("--trace", o.tracePath, "Request trace: Azure LLM 2023 CSV or Mooncake JSONL")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--format", o.traceFormat,
                  "Trace format: azure or mooncake (default: from the extension)")
      ->check(CLI::IsMember({"azure", "mooncake"}));
  cmd->add_option("--policy", o.policies,
                  "Policies, comma-separated: static-peak, hpa, weighted, littles-law, kpa, "
                  "tessera, clairvoyant (the reference), or all")
      ->default_str("all");
  cmd->add_option("--gpu", o.gpuType, "GPU type of the fleet (a catalogue name)")
      ->capture_default_str();
  cmd->add_option("--model", o.modelPath,
                  "Served model file (kind: ServingModel); default Llama-3.1-8B in BF16")
      ->check(CLI::ExistingFile);
  cmd->add_option("--slo-ttft-ms", o.sloTtftMs, "Time-to-first-token SLO in milliseconds")
      ->capture_default_str();
  cmd->add_option("--slo-prefill-factor", o.sloPrefillFactor,
                  "A long prompt's SLO is this many times its unloaded prefill time when that "
                  "exceeds --slo-ttft-ms (0: the flat SLO)")
      ->capture_default_str();
  cmd->add_option("--time-scale", o.timeScale,
                  "Multiply inter-arrival times (0.5: twice the request rate)")
      ->capture_default_str();
  cmd->add_flag("--prefix-cache", o.prefixCache,
                "Model prefix caching: replicas skip the prefill of prompt blocks they hold "
                "(traces with hash_ids)");
  cmd->add_flag("--start-at-min", o.startAtMin,
                "Autoscaled policies start at their minimum instead of the trace's first-minute "
                "demand");
  cmd->add_option("--warmup-seconds", o.warmupSeconds,
                  "Replay the trace's first N seconds once before measuring (0: none)")
      ->capture_default_str();
  cmd->add_option("--replica-share", o.replicaShare,
                  "GPU share of each tessera replica: auto (a share when the lead-in's demand "
                  "is under one GPU) or a value in (0, 1]; other policies take whole GPUs")
      ->capture_default_str();
  cmd->add_option("--nodes", o.nodes, "Nodes in the fleet")->capture_default_str();
  cmd->add_option("--gpus-per-node", o.gpusPerNode, "GPUs per node")->capture_default_str();
  cmd->add_option("--jobs,-j", o.jobs, "Policies run in parallel (0: one per core)")
      ->default_str("1");
  cmd->add_option("--policy-arg", o.policyArgs,
                  "Experiment: change an autoscaled policy's setting, POLICY.KEY=VALUE (a "
                  "recommender argument, or minReplicas, maxReplicas, warmReplicas, "
                  "syncPeriodSeconds, scaleUpWindowSeconds, scaleDownWindowSeconds); repeatable");
  cmd->add_option("--out-dir", o.outDir,
                  "Write per-policy timeline CSVs, an SVG timeline and a summary CSV here");
  const std::map<std::string, SimulateFormat> formats = {{"table", SimulateFormat::kTable},
                                                         {"json", SimulateFormat::kJson},
                                                         {"csv", SimulateFormat::kCsv}};
  cmd->add_option("-o,--output", o.format, "Output format: table, json or csv")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case))
      ->default_str("table");
  return cmd;
}

}  // namespace tessera::cli
