#include "cmd_place.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "config/loaders.h"
#include "config/seed.h"
#include "model/gpu_catalog.h"
#include "place_output.h"
#include "place_plan.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/plugin.h"
#include "sched/profile.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kPlaceCommand = "place";

Error prefixed(const std::string& prefix, const Error& error) {
  return Error{error.code, prefix + error.message};
}

}  // namespace

int runPlace(const PlaceOptions& options, std::ostream& out, std::ostream& err) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();

  auto cluster = config::loadClusterFile(options.clusterPath, catalog);
  if (!cluster) return reportError(err, kPlaceCommand, cluster.error());

  auto requests = config::loadRequestsFile(options.requestsPath, cluster->models, &catalog);
  if (!requests) return reportError(err, kPlaceCommand, requests.error());

  sched::Profile profile = sched::defaultProfile();
  if (options.profilePath) {
    auto loaded = config::loadProfileFile(*options.profilePath);
    if (!loaded) return reportError(err, kPlaceCommand, loaded.error());
    profile = std::move(*loaded);
  }
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  auto plugins = sched::buildPlugins(profile, registry);
  if (!plugins) {
    const std::string source = options.profilePath ? *options.profilePath : "built-in profile";
    return reportError(err, kPlaceCommand, prefixed(source + ": ", plugins.error()));
  }

  // Replica ids are unique across the cluster: a request may not reuse a running one's.
  for (const config::ExistingReplica& running : cluster->replicas) {
    const auto& list = requests->requests;
    const bool clash = std::any_of(list.begin(), list.end(),
                                   [&](const auto& r) { return r.replicaId == running.replicaId; });
    if (clash) {
      return reportError(err, kPlaceCommand,
                         Error::invalid(options.requestsPath + ": replica id \"" +
                                        running.replicaId + "\" is already running in " +
                                        options.clusterPath + "; give the new replica another id"));
    }
  }

  if (options.explainReplica) {
    const auto& list = requests->requests;
    const bool known = std::any_of(list.begin(), list.end(), [&](const auto& r) {
      return r.replicaId == *options.explainReplica;
    });
    if (!known) {
      return reportError(err, kPlaceCommand,
                         Error::invalid("--explain: no request in " + options.requestsPath +
                                        " has replica id '" + *options.explainReplica + "'"));
    }
  }

  // What-if planning on a snapshot: time stands still at 0, so no reservation lapses.
  const ManualClock clock(0);
  sched::ClusterState state(catalog, clock, profile.options);
  if (auto seeded = config::seedClusterState(state, *cluster, options.clusterPath); !seeded) {
    return reportError(err, kPlaceCommand, seeded.error());
  }

  sched::PlacementEngine engine(std::move(*plugins), profile.options);
  const PlanReport report =
      planPlacement(engine, state, requests->requests, options.mode, options.explainReplica);
  if (options.format == OutputFormat::kJson) {
    out << planToJson(report, state).dump(2) << '\n';
  } else {
    printPlanTable(report, state, out);
  }
  return kExitOk;
}

}  // namespace tessera::cli
