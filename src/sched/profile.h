#pragma once
// A placement profile: which plugins run, with which arguments and weights (the shape of a
// KubeSchedulerConfiguration profile), plus the engine-wide options.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "sched/plugin.h"
#include "sched/types.h"

namespace tessera::sched {

struct PluginSpec {
  std::string name;
  std::int64_t weight = 1;  // score plugins only
  PluginArgs args = PluginArgs::object();
};

struct Profile {
  std::string name = "default";
  EngineOptions options;
  std::vector<PluginSpec> filters;
  std::vector<PluginSpec> scores;
};

// The built-in default profile (docs/configuration.md explains each choice).
Profile defaultProfile();

// The plugins a profile names, built through a registry.
struct PluginSet {
  std::vector<std::unique_ptr<FilterPlugin>> filters;
  std::vector<std::unique_ptr<ScorePlugin>> scores;
  std::vector<std::int64_t> weights;  // parallel to scores
};
Result<PluginSet> buildPlugins(const Profile& profile, const PluginRegistry& registry);

}  // namespace tessera::sched
