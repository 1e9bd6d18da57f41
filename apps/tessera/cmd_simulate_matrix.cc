#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cmd_simulate_serving.h"
#include "model/gpu_catalog.h"
#include "serving_cli.h"
#include "sim/serving_closed_loop.h"
#include "sim/serving_matrix.h"
#include "sim/serving_trace.h"
#include "table.h"

// `tessera simulate serving-matrix` and `tessera simulate replica`: wiring only.

namespace tessera::cli {
namespace {

Result<std::vector<bool>> parseSwitch(const std::string& text, const char* flag, const char* onName,
                                      const char* offName) {
  std::vector<bool> out;
  for (const std::string& v : splitList(text)) {
    if (v == onName) {
      out.push_back(true);
    } else if (v == offName) {
      out.push_back(false);
    } else {
      return fail(Error::invalid(std::string(flag) + ": expected " + onName + " and/or " + offName +
                                 ", got '" + v + "'"));
    }
  }
  if (out.empty()) return fail(Error::invalid(std::string(flag) + ": nothing named"));
  return out;
}

// The `seconds` of a trace that start `skip` seconds in, moved to start at 0.
sim::ServingTrace window(sim::ServingTrace t, double skip, double seconds) {
  const auto from = static_cast<sim::Micros>(skip * 1e6);
  const auto until = static_cast<sim::Micros>((skip + seconds) * 1e6);
  std::erase_if(t.requests, [&](const sim::ServingRequest& r) {
    return r.arrivalUs < from || r.arrivalUs >= until;
  });
  for (sim::ServingRequest& r : t.requests) r.arrivalUs -= from;
  return t;
}

}  // namespace

int runSimulateMatrix(const SimulateMatrixOptions& o, std::ostream& out, std::ostream& err) {
  constexpr std::string_view kMatrix = "simulate serving-matrix";
  const auto catalog = model::GpuCatalog::builtin();
  sim::MatrixOptions m;
  auto rates = positiveList(o.rates, "--rates");
  if (!rates) return reportError(err, kMatrix, rates.error());
  m.rates = *rates;
  m.gpus = splitList(o.gpus);
  for (const auto& g : m.gpus) {
    if (catalog.find(g) == nullptr) {
      return reportError(err, kMatrix, Error::invalid("--gpus: unknown GPU type '" + g + "'"));
    }
  }
  if (m.gpus.empty()) return reportError(err, kMatrix, Error::invalid("--gpus: no GPU type"));
  auto warm = parseSwitch(o.warmStarts, "--warm-start", "on", "off");
  if (!warm) return reportError(err, kMatrix, warm.error());
  m.warmStarts = *warm;
  auto cold = parseSwitch(o.coldStarts, "--cold-start", "node-cache", "remote");
  if (!cold) return reportError(err, kMatrix, cold.error());
  m.nodeCacheHits = *cold;
  auto error = parseModelError(o.modelError, "--model-error");
  if (!error) return reportError(err, kMatrix, error.error());
  m.base.actual = *error;
  auto tokenScale = parseTokenScale(o.tokenScale);
  if (!tokenScale) return reportError(err, kMatrix, tokenScale.error());
  if (o.routerQueueDepth < 0) {
    return reportError(err, kMatrix, Error::invalid("--router-queue-depth must be >= 0"));
  }
  m.base.routerQueueDepth = o.routerQueueDepth;
  if (o.clairvoyantRuns < 1) {
    return reportError(err, kMatrix, Error::invalid("--clairvoyant-runs must be >= 1"));
  }
  m.base.clairvoyantMaxRuns = o.clairvoyantRuns;
  auto settings = parsePolicyArgs(o.policyArgs);
  if (!settings) return reportError(err, kMatrix, settings.error());
  m.base.policySettings = std::move(*settings);
  if (!(o.minutes > 0)) return reportError(err, kMatrix, Error::invalid("--minutes must be > 0"));
  if (!(o.skipMinutes >= 0) || !std::isfinite(o.skipMinutes)) {
    return reportError(err, kMatrix, Error::invalid("--skip-minutes must be >= 0"));
  }
  // A month of trace time: well past any recorded trace, and far from the clock's range.
  constexpr double kMostMinutes = 31 * 24 * 60;
  if (!(o.minutes + o.skipMinutes <= kMostMinutes)) {
    return reportError(err, kMatrix,
                       Error::invalid(fmt::format("--minutes plus --skip-minutes must be at most "
                                                  "{:.0f} (31 days), got {:g}",
                                                  kMostMinutes, o.minutes + o.skipMinutes)));
  }
  if (o.qpsTokens != "azure" && o.qpsTokens != "mooncake") {
    return reportError(
        err, kMatrix,
        Error::invalid("--qps-tokens must be azure or mooncake, got '" + o.qpsTokens + "'"));
  }
  m.jobs =
      o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.format != "markdown" && o.format != "json") {
    return reportError(err, kMatrix, Error::invalid("-o must be markdown or json"));
  }

  // The traces asked for; of those read from --data, each missing one is named on stderr.
  constexpr std::array<std::string_view, 4> kTraceNames = {"azure-conv", "mooncake", "gentd26-qps",
                                                           "builtin-chat"};
  std::set<std::string> wanted;
  for (const std::string& name : splitList(o.traces)) {
    if (std::find(kTraceNames.begin(), kTraceNames.end(), name) == kTraceNames.end()) {
      std::string known;
      for (std::string_view k : kTraceNames) known += (known.empty() ? "" : ", ") + std::string(k);
      return reportError(err, kMatrix,
                         Error::invalid("--traces: unknown trace '" + name + "' (" + known + ")"));
    }
    wanted.insert(name);
  }
  if (wanted.empty()) return reportError(err, kMatrix, Error::invalid("--traces: nothing named"));
  const bool qpsWanted = wanted.contains("gentd26-qps");
  const std::filesystem::path data(o.dataDir);
  const auto azurePath = data / "azure-llm-inference-2023" / "AzureLLMInferenceTrace_conv.csv";
  const auto mooncakePath = data / "mooncake-fast25-traces" / "synthetic_trace.jsonl";
  const auto qpsPath = data / "alibaba-gentd26-genai-serving" / "qps.tar.gz";
  const double seconds = o.minutes * 60;
  const double skip = o.skipMinutes * 60;
  const std::string tokensName = o.qpsTokens == "azure" ? "azure-conv" : "mooncake";
  std::vector<sim::MatrixTrace> traces;
  std::optional<sim::ServingTrace> tokens;  // the QPS shape's lengths: tokensName, whole
  for (const auto& [name, path] :
       {std::pair{"azure-conv", azurePath}, std::pair{"mooncake", mooncakePath}}) {
    // Read where asked for, or for the QPS shape's lengths.
    const bool asked = wanted.contains(name);
    if (!asked && !(qpsWanted && name == tokensName)) continue;
    if (!std::filesystem::exists(path)) {
      err << "tessera " << kMatrix << ": " << (asked ? "skipping " : "no lengths for gentd26-qps: ")
          << name << ": " << path.string() << " not found\n";
      continue;
    }
    auto t = readTrace(path.string(), std::nullopt, 1.0);
    if (!t) return reportError(err, kMatrix, t.error());
    if (name == tokensName) tokens = *t;
    if (!asked) continue;
    const double endsAt =
        t->requests.empty() ? 0 : static_cast<double>(t->requests.back().arrivalUs) / 60e6;
    sim::ServingTrace cut = window(std::move(*t), skip, seconds);
    if (cut.requests.empty()) {
      err << "tessera " << kMatrix << ": skipping " << name << ": no request in minutes "
          << o.skipMinutes << " to " << o.skipMinutes + o.minutes << "\n";
      continue;
    }
    if (endsAt < o.skipMinutes + o.minutes) {
      err << "tessera " << kMatrix << ": " << name << " ends at minute "
          << fmt::format("{:.1f}", endsAt) << ": its window is minutes " << o.skipMinutes << " to "
          << fmt::format("{:.1f}", endsAt) << "\n";
    }
    traces.push_back({name, std::move(cut)});
    traces.back().trace.name = name;
  }
  if (qpsWanted && o.qpsTokens != "azure" && (!tokens || !std::filesystem::exists(qpsPath))) {
    return reportError(err, kMatrix,
                       Error::invalid("--qps-tokens " + o.qpsTokens + " needs " + qpsPath.string() +
                                      " and the " + tokensName + " trace"));
  }
  if (!qpsWanted) {
    // Not asked for.
  } else if (std::filesystem::exists(qpsPath) && tokens) {
    // The GenTD26 service's total QPS over its ~22 hours, compressed to the window, at the
    // token trace's mean rate, with its prompt and output lengths.
    const std::string name = o.qpsTokens == "azure" ? "gentd26-qps" : "gentd26-qps-mooncake";
    auto t = qpsTrace(qpsPath.string(), *tokens, meanRate(*tokens), seconds, o.seed, name);
    if (!t) return reportError(err, kMatrix, t.error());
    traces.push_back({name, std::move(*t)});
  } else {
    err << "tessera " << kMatrix << ": skipping the GenTD26 QPS shape: needs " << qpsPath.string()
        << " and the " << tokensName << " trace for token lengths\n";
  }
  if (wanted.contains("builtin-chat")) {
    // The built-in hour whole: its shape (a swell and a burst at twice the rate from minute 40
    // to 44) is the point, so --minutes and --skip-minutes leave it as it is.
    traces.push_back({"builtin-chat", sim::builtinChatTrace(o.seed, 1.0)});
  }
  for (sim::MatrixTrace& t : traces) {
    auto scaled = sim::scaleTokenLengths(t.trace, tokenScale->first, tokenScale->second);
    if (!scaled) return reportError(err, kMatrix, scaled.error());
  }
  if (traces.empty()) {
    return reportError(err, kMatrix,
                       Error::invalid("no trace under " + o.dataDir +
                                      " (expects the folders of ../shared/data; --data DIR; "
                                      "--traces builtin-chat needs none)"));
  }
  const auto started = std::chrono::steady_clock::now();
  auto cells = sim::runServingMatrix(traces, catalog, m);
  if (!cells) return reportError(err, kMatrix, cells.error());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (o.format == "json") {
    nlohmann::json j = sim::matrixJson(*cells, m);
    j["summary"]["wall_seconds"] = std::round(wall * 10) / 10;
    j["summary"]["minutes"] = o.minutes;
    j["summary"]["skip_minutes"] = o.skipMinutes;
    j["summary"]["seed"] = o.seed;
    j["summary"]["qps_tokens"] = o.qpsTokens;
    j["summary"]["token_scale"] = {{"prompt", tokenScale->first}, {"output", tokenScale->second}};
    out << j.dump(2) << '\n';
  } else {
    out << fmt::format(
        "Robustness matrix: {} cells, minutes {} to {} of each recorded trace{}, model error "
        "(prefill, "
        "decode, cold start) {}, token lengths (prompt, output) x {}, clairvoyant search {} runs "
        "per share; {:.0f} s wall on {} threads.\n",
        cells->size(), o.skipMinutes, o.skipMinutes + o.minutes,
        wanted.contains("builtin-chat") ? " (builtin-chat whole)" : "", o.modelError, o.tokenScale,
        o.clairvoyantRuns, wall, m.jobs);
    sim::writeMatrixMarkdown(out, *cells, m);
  }
  return kExitOk;
}

CLI::App* addSimulateMatrix(CLI::App& simulate, SimulateMatrixOptions& o) {
  CLI::App* cmd = simulate.add_subcommand(
      "serving-matrix",
      "Run tessera, the baselines and the clairvoyant over every trace x rate x warm start x GPU "
      "x cold start, and judge tessera in each cell");
  cmd->add_option(
         "--data", o.dataDir,
         "Folder with the public traces (azure-llm-inference-2023, mooncake-fast25-traces, "
         "alibaba-gentd26-genai-serving)")
      ->capture_default_str();
  cmd->add_option("--minutes", o.minutes, "Each trace's first N minutes at rate 1")
      ->capture_default_str();
  cmd->add_option("--skip-minutes", o.skipMinutes,
                  "Held-out windows: each recorded trace's window starts N minutes in (the Azure "
                  "trace has an hour; a trace with nothing left is skipped)")
      ->capture_default_str();
  cmd->add_option("--traces", o.traces,
                  "Traces, comma-separated: azure-conv, mooncake, gentd26-qps (read from --data), "
                  "builtin-chat (the built-in hour with a burst at twice the rate in minutes "
                  "40-44, whole at every rate; needs no data)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed,
                  "Seed of the GenTD26 QPS shape's arrival and token-length draw, and of the "
                  "built-in hour's")
      ->capture_default_str();
  cmd->add_option("--qps-tokens", o.qpsTokens,
                  "The GenTD26 QPS shape's prompt and output lengths: azure (short prompts) or "
                  "mooncake (long ones)")
      ->check(CLI::IsMember({"azure", "mooncake"}))
      ->capture_default_str();
  cmd->add_option("--rates", o.rates, "Request-rate multiples, comma-separated")
      ->capture_default_str();
  cmd->add_option("--gpus", o.gpus, "GPU types, comma-separated")->capture_default_str();
  cmd->add_option("--warm-start", o.warmStarts, "on, off or both (on,off)")->capture_default_str();
  cmd->add_option("--cold-start", o.coldStarts, "node-cache, remote or both")
      ->capture_default_str();
  cmd->add_option("--model-error", o.modelError,
                  "The world against the model: PREFILL,DECODE,COLDSTART multiples (0.7,0.7,1.3: "
                  "30 % slower and slower to load); the policies are not told")
      ->capture_default_str();
  cmd->add_option("--token-scale", o.tokenScale, kTokenScaleHelp)->capture_default_str();
  cmd->add_option("--router-queue-depth", o.routerQueueDepth,
                  kRouterQueueDepthHelp)
      ->capture_default_str();
  cmd->add_option("--clairvoyant-runs", o.clairvoyantRuns,
                  "Simulations the clairvoyant's search may take per GPU share")
      ->capture_default_str();
  cmd->add_option("--jobs,-j", o.jobs, "Cells in parallel (0: one per core)")->default_str("1");
  cmd->add_option("--policy-arg", o.policyArgs, kPolicyArgHelp);
  cmd->add_option("-o,--output", o.format, "markdown or json")->capture_default_str();
  return cmd;
}

int runSimulateReplica(const SimulateReplicaOptions& o, std::ostream& out, std::ostream& err) {
  constexpr std::string_view kReplica = "simulate replica";
  const auto catalog = model::GpuCatalog::builtin();
  sim::ServingOptions so;
  so.fleet.gpuType = o.gpuType;
  if (o.modelPath) {
    auto model = sim::loadServingModelFile(*o.modelPath);
    if (!model) return reportError(err, kReplica, model.error());
    so.model = std::move(*model);
  }
  auto perf = sim::servingPerf(catalog, so);
  if (!perf) return reportError(err, kReplica, perf.error());
  auto levels = positiveList(o.concurrency, "--concurrency");
  if (!levels) return reportError(err, kReplica, levels.error());
  std::vector<sim::ClosedLoopResult> points;
  for (double c : *levels) {
    if (c != std::floor(c)) {
      return reportError(
          err, kReplica,
          Error::invalid("--concurrency: expected whole numbers, got " + fmt::format("{}", c)));
    }
    sim::ClosedLoopOptions lo;
    lo.concurrency = static_cast<int>(c);
    lo.inputTokens = o.inputTokens;
    lo.outputTokens = o.outputTokens;
    auto r = sim::runClosedLoop(*perf, lo);
    if (!r) return reportError(err, kReplica, r.error());
    points.push_back(*r);
  }
  if (o.format == "json") {
    nlohmann::json j = {{"gpu", o.gpuType},
                        {"model", so.model.name},
                        {"input_tokens", o.inputTokens},
                        {"output_tokens", o.outputTokens},
                        {"points", nlohmann::json::array()}};
    for (const auto& p : points) {
      j["points"].push_back({{"concurrency", p.concurrency},
                             {"requests", p.requests},
                             {"ttft_mean_ms", p.ttftMeanMs},
                             {"ttft_p50_ms", p.ttftP50Ms},
                             {"tpot_mean_ms", p.tpotMeanMs},
                             {"output_tokens_per_s", p.outputTokensPerSec},
                             {"requests_per_s", p.requestsPerSec}});
    }
    out << j.dump(2) << '\n';
    return kExitOk;
  }
  out << fmt::format("{} on {}: {} prompt + {} output tokens, closed loop\n\n", so.model.name,
                     o.gpuType, o.inputTokens, o.outputTokens);
  Table table({{"CONCURRENCY", Align::kRight},
               {"TTFT MEAN", Align::kRight},
               {"TTFT P50", Align::kRight},
               {"TPOT MEAN", Align::kRight},
               {"OUTPUT TOK/S", Align::kRight},
               {"REQ/S", Align::kRight}});
  for (const auto& p : points) {
    table.addRow({std::to_string(p.concurrency), fmt::format("{:.1f} ms", p.ttftMeanMs),
                  fmt::format("{:.1f} ms", p.ttftP50Ms), fmt::format("{:.2f} ms", p.tpotMeanMs),
                  fmt::format("{:.0f}", p.outputTokensPerSec),
                  fmt::format("{:.2f}", p.requestsPerSec)});
  }
  table.print(out, "  ");
  return kExitOk;
}

CLI::App* addSimulateReplica(CLI::App& simulate, SimulateReplicaOptions& o) {
  CLI::App* cmd = simulate.add_subcommand(
      "replica",
      "One replica of the serving model under a closed loop of C concurrent requests, as vLLM's "
      "benchmark drives a server: TTFT, TPOT and throughput per concurrency");
  cmd->add_option("--gpu", o.gpuType, "GPU type (a catalogue name)")->capture_default_str();
  cmd->add_option("--model", o.modelPath, "Served model file; default Llama-3.1-8B in BF16")
      ->check(CLI::ExistingFile);
  cmd->add_option("--input-tokens", o.inputTokens, "Prompt tokens per request")
      ->capture_default_str();
  cmd->add_option("--output-tokens", o.outputTokens, "Output tokens per request")
      ->capture_default_str();
  cmd->add_option("--concurrency", o.concurrency, "Concurrency levels, comma-separated")
      ->capture_default_str();
  cmd->add_option("-o,--output", o.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  return cmd;
}

}  // namespace tessera::cli
