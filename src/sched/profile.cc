#include "sched/profile.h"

namespace tessera::sched {

Profile defaultProfile() {
  Profile p;
  p.name = "default";
  // Cheap node checks first, then per-GPU checks, then topology of the whole option.
  for (const char* name : {"NodeHealth", "NodeSelector", "TaintToleration", "NodeResources",
                           "GpuType", "MemoryFit", "ComputeCap", "Bandwidth", "MigSlice",
                           "TimeSlicing", "GpuTopology", "NumaAlignment"}) {
    p.filters.push_back({name, 1, PluginArgs::object()});
  }
  // Weights: replicas of one deployment spread over nodes and GPUs first. ReplicaAntiAffinity
  // scores 100 only on the options with the fewest of the deployment's replicas, and its 10
  // outweighs every other weight together (9), so a deployment's replicas never stack on one
  // card while another is free, and a failure takes as few as possible. Between options alike
  // in that, reuse of weights another deployment holds, or the node cache, saves a load of
  // seconds to minutes; packing (best fit) and fragmentation keep large holes for large
  // models; the rest break ties between otherwise equal choices.
  p.scores = {
      {"ReplicaAntiAffinity", 10, PluginArgs::object()},
      {"ModelAffinity", 3, PluginArgs::object()},
      {"BestFit", 2, PluginArgs::object()},
      {"Fragmentation", 2, PluginArgs::object()},
      {"ComputeHeadroom", 1, PluginArgs::object()},
      {"NumaLocality", 1, PluginArgs::object()},
  };
  return p;
}

Result<PluginSet> buildPlugins(const Profile& profile, const PluginRegistry& registry) {
  PluginSet set;
  for (const auto& spec : profile.filters) {
    auto plugin = registry.makeFilter(spec.name, spec.args);
    if (!plugin) {
      return fail(Error::invalid("profile " + profile.name + ": filter " + spec.name + ": " +
                                 plugin.error().message));
    }
    set.filters.push_back(std::move(*plugin));
  }
  for (const auto& spec : profile.scores) {
    if (spec.weight < 0) {
      return fail(Error::invalid("profile " + profile.name + ": score " + spec.name +
                                 ": weight must be >= 0"));
    }
    auto plugin = registry.makeScore(spec.name, spec.args);
    if (!plugin) {
      return fail(Error::invalid("profile " + profile.name + ": score " + spec.name + ": " +
                                 plugin.error().message));
    }
    set.scores.push_back(std::move(*plugin));
    set.weights.push_back(spec.weight);
  }
  return set;
}

}  // namespace tessera::sched
