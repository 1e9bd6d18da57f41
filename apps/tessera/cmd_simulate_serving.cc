#include "cmd_simulate_serving.h"

#include <cctype>

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
#include "serving_cli.h"
#include "sim/serving_report.h"
#include "sim/serving_run.h"
#include "sim/serving_trace.h"
#include "table.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kSimulateServingCommand = "simulate serving";

std::string knownPolicies() {
  std::string known;
  for (auto p : sim::kServingPolicyNames) known += (known.empty() ? "" : ", ") + std::string(p);
  return known;
}

Result<std::vector<std::string>> parseServingPolicies(const std::string& text) {
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
  // The bounds a fleet file's sloTtftMs has (an hour); a prefill factor beyond 1000 would make
  // a long prompt's target longer than any trace.
  if (!(o.sloTtftMs > 0 && o.sloTtftMs <= 3.6e6)) {
    return fail(Error::invalid("--slo-ttft-ms must be in (0, 3600000] (an hour)"));
  }
  if (!(o.sloPrefillFactor >= 0 && o.sloPrefillFactor <= 1000)) {
    return fail(Error::invalid("--slo-prefill-factor must be in [0, 1000]"));
  }
  if (!(o.timeScale > 0) || !std::isfinite(o.timeScale)) {
    return fail(Error::invalid("--time-scale must be a number > 0"));
  }
  if (o.nodes < 1 || o.gpusPerNode < 1) {
    return fail(Error::invalid("--nodes and --gpus-per-node must be >= 1"));
  }
  if (o.jobs < 0) return fail(Error::invalid("--jobs must be >= 0"));
  so.sloTtftMs = o.sloTtftMs;
  so.sloPrefillFactor = o.sloPrefillFactor;
  if (!(o.sloTarget > 0 && o.sloTarget <= 1)) {
    return fail(Error::invalid("--slo-target must be in (0, 1]"));
  }
  so.sloTarget = o.sloTarget;
  so.fleet.modelCachedOnDisk = o.nodeCache;
  auto error = parseModelError(o.modelError, "--model-error");
  if (!error) return fail(error.error());
  so.actual = *error;
  if (o.routerQueueDepth < 0) return fail(Error::invalid("--router-queue-depth must be >= 0"));
  so.routerQueueDepth = o.routerQueueDepth;
  if (o.clairvoyantRuns < 1) return fail(Error::invalid("--clairvoyant-runs must be >= 1"));
  so.clairvoyantMaxRuns = o.clairvoyantRuns;
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
    const std::optional<double> share = number(o.replicaShare);
    if (!share || !(*share > 0 && *share <= 1)) {
      return fail(Error::invalid("--replica-share must be auto or in (0, 1], got '" +
                                 o.replicaShare + "'"));
    }
    so.replicaShare = *share;
  }
  auto settings = parsePolicyArgs(o.policyArgs);
  if (!settings) return fail(settings.error());
  so.policySettings = std::move(*settings);
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
  const double bound = report.lowerBoundOr(-1);
  for (const sim::ServingPolicyResult& r : report.policies) {
    table.addRow({r.policy, fmt::format("{:.2f}%", 100 * r.sloAttainment),
                  fmt::format("{:.2f}", r.gpuHours),
                  clairvoyant ? fmt::format("{:.2f}x", r.gpuHours / *clairvoyant) : "-",
                  bound > 0 ? fmt::format("{:.2f}x", r.gpuHours / bound) : "-", ms(r.ttftP50Ms),
                  ms(r.ttftP99Ms), ms(r.queueP99Ms), std::to_string(r.scaleEvents()),
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

Result<sim::ServingTrace> loadTrace(const SimulateServingOptions& o) {
  if (o.tracePath.empty()) {
    if (o.traceFormat || o.tokensFrom || o.qpsMean) {
      return fail(Error::invalid("--format, --tokens-from and --qps-mean need --trace FILE"));
    }
    TESSERA_RETURN_IF_ERROR(sim::checkServingSpan(sim::kBuiltinChatSpanSeconds * o.timeScale,
                                                  "--time-scale: the built-in trace"));
    return sim::builtinChatTrace(o.seed, o.timeScale);
  }
  if (o.traceFormat != "qps") {
    if (o.tokensFrom || o.qpsMean) {
      return fail(Error::invalid("--tokens-from and --qps-mean go with --format qps"));
    }
    return readTrace(o.tracePath, o.traceFormat, o.timeScale);
  }
  if (!o.tokensFrom) {
    return fail(Error::invalid(
        "--format qps needs --tokens-from FILE (an Azure or Mooncake trace to draw prompt and "
        "output lengths from)"));
  }
  auto tokens = readTrace(*o.tokensFrom, std::nullopt, 1.0);
  if (!tokens) return fail(tokens.error());
  if (o.qpsMean && !(*o.qpsMean > 0)) return fail(Error::invalid("--qps-mean must be > 0"));
  if (!(o.qpsSpanSeconds >= 0)) return fail(Error::invalid("--qps-span must be >= 0"));
  auto shaped =
      qpsTrace(o.tracePath, *tokens, o.qpsMean.value_or(meanRate(*tokens)), o.qpsSpanSeconds,
               o.seed, std::filesystem::path(o.tracePath).stem().stem().string());
  if (!shaped) return fail(shaped.error());
  TESSERA_RETURN_IF_ERROR(
      sim::checkServingSpan(static_cast<double>(shaped->spanUs()) / 1e6 * o.timeScale,
                            "--time-scale: the shaped QPS series"));
  if (o.timeScale != 1) {
    for (auto& r : shaped->requests) {
      r.arrivalUs = std::llround(static_cast<double>(r.arrivalUs) * o.timeScale);
    }
  }
  return shaped;
}

}  // namespace

int runSimulateServing(const SimulateServingOptions& o, std::ostream& out, std::ostream& err) {
  const auto started = std::chrono::steady_clock::now();
  const auto catalog = model::GpuCatalog::builtin();
  auto policies = parseServingPolicies(o.policies);
  if (!policies) return reportError(err, kSimulateServingCommand, policies.error());
  auto so = buildOptions(o);
  if (!so) return reportError(err, kSimulateServingCommand, so.error());
  auto perf = sim::servingPerf(catalog, *so);
  if (!perf) return reportError(err, kSimulateServingCommand, perf.error());

  auto tokenScale = parseTokenScale(o.tokenScale);
  if (!tokenScale) return reportError(err, kSimulateServingCommand, tokenScale.error());
  auto trace = loadTrace(o);
  if (!trace) return reportError(err, kSimulateServingCommand, trace.error());
  if (auto scaled = sim::scaleTokenLengths(*trace, tokenScale->first, tokenScale->second);
      !scaled) {
    return reportError(err, kSimulateServingCommand, scaled.error());
  }

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
    if (!r) return reportError(err, kSimulateServingCommand, r.error());
    report.policies.push_back(std::move(*r));
  }
  std::vector<std::string> written;
  if (o.outDir) {
    if (auto ok = writeOutputs(*o.outDir, report, written); !ok) {
      return reportError(err, kSimulateServingCommand, ok.error());
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
  cmd->add_option(
         "--trace", o.tracePath,
         "Request trace: Azure LLM 2023 CSV, Mooncake JSONL, or a QPS series (--format qps); "
         "default: a built-in synthetic hour of chat traffic (builtin-chat, --seed)")
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--format", o.traceFormat,
         "Trace format: azure, mooncake or qps (a QPS series, CSV or .tar.gz; default: from "
         "the extension)")
      ->check(CLI::IsMember({"azure", "mooncake", "qps"}));
  cmd->add_option("--tokens-from", o.tokensFrom,
                  "With --format qps: an Azure or Mooncake trace whose prompt and output lengths "
                  "are drawn for each request")
      ->check(CLI::ExistingFile);
  cmd->add_option("--qps-mean", o.qpsMean,
                  "With --format qps: mean requests per second (default: --tokens-from's)");
  cmd->add_option("--qps-span", o.qpsSpanSeconds,
                  "With --format qps: stretch or compress the series to this many seconds (0: "
                  "as recorded)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed,
                  "Seed of the arrival draw: with --format qps, or of the built-in trace")
      ->capture_default_str();
  cmd->add_option("--slo-target", o.sloTarget,
                  "Share of requests that must meet the TTFT SLO (the clairvoyant and the lower "
                  "bound aim for it)")
      ->capture_default_str();
  cmd->add_flag("--node-cache", o.nodeCache,
                "Every node's disk holds the weights from the start (no remote loads)");
  cmd->add_option("--model-error", o.modelError,
                  "Experiment: the replicas run at PREFILL,DECODE speed and COLDSTART time "
                  "multiples of the model's, the policies not told (e.g. 0.7,0.7,1.3)")
      ->capture_default_str();
  cmd->add_option("--token-scale", o.tokenScale, kTokenScaleHelp)->capture_default_str();
  cmd->add_option("--router-queue-depth", o.routerQueueDepth, kRouterQueueDepthHelp)
      ->capture_default_str();
  cmd->add_option("--clairvoyant-runs", o.clairvoyantRuns,
                  "Simulations the clairvoyant's search may take per GPU share (fewer: quicker on "
                  "long traces, a reference that may cost more)")
      ->capture_default_str();
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
                  "GPU share of each tessera replica: auto (the server's share rule at every "
                  "scale-up, from the measured prompts) or a value in (0, 1]; other policies "
                  "take whole GPUs")
      ->capture_default_str();
  cmd->add_option("--nodes", o.nodes, "Nodes in the fleet")->capture_default_str();
  cmd->add_option("--gpus-per-node", o.gpusPerNode, "GPUs per node")->capture_default_str();
  cmd->add_option("--jobs,-j", o.jobs, "Policies run in parallel (0: one per core)")
      ->default_str("1");
  cmd->add_option("--policy-arg", o.policyArgs, kPolicyArgHelp);
  cmd->add_option("--out-dir", o.outDir,
                  "Write per-policy timeline CSVs, an SVG timeline and a summary CSV here");
  addSimulateFormatOption(*cmd, o.format);
  return cmd;
}

void addSimulateFormatOption(CLI::App& command, SimulateFormat& format) {
  auto lower = [](std::string value) {
    for (char& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return value;
  };
  command
      .add_option_function<std::string>(
          "-o,--output",
          [&format, lower](const std::string& name) {
            const std::string n = lower(name);
            format = n == "json"  ? SimulateFormat::kJson
                     : n == "csv" ? SimulateFormat::kCsv
                                  : SimulateFormat::kTable;
          },
          "Output format: table, json or csv")
      ->check(
          [lower](const std::string& value) -> std::string {
            const std::string n = lower(value);
            if (n == "table" || n == "json" || n == "csv") return "";
            return "must be table, json or csv, got \"" + value + "\"";
          },
          "")
      ->type_name("{table,json,csv}")
      ->default_str("table");
}

// The helpers serving_cli.h declares.

// `text` read whole as a number (std::stod's syntax); nullopt when it is not one.
std::optional<double> number(const std::string& text) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return x;
}

// A comma-separated list of finite numbers > 0.
Result<std::vector<double>> positiveList(const std::string& text, const std::string& flag) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const std::optional<double> x = number(item);
    if (!x || !(*x > 0) || !std::isfinite(*x)) {
      return fail(Error::invalid(flag + ": expected numbers > 0, got '" + item + "'"));
    }
    out.push_back(*x);
  }
  if (out.empty()) return fail(Error::invalid(flag + ": no number"));
  return out;
}

// --policy-arg POLICY.KEY=NUMBER, repeatable.
Result<std::vector<sim::ServingOptions::PolicySetting>> parsePolicyArgs(
    const std::vector<std::string>& texts) {
  std::vector<sim::ServingOptions::PolicySetting> out;
  for (const std::string& text : texts) {
    const std::size_t dot = text.find('.');
    const std::size_t eq = text.find('=');
    const std::optional<double> value =
        eq == std::string::npos ? std::nullopt : number(text.substr(eq + 1));
    if (dot == std::string::npos || eq == std::string::npos || dot > eq || !value) {
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
    out.push_back({policy, text.substr(dot + 1, eq - dot - 1), *value});
  }
  return out;
}

// "P,D,C": actual prefill speed, decode speed and cold-start time as multiples of the model's.
Result<sim::ModelError> parseModelError(const std::string& text, const char* flag) {
  auto v = positiveList(text, flag);
  if (!v) return fail(v.error());
  if (v->size() != 3) {
    return fail(Error::invalid(std::string(flag) +
                               " must be PREFILL,DECODE,COLDSTART multiples, e.g. 0.7,0.7,1.3; "
                               "got '" +
                               text + "'"));
  }
  return sim::ModelError{(*v)[0], (*v)[1], (*v)[2]};
}

Result<std::pair<double, double>> parseTokenScale(const std::string& text) {
  auto v = positiveList(text, "--token-scale");
  if (!v) return fail(v.error());
  if (v->size() != 2) {
    return fail(Error::invalid("--token-scale must be PROMPT,OUTPUT multiples, e.g. 1,10; got '" +
                               text + "'"));
  }
  return std::pair{(*v)[0], (*v)[1]};
}

Result<sim::ServingTrace> readTrace(const std::string& path,
                                    const std::optional<std::string>& format, double timeScale) {
  sim::ServingTraceFormat f = sim::ServingTraceFormat::kAzure;
  if (format) {
    f = *format == "mooncake" ? sim::ServingTraceFormat::kMooncake
                              : sim::ServingTraceFormat::kAzure;
  } else {
    auto guessed = sim::servingTraceFormatOf(path);
    if (!guessed) return fail(guessed.error());
    f = *guessed;
  }
  return sim::readServingTrace(path, f, timeScale);
}

double meanRate(const sim::ServingTrace& t) {
  const double span = static_cast<double>(t.spanUs()) / 1e6;
  return span > 0 ? static_cast<double>(t.requests.size()) / span : 1.0;
}

// A QPS series shaped into requests whose lengths come from another trace.
Result<sim::ServingTrace> qpsTrace(const std::string& seriesPath, const sim::ServingTrace& tokens,
                                   double meanRatePerSec, double spanSeconds, std::uint64_t seed,
                                   std::string name) {
  auto series = sim::readQpsSeries(seriesPath);
  if (!series) return fail(series.error());
  sim::QpsShapeOptions q;
  q.meanRatePerSec = meanRatePerSec;
  q.spanSeconds = spanSeconds;
  q.seed = seed;
  return sim::shapeTrace(*series, tokens, q, std::move(name));
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace tessera::cli
