// The plugin registry, score normalisation and the list of built-in plugins.

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "sched/plugin.h"
#include "sched/plugins/affinity_scores.h"
#include "sched/plugins/fit_scores.h"
#include "sched/plugins/fragmentation.h"
#include "sched/plugins/gpu_filters.h"
#include "sched/plugins/node_filters.h"
#include "sched/plugins/topology_filters.h"

namespace tessera::sched {
namespace {

template <typename Factory>
Result<void> addTo(std::map<std::string, Factory, std::less<>>& table, std::string_view kind,
                   std::string name, Factory factory) {
  if (name.empty()) return fail(Error::invalid(std::string(kind) + " plugin name is empty"));
  if (!factory) {
    return fail(Error::invalid(std::string(kind) + " plugin " + name + " has no factory"));
  }
  if (table.contains(name)) {
    return fail(Error::exists(std::string(kind) + " plugin " + name + " is already registered"));
  }
  table.emplace(std::move(name), std::move(factory));
  return {};
}

template <typename Plugin, typename Factory>
Result<std::unique_ptr<Plugin>> makeFrom(const std::map<std::string, Factory, std::less<>>& table,
                                         std::string_view kind, std::string_view name,
                                         const PluginArgs& args) {
  auto it = table.find(name);
  if (it == table.end()) {
    std::string known;
    for (const auto& [n, f] : table) known += (known.empty() ? "" : ", ") + n;
    return fail(Error::notFound("unknown " + std::string(kind) + " plugin '" + std::string(name) +
                                "' (known: " + (known.empty() ? "none" : known) + ")"));
  }
  auto plugin = it->second(args);
  if (!plugin) return fail(plugin.error());
  if (*plugin == nullptr) {
    return fail(Error::internal(std::string(kind) + " plugin " + std::string(name) +
                                ": factory returned nothing"));
  }
  return plugin;
}

template <typename Factory>
std::vector<std::string> namesOf(const std::map<std::string, Factory, std::less<>>& table) {
  std::vector<std::string> names;
  names.reserve(table.size());
  for (const auto& [name, factory] : table) names.push_back(name);
  return names;
}

// Registering a built-in can only fail if the built-ins are registered twice or two share a
// name: a programming error, not a runtime condition.
void mustSucceed(Result<void> r) {
  if (r) return;
  std::fprintf(stderr, "tessera: registering built-in plugins failed: %s\n",
               r.error().message.c_str());
  std::abort();
}

template <typename Plugin>
void addBuiltinFilter(PluginRegistry& registry) {
  mustSucceed(registry.addFilter(std::string(Plugin::kName), &Plugin::create));
}

template <typename Plugin>
void addBuiltinScore(PluginRegistry& registry) {
  mustSucceed(registry.addScore(std::string(Plugin::kName), &Plugin::create));
}

}  // namespace

Result<void> PluginRegistry::addFilter(std::string name, FilterFactory factory) {
  return addTo(filters_, "filter", std::move(name), std::move(factory));
}

Result<void> PluginRegistry::addScore(std::string name, ScoreFactory factory) {
  return addTo(scores_, "score", std::move(name), std::move(factory));
}

Result<std::unique_ptr<FilterPlugin>> PluginRegistry::makeFilter(std::string_view name,
                                                                 const PluginArgs& args) const {
  return makeFrom<FilterPlugin>(filters_, "filter", name, args);
}

Result<std::unique_ptr<ScorePlugin>> PluginRegistry::makeScore(std::string_view name,
                                                               const PluginArgs& args) const {
  return makeFrom<ScorePlugin>(scores_, "score", name, args);
}

std::vector<std::string> PluginRegistry::filterNames() const {
  return namesOf(filters_);
}
std::vector<std::string> PluginRegistry::scoreNames() const {
  return namesOf(scores_);
}

void registerBuiltinPlugins(PluginRegistry& registry) {
  addBuiltinFilter<NodeHealthFilter>(registry);
  addBuiltinFilter<TaintTolerationFilter>(registry);
  addBuiltinFilter<NodeSelectorFilter>(registry);
  addBuiltinFilter<NodeResourcesFilter>(registry);
  addBuiltinFilter<GpuTypeFilter>(registry);
  addBuiltinFilter<MemoryFitFilter>(registry);
  addBuiltinFilter<ComputeCapFilter>(registry);
  addBuiltinFilter<BandwidthFilter>(registry);
  addBuiltinFilter<MigSliceFilter>(registry);
  addBuiltinFilter<TimeSlicingFilter>(registry);
  addBuiltinFilter<GpuTopologyFilter>(registry);
  addBuiltinFilter<NumaAlignmentFilter>(registry);

  addBuiltinScore<BestFitScore>(registry);
  addBuiltinScore<SpreadScore>(registry);
  addBuiltinScore<ModelAffinityScore>(registry);
  addBuiltinScore<FragmentationScore>(registry);
  addBuiltinScore<NumaLocalityScore>(registry);
  addBuiltinScore<ReplicaAntiAffinityScore>(registry);
  addBuiltinScore<ComputeHeadroomScore>(registry);
}

void ScorePlugin::normalize(std::span<std::int64_t> scores) const {
  for (std::int64_t& s : scores) s = std::clamp<std::int64_t>(s, 0, 100);
}

void normalizeMinMax(std::span<std::int64_t> scores) {
  if (scores.empty()) return;
  const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
  const std::int64_t min = *lo;
  const std::int64_t max = *hi;
  if (min == max) {
    std::fill(scores.begin(), scores.end(), 100);
    return;
  }
  // 128-bit intermediates: raw scores may span the whole int64 range.
  const __int128 range = static_cast<__int128>(max) - min;
  for (std::int64_t& s : scores) {
    s = static_cast<std::int64_t>((static_cast<__int128>(s) - min) * 100 / range);
  }
}

}  // namespace tessera::sched
