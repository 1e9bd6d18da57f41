#include "cmd_simulate_fleet.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cmd_simulate_serving.h"
#include "model/gpu_catalog.h"
#include "out_dir.h"
#include "serving_cli.h"
#include "sim/fleet.h"
#include "sim/fleet_plan.h"
#include "sim/fleet_report.h"
#include "sim/fleet_traffic.h"
#include "table.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kSimulateFleetCommand = "simulate fleet";

Result<std::vector<std::string>> policyList(const std::string& spec) {
  std::vector<std::string> out;
  if (spec == "all") {
    for (auto n : sim::kFleetPolicyNames) out.emplace_back(n);
    return out;
  }
  for (std::string& name : splitList(spec)) {
    if (!sim::isFleetPolicyName(name)) {
      std::string known;
      for (auto n : sim::kFleetPolicyNames) known += (known.empty() ? "" : ", ") + std::string(n);
      return fail(Error::invalid("--policies: unknown policy '" + name + "' (known: " + known +
                                 ", or all)"));
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  if (out.empty()) return fail(Error::invalid("--policies: no policy named"));
  return out;
}

Result<std::map<std::string, double>> parsePrices(const std::vector<std::string>& items,
                                                  const model::GpuCatalog& catalog) {
  std::map<std::string, double> out;
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail(Error::invalid("--price " + item + ": expected TYPE=USD, e.g. H100-80GB=3.2"));
    }
    const std::string type = item.substr(0, eq);
    if (catalog.find(type) == nullptr) {
      return fail(Error::invalid("--price " + item + ": unknown GPU type '" + type + "'"));
    }
    const auto v = number(item.substr(eq + 1));
    if (!v || !(*v >= 0) || !std::isfinite(*v)) {
      return fail(Error::invalid("--price " + item + ": expected a price >= 0 after '='"));
    }
    out[type] = *v;
  }
  return out;
}

// GenTD26's recorded load latencies, when the files are there.
std::optional<sim::RecordedLoads> recordedLoads(const std::string& dataDir, std::ostream& err) {
  const std::string dir = dataDir + "/alibaba-gentd26-genai-serving";
  const std::string base = dir + "/basemodel_update_latency_anon.tar.gz";
  const std::string lora = dir + "/lora_update_latency_anon.tar.gz";
  std::error_code ec;
  if (!std::filesystem::exists(base, ec) || !std::filesystem::exists(lora, ec)) return std::nullopt;
  auto b = sim::readLatencySeconds(base);
  auto l = sim::readLatencySeconds(lora);
  if (!b || !l) {
    err << "tessera simulate fleet: warning: recorded load latencies not read: "
        << (b ? l.error().message : b.error().message) << '\n';
    return std::nullopt;
  }
  return sim::RecordedLoads{"Alibaba GenTD26 basemodel_update_latency, lora_update_latency",
                            sim::distributionOf(std::move(*b)), sim::distributionOf(std::move(*l))};
}

std::string pct(double v) {
  return fmt::format("{:.1f}%", 100 * v);
}

void printTable(const sim::FleetReport& r, std::ostream& out) {
  out << fmt::format("fleet {}: {} nodes, {} GPUs, {} deployments; traffic: {}\n\n", r.fleet,
                     r.nodes, r.gpus, r.deployments.size(), r.source);
  Table t({{"POLICY"},
           {"SLO MET", Align::kRight},
           {"DEPLOYMENTS >= TARGET", Align::kRight},
           {"GPU-H", Align::kRight},
           {"COST", Align::kRight},
           {"PEAK GPUS", Align::kRight},
           {"MEM USED", Align::kRight},
           {"COMPUTE", Align::kRight},
           {"COLD STARTS (host/disk/remote)", Align::kRight},
           {"COLD P50", Align::kRight},
           {"EVICTIONS", Align::kRight},
           {"PENDING", Align::kRight}});
  for (const sim::FleetPolicyResult& p : r.policies) {
    t.addRow({p.policy, fmt::format("{:.2f}%", 100 * p.sloAttainment),
              fmt::format("{}/{}", p.deploymentsMeetingTarget, p.deployments.size()),
              fmt::format("{:.1f}", p.gpuHours), fmt::format("${:.0f}", p.cost),
              std::to_string(p.peakGpus), pct(p.meanMemoryUtilization),
              pct(p.meanComputeUtilization),
              fmt::format("{} ({}/{}/{})", p.coldStarts, p.coldStartsByTier[0],
                          p.coldStartsByTier[1], p.coldStartsByTier[2]),
              fmt::format("{:.1f} s", p.coldStartAll.p50), std::to_string(p.evictions),
              fmt::format("{:.0f} s", p.pendingReplicaSeconds)});
  }
  t.print(out, "  ");
  out << "\n  SLO MET: requests with TTFT within their deployment's SLO; GPU-H: cards holding a "
         "replica x hours;\n  MEM USED: weights + KV of running requests on cards in use; COMPUTE: "
         "tensor activity on them.\n";
  if (r.recorded) {
    out << fmt::format(
        "\n  recorded loads ({}): base model p50 {:.1f} s, p90 {:.1f} s; LoRA p50 {:.1f} s\n",
        r.recorded->source, r.recorded->baseModel.p50, r.recorded->baseModel.p90,
        r.recorded->lora.p50);
  }
}

Result<sim::FleetSpec> fleetSpec(const SimulateFleetOptions& o,
                                 const std::map<std::string, double>& prices) {
  if (o.fleetPath) {
    auto spec = sim::loadFleetFile(*o.fleetPath, model::GpuCatalog::builtin());
    if (!spec) return fail(spec.error());
    // --price wins over the file's prices.
    for (const auto& [type, price] : prices) spec->pricePerGpuHour[type] = price;
    return spec;
  }
  if (!(o.minutes >= 10) || !std::isfinite(o.minutes)) {
    return fail(Error::invalid("--minutes must be at least 10"));
  }
  sim::DefaultFleetOptions dfo;
  dfo.dataDir = o.dataDir;
  dfo.spanSeconds = o.minutes * 60;
  dfo.nodes = o.nodes;
  dfo.loraModels = o.checkpoints;
  dfo.rateScale = o.rateScale;
  dfo.seed = o.seed;
  auto spec = sim::defaultFleet(dfo);
  if (!spec) return fail(spec.error());
  spec->pricePerGpuHour = prices;
  return spec;
}

// The traffic options `simulate fleet` and `plan` share; --fleet replaces the default
// experiment's (and excludes them).
CLI::Option* addTrafficOptions(CLI::App& cmd, SimulateFleetOptions& o) {
  CLI::Option* fleet = cmd.add_option("--fleet", o.fleetPath,
                                      "A fleet file (nodes, models, prices, deployments and their "
                                      "traffic) instead of the default experiment")
                           ->check(CLI::ExistingFile);
  std::vector<CLI::Option*> experiment;
  experiment.push_back(
      cmd.add_option("--data", o.dataDir,
                     "Folder with the public traces (azure-llm-inference-2023, "
                     "alibaba-gentd26-genai-serving); a built-in synthetic fleet when absent")
          ->capture_default_str());
  experiment.push_back(cmd.add_option("--minutes", o.minutes, "Every deployment's measured window")
                           ->capture_default_str());
  experiment.push_back(
      cmd.add_option("--checkpoints", o.checkpoints,
                     "GenTD26 checkpoints served as models of their own (the most requested "
                     "first)")
          ->capture_default_str());
  experiment.push_back(
      cmd.add_option("--rate-scale", o.rateScale, "Every deployment's request rate x this")
          ->capture_default_str());
  experiment.push_back(
      cmd.add_option("--seed", o.seed, "Seed of the traffic draws")->capture_default_str());
  for (CLI::Option* e : experiment) fleet->excludes(e);
  cmd.add_option("--price", o.prices,
                 "Price per GPU-hour, TYPE=USD (repeatable; default H100-80GB=4, A100-80GB=2.5, "
                 "L40S=1.5)");
  return fleet;
}

}  // namespace

int runSimulateFleet(const SimulateFleetOptions& o, std::ostream& out, std::ostream& err) {
  const auto catalog = model::GpuCatalog::builtin();
  if (o.jobs < 0)
    return reportError(err, kSimulateFleetCommand, Error::invalid("--jobs must be >= 0"));
  auto policies = policyList(o.policies);
  if (!policies) return reportError(err, kSimulateFleetCommand, policies.error());
  auto prices = parsePrices(o.prices, catalog);
  if (!prices) return reportError(err, kSimulateFleetCommand, prices.error());
  auto spec = fleetSpec(o, *prices);
  if (!spec) return reportError(err, kSimulateFleetCommand, spec.error());
  const std::size_t jobs = o.jobs > 0 ? static_cast<std::size_t>(o.jobs)
                                      : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Result<sim::FleetPolicyResult>> results(policies->size(),
                                                      fail(Error::internal("not run")));
  // Each run owns its cluster; results do not depend on --jobs.
  for (std::size_t begin = 0; begin < policies->size(); begin += jobs) {
    const std::size_t end = std::min(policies->size(), begin + jobs);
    std::vector<std::future<void>> running;
    for (std::size_t i = begin; i < end; ++i) {
      running.push_back(std::async(jobs > 1 ? std::launch::async : std::launch::deferred, [&, i] {
        results[i] = sim::runFleet(*spec, catalog, (*policies)[i]);
      }));
    }
    for (auto& f : running) f.get();
  }
  sim::FleetReport report;
  report.fleet = spec->name;
  report.source = spec->source;
  for (const auto& g : spec->nodes) {
    report.nodes += g.nodes;
    report.gpus += g.nodes * g.gpusPerNode;
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i]) {
      return reportError(
          err, kSimulateFleetCommand,
          Error{results[i].error().code, (*policies)[i] + ": " + results[i].error().message});
    }
    report.policies.push_back(std::move(*results[i]));
  }
  report.deployments = spec->deployments;
  report.recorded = recordedLoads(o.dataDir, err);
  if (o.outDir) {
    auto dir = OutDir::create(*o.outDir);
    if (!dir) return reportError(err, kSimulateFleetCommand, dir.error());
    for (auto ok :
         {dir->write("fleet.json",
                     [&](std::ostream& f) { f << sim::fleetJson(report).dump(2) << '\n'; }),
          dir->write("fleet_timeline.csv",
                     [&](std::ostream& f) { sim::writeFleetTimelineCsv(f, report); }),
          dir->write("fleet_utilization.svg",
                     [&](std::ostream& f) { f << sim::fleetPlotSvg(report); })}) {
      if (!ok) return reportError(err, kSimulateFleetCommand, ok.error());
    }
    for (const auto& path : dir->written()) err << "wrote " << path << '\n';
  }
  if (o.format == SimulateFormat::kJson) {
    out << sim::fleetJson(report).dump(2) << '\n';
  } else if (o.format == SimulateFormat::kCsv) {
    sim::writeFleetTimelineCsv(out, report);
  } else {
    printTable(report, out);
  }
  return kExitOk;
}

CLI::App* addSimulateFleet(CLI::App& simulate, SimulateFleetOptions& o) {
  CLI::App* cmd = simulate.add_subcommand(
      "fleet",
      "Many deployments on one fleet under whole-gpu, time-slicing, binpack and tessera: "
      "GPU-hours, "
      "cost, utilisation, SLO attainment and cold starts (docs/fleet-simulator.md)");
  CLI::Option* fleet = addTrafficOptions(*cmd, o);
  fleet->excludes(cmd->add_option("--nodes", o.nodes, "Nodes of 8 H100-80GB in the fleet")
                      ->capture_default_str());
  cmd->add_option("--policies", o.policies,
                  "Comma-separated: whole-gpu, time-slicing, binpack, tessera, or all")
      ->capture_default_str();
  cmd->add_option("--jobs,-j", o.jobs, "Policies run in parallel (0: one per core)")
      ->default_str("1");
  cmd->add_option("--out-dir", o.outDir,
                  "Write fleet.json, fleet_timeline.csv and fleet_utilization.svg here");
  addSimulateFormatOption(*cmd, o.format);
  return cmd;
}

namespace {

constexpr std::string_view kPlan = "plan";

nlohmann::json planJson(const sim::Plan& p, double sloTarget) {
  nlohmann::json j = {
      {"policy", p.policy}, {"slo_target", sloTarget}, {"options", nlohmann::json::array()}};
  for (const sim::PlanOption& o : p.options) {
    nlohmann::json x = {{"gpu_type", o.gpuType},
                        {"feasible", o.feasible},
                        {"price_per_gpu_hour", o.pricePerGpuHour},
                        {"runs", o.runs}};
    if (!o.feasible) {
      x["why"] = o.why;
    } else {
      x["gpus"] = o.gpus;
      x["cost_per_hour"] = o.costPerHour;
      x["slo_attainment"] = o.atCount.sloAttainment;
      x["gpu_hours"] = o.atCount.gpuHours;
      x["peak_gpus"] = o.atCount.peakGpus;
      x["one_fewer"] = {{"slo_attainment", o.attainmentOneFewer},
                        {"binding_deployment", o.bindingDeployment},
                        {"binding_attainment", o.bindingAttainment}};
    }
    j["options"].push_back(std::move(x));
  }
  if (p.best) j["best"] = p.options[*p.best].gpuType;
  return j;
}

}  // namespace

int runPlan(const PlanCliOptions& o, std::ostream& out, std::ostream& err) {
  const auto catalog = model::GpuCatalog::builtin();
  auto prices = parsePrices(o.traffic.prices, catalog);
  if (!prices) return reportError(err, kPlan, prices.error());
  auto spec = fleetSpec(o.traffic, *prices);
  if (!spec) return reportError(err, kPlan, spec.error());
  if (!(o.sloTarget > 0 && o.sloTarget <= 1)) {
    return reportError(err, kPlan, Error::invalid("--slo-target must be in (0, 1]"));
  }
  sim::PlanOptions po;
  po.gpuTypes = splitList(o.gpuTypes);
  for (const std::string& t : po.gpuTypes) {
    if (catalog.find(t) == nullptr) {
      return reportError(err, kPlan, Error::invalid("--gpu-types: unknown GPU type '" + t + "'"));
    }
  }
  po.maxGpus = o.maxGpus;
  po.sloTarget = o.sloTarget;
  auto policies = policyList(o.policies);
  if (!policies) return reportError(err, kPlan, policies.error());
  std::vector<sim::Plan> plans;
  for (const std::string& policy : *policies) {
    po.policy = policy;
    auto p = sim::plan(*spec, catalog, po);
    if (!p) return reportError(err, kPlan, p.error());
    plans.push_back(std::move(*p));
  }
  if (o.format == "json") {
    nlohmann::json j = {{"fleet", spec->name},
                        {"source", spec->source},
                        {"deployments", spec->deployments.size()},
                        {"plans", nlohmann::json::object()}};
    for (const sim::Plan& p : plans) j["plans"][p.policy] = planJson(p, o.sloTarget);
    out << j.dump(2) << '\n';
    return kExitOk;
  }
  out << fmt::format("{} deployments; traffic: {}\n", spec->deployments.size(), spec->source);
  for (const sim::Plan& p : plans) {
    out << fmt::format("\n{}: the fewest GPUs of each type that meet every SLO ({:.0f} %)\n\n",
                       p.policy, 100 * o.sloTarget);
    Table t({{"GPU TYPE"},
             {"GPUS", Align::kRight},
             {"$/GPU-H", Align::kRight},
             {"$/HOUR", Align::kRight},
             {"SLO MET", Align::kRight},
             {"ONE FEWER", Align::kRight},
             {"BINDING DEPLOYMENT"}});
    for (const sim::PlanOption& x : p.options) {
      if (!x.feasible) {
        t.addRow({x.gpuType, "-", fmt::format("{:.2f}", x.pricePerGpuHour), "-", "-", "-", x.why});
        continue;
      }
      t.addRow(
          {x.gpuType + (p.best && p.options[*p.best].gpuType == x.gpuType ? " *" : ""),
           std::to_string(x.gpus), fmt::format("{:.2f}", x.pricePerGpuHour),
           fmt::format("{:.2f}", x.costPerHour),
           fmt::format("{:.2f}%", 100 * x.atCount.sloAttainment),
           x.bindingDeployment.empty() ? "-" : fmt::format("{:.2f}%", 100 * x.attainmentOneFewer),
           x.bindingDeployment.empty()
               ? "-"
               : fmt::format("{} ({:.2f}%)", x.bindingDeployment, 100 * x.bindingAttainment)});
    }
    t.print(out, "  ");
  }
  out << "\n  * the cheapest; ONE FEWER: attainment with one GPU less, and the deployment that "
         "misses most there\n";
  return kExitOk;
}

CLI::App* addPlan(CLI::App& app, PlanCliOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "The smallest fleet per GPU type that meets every deployment's SLO under tessera, and what "
      "whole GPUs would need, on the traffic of `simulate fleet` (docs/fleet-simulator.md)");
  addTrafficOptions(*cmd, o.traffic);
  cmd->add_option("--gpu-types", o.gpuTypes, "Candidate GPU types, comma-separated")
      ->capture_default_str();
  cmd->add_option("--policies", o.policies, "Policies to plan for, comma-separated")
      ->capture_default_str();
  cmd->add_option("--slo-target", o.sloTarget, "Attainment every deployment must reach")
      ->capture_default_str();
  cmd->add_option("--max-gpus", o.maxGpus, "The search gives up above this many GPUs")
      ->capture_default_str();
  cmd->add_option("-o,--output", o.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  return cmd;
}

}  // namespace tessera::cli
