#pragma once
// Loading the YAML files a user writes: cluster inventory, placement requests and
// placement profiles. Every error names the file, the line and the field (for example
// "cluster.yaml:14: nodes[2].gpus[0].memoryMib: must be > 0, got -5").
// Schemas: docs/configuration.md.

#include <string>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "model/inventory.h"
#include "model/workload.h"
#include "sched/profile.h"
#include "sched/types.h"

namespace tessera::config {

// A replica that already runs in the cluster (declared in the cluster file).
struct ExistingReplica {
  std::string replicaId;
  std::string node;
  std::vector<std::string> gpus;  // GPU ids on that node
  std::string model;              // name of a model in the file's `models`, or inline
  model::ModelProfile profile;    // resolved
  std::string deployment;
  bool loaded = true;
  std::int64_t lastActiveSeconds = 0;  // for LRU eviction order; larger = more recent
};

struct ClusterFile {
  std::vector<model::GpuType> customGpuTypes;  // already added to the catalogue passed in
  std::vector<model::NodeSpec> nodes;
  std::vector<model::ModelProfile> models;  // reusable profiles referenced by name
  std::vector<ExistingReplica> replicas;
};

struct RequestsFile {
  std::vector<model::ModelProfile> models;
  std::vector<model::PlacementRequest> requests;  // `count: N` expanded to N requests
};

// `catalog` receives the file's custom GPU types; node GPU types are checked against it.
Result<ClusterFile> loadClusterFile(const std::string& path, model::GpuCatalog& catalog);
Result<ClusterFile> parseClusterYaml(const std::string& text, const std::string& sourceName,
                                     model::GpuCatalog& catalog);

// `known` models (e.g. from the cluster file) may be referenced by name. With a `catalog`,
// every name under gpuTypes must be a type or alias in it.
Result<RequestsFile> loadRequestsFile(const std::string& path,
                                      const std::vector<model::ModelProfile>& known,
                                      const model::GpuCatalog* catalog = nullptr);
Result<RequestsFile> parseRequestsYaml(const std::string& text, const std::string& sourceName,
                                       const std::vector<model::ModelProfile>& known,
                                       const model::GpuCatalog* catalog = nullptr);

// Unknown plugin names are caught later by sched::buildPlugins; this checks shape and types.
Result<sched::Profile> loadProfileFile(const std::string& path);
Result<sched::Profile> parseProfileYaml(const std::string& text, const std::string& sourceName);

}  // namespace tessera::config
