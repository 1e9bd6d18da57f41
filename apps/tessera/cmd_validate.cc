#include "cmd_validate.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "agent/agent_config.h"
#include "common/text.h"
#include "config/loaders.h"
#include "config/serve_config.h"
#include "model/gpu_catalog.h"
#include "sched/plugin.h"
#include "sched/profile.h"
#include "serve_settings.h"
#include "sim/fleet.h"
#include "sim/serving_model.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

constexpr std::string_view kKinds[] = {"Cluster",      "PlacementRequests", "PlacementProfile",
                                       "ServerConfig", "AgentConfig",       "ServingModel",
                                       "Fleet"};

// The file's `kind:`, read leniently: the loader then says what else is wrong.
Result<std::string> kindOf(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Error::invalid(path + ": cannot read the file"));
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return fail(
        Error::invalid(path + ":" + std::to_string(e.mark.line + 1) + ": not YAML: " + e.msg));
  }
  std::string known;
  for (std::string_view k : kKinds) known += (known.empty() ? "" : ", ") + std::string(k);
  if (!root.IsMap() || !root["kind"] || !root["kind"].IsScalar()) {
    return fail(Error::invalid(path + ": no `kind:`; a Tessera file is one of " + known));
  }
  const std::string kind = root["kind"].Scalar();
  if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds)) {
    std::string msg = path + ": kind " + kind + " is not a Tessera configuration file";
    if (const auto near = closestName(
            kind, std::vector<std::string_view>(std::begin(kKinds), std::end(kKinds)))) {
      msg += " (did you mean " + std::string(*near) + "?)";
    }
    return fail(Error::invalid(msg + "; one of " + known));
  }
  return kind;
}

struct Checked {
  std::string file, kind, summary;
  std::optional<Error> error;
};

}  // namespace

int runValidate(const ValidateOptions& options, std::ostream& out, std::ostream& err) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  std::vector<model::ModelProfile> known;
  std::vector<Checked> results;
  // Cluster files first: their models and GPU types are what requests files may name.
  std::vector<std::pair<std::string, Result<std::string>>> kinds;
  for (const std::string& f : options.files) kinds.emplace_back(f, kindOf(f));
  std::stable_sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) {
    return (a.second && *a.second == "Cluster") > (b.second && *b.second == "Cluster");
  });
  for (const auto& [file, kind] : kinds) {
    Checked c{file, kind ? *kind : "", "", std::nullopt};
    if (!kind) {
      c.error = kind.error();
    } else if (*kind == "Cluster") {
      auto cluster = config::loadClusterFile(file, catalog);
      if (!cluster) {
        c.error = cluster.error();
      } else {
        std::size_t gpus = 0;
        for (const auto& n : cluster->nodes) gpus += n.gpus.size();
        c.summary = std::to_string(cluster->nodes.size()) + " nodes, " + std::to_string(gpus) +
                    " GPUs, " + std::to_string(cluster->models.size()) + " models, " +
                    std::to_string(cluster->replicas.size()) + " replicas";
        known.insert(known.end(), cluster->models.begin(), cluster->models.end());
      }
    } else if (*kind == "PlacementRequests") {
      auto requests = config::loadRequestsFile(file, known, &catalog);
      if (!requests) {
        c.error = requests.error();
      } else {
        c.summary = std::to_string(requests->requests.size()) + " requests";
      }
    } else if (*kind == "PlacementProfile") {
      auto profile = config::loadProfileFile(file);
      if (profile) {
        sched::PluginRegistry registry;
        sched::registerBuiltinPlugins(registry);
        if (auto plugins = sched::buildPlugins(*profile, registry); !plugins) {
          c.error = Error{plugins.error().code, file + ": " + plugins.error().message};
        } else {
          c.summary = std::to_string(profile->filters.size()) + " filters, " +
                      std::to_string(profile->scores.size()) + " scores";
        }
      } else {
        c.error = profile.error();
      }
    } else if (*kind == "ServerConfig") {
      // As `serve --config` reads it, with the files it names (docs/cli.md).
      if (auto serve = checkServeConfigFile(file); !serve) {
        c.error = serve.error();
      } else if (!serve->notHere.empty()) {
        c.summary = "not checked here, absent on this machine:";
        for (const std::string& absent : serve->notHere) c.summary += " " + absent;
      }
    } else if (*kind == "AgentConfig") {
      if (auto agent = agent::loadAgentFile(file); !agent) c.error = agent.error();
    } else if (*kind == "ServingModel") {
      if (auto m = sim::loadServingModelFile(file); !m) c.error = m.error();
    } else if (*kind == "Fleet") {
      // As `simulate fleet --fleet` reads it, traces included.
      auto fleet = sim::loadFleetFile(file, model::GpuCatalog::builtin());
      if (!fleet) {
        c.error = fleet.error();
      } else {
        c.summary = std::to_string(fleet->deployments.size()) + " deployments";
      }
    }
    results.push_back(std::move(c));
  }
  bool allOk = true;
  json list = json::array();
  for (const Checked& c : results) {
    allOk = allOk && !c.error;
    if (options.format == OutputFormat::kJson) {
      json e = {{"file", c.file},
                {"kind", c.kind.empty() ? json(nullptr) : json(c.kind)},
                {"valid", !c.error}};
      if (c.error) e["error"] = c.error->message;
      if (!c.summary.empty()) e["summary"] = c.summary;
      list.push_back(std::move(e));
    } else if (c.error) {
      err << "tessera validate: " << c.error->message << '\n';
    } else {
      out << c.file << ": valid " << c.kind << (c.summary.empty() ? "" : " (" + c.summary + ")")
          << '\n';
    }
  }
  if (options.format == OutputFormat::kJson)
    out << json{{"files", list}, {"valid", allOk}}.dump(2) << '\n';
  return allOk ? kExitOk : kExitUsage;
}

}  // namespace tessera::cli
