// loadClusterFile / parseClusterYaml: the cluster inventory (docs/configuration.md, "Cluster
// file").

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "config/gpu_yaml.h"
#include "config/items.h"
#include "config/limits.h"
#include "config/loaders.h"
#include "config/model_yaml.h"
#include "config/yaml_field.h"

namespace tessera::config {
namespace {

constexpr std::string_view kClusterKind = "Cluster";

Result<model::Taint> parseTaint(const Field& field) {
  TESSERA_RETURN_IF_ERROR(expectMap(field, {"key", "value", "effect"}));
  model::Taint taint;
  TESSERA_RETURN_IF_ERROR(require(field.child("key")));
  TESSERA_RETURN_IF_ERROR(require(field.child("effect")));
  auto key = readName(field.child("key"));
  if (!key) return fail(std::move(key.error()));
  taint.key = std::move(*key);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "value", taint.value));
  auto effect = readName(field.child("effect"));
  if (!effect) return fail(std::move(effect.error()));
  if (*effect != "NoSchedule" && *effect != "PreferNoSchedule" && *effect != "NoExecute") {
    return fail(
        field.child("effect").error("must be NoSchedule, PreferNoSchedule or NoExecute, got " +
                                    field.child("effect").describe()));
  }
  taint.effect = std::move(*effect);
  return taint;
}

Result<model::NodeSpec> parseNode(const Field& field, const model::GpuCatalog& catalog) {
  TESSERA_RETURN_IF_ERROR(
      expectMap(field, {"name", "cpuMilli", "cpu", "hostMemoryMib", "hostMemory", "labels",
                        "taints", "healthy", "cordoned", "rank", "cachedModels", "gpus"}));
  model::NodeSpec node;
  TESSERA_RETURN_IF_ERROR(require(field.child("name")));
  auto name = readObjectName(field.child("name"), NameKind::kSubdomain);
  if (!name) return fail(std::move(name.error()));
  node.name = std::move(*name);

  auto cpu = readCpu(field, limits::kMaxCpuMilli);
  if (!cpu) return fail(std::move(cpu.error()));
  node.cpuMilli = cpu->value_or(0);
  auto memory = readMemory(field, {.mibKey = "hostMemoryMib",
                                   .quantityKey = "hostMemory",
                                   .minMib = 0,
                                   .maxMib = limits::kMaxHostMemoryMib,
                                   .capacity = true});
  if (!memory) return fail(std::move(memory.error()));
  node.hostMemoryMib = memory->value_or(0);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "labels", node.labels));
  const Field taints = field.child("taints");
  TESSERA_RETURN_IF_ERROR(expectSequence(taints));
  for (std::size_t i = 0; i < taints.size(); ++i) {
    auto taint = parseTaint(taints.item(i));
    if (!taint) return fail(std::move(taint.error()));
    node.taints.push_back(std::move(*taint));
  }
  TESSERA_RETURN_IF_ERROR(readOptional(field, "healthy", node.healthy));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "cordoned", node.cordoned));
  if (const Field rank = field.child("rank"); !rank.absent()) {
    auto value = readInt(rank, std::numeric_limits<std::int64_t>::min(),
                         std::numeric_limits<std::int64_t>::max());
    if (!value) return fail(std::move(value.error()));
    node.rank = *value;
  }
  TESSERA_RETURN_IF_ERROR(readOptional(field, "cachedModels", node.cachedModels));
  auto gpus = parseNodeGpus(field.child("gpus"), catalog);
  if (!gpus) return fail(std::move(gpus.error()));
  node.gpus = std::move(*gpus);
  return node;
}

Result<ExistingReplica> parseReplica(const Field& field, const std::vector<model::NodeSpec>& nodes,
                                     const std::vector<model::ModelProfile>& models) {
  TESSERA_RETURN_IF_ERROR(expectMap(
      field, {"replicaId", "node", "gpus", "model", "deployment", "loaded", "lastActiveSeconds"}));
  ExistingReplica replica;
  for (const char* key : {"replicaId", "node", "gpus", "model"}) {
    TESSERA_RETURN_IF_ERROR(require(field.child(key)));
  }
  auto id = readObjectName(field.child("replicaId"), NameKind::kObjectKey);
  if (!id) return fail(std::move(id.error()));
  replica.replicaId = std::move(*id);

  const Field nodeField = field.child("node");
  auto nodeName = readName(nodeField);
  if (!nodeName) return fail(std::move(nodeName.error()));
  const model::NodeSpec* node = nullptr;
  for (const model::NodeSpec& candidate : nodes) {
    if (candidate.name == *nodeName) node = &candidate;
  }
  if (node == nullptr) {
    std::vector<std::string> names;
    for (const model::NodeSpec& candidate : nodes) names.push_back(candidate.name);
    return fail(nodeField.error("unknown node \"" + *nodeName + "\"; nodes: " + joinNames(names)));
  }
  replica.node = node->name;

  const Field model = field.child("model");
  auto profile = resolveModel(model, {&models});
  if (!profile) return fail(std::move(profile.error()));
  replica.profile = std::move(*profile);
  replica.model = replica.profile.name;

  const Field gpus = field.child("gpus");
  auto ids = readStringList(gpus);
  if (!ids) return fail(std::move(ids.error()));
  std::set<std::string> seen;
  for (std::size_t i = 0; i < ids->size(); ++i) {
    const std::string& gpuId = (*ids)[i];
    const bool exists = std::any_of(node->gpus.begin(), node->gpus.end(),
                                    [&](const model::GpuSpec& gpu) { return gpu.id == gpuId; });
    if (!exists) {
      std::vector<std::string> known;
      for (const model::GpuSpec& gpu : node->gpus) known.push_back(gpu.id);
      return fail(gpus.item(i).error(
          "node " + node->name + " has no GPU \"" + gpuId +
          "\"; its GPUs: " + (known.empty() ? std::string("none") : joinNames(known))));
    }
    if (!seen.insert(gpuId).second) {
      return fail(gpus.item(i).error("GPU \"" + gpuId + "\" listed twice"));
    }
  }
  if (static_cast<int>(ids->size()) != replica.profile.gpusPerReplica) {
    return fail(gpus.error("lists " + std::to_string(ids->size()) + " GPUs but model " +
                           replica.profile.name + " has gpusPerReplica " +
                           std::to_string(replica.profile.gpusPerReplica)));
  }
  replica.gpus = std::move(*ids);

  replica.deployment = replica.profile.name;
  if (const Field deployment = field.child("deployment"); !deployment.absent()) {
    auto text = readObjectName(deployment, NameKind::kSubdomain);
    if (!text) return fail(std::move(text.error()));
    replica.deployment = std::move(*text);
  }
  TESSERA_RETURN_IF_ERROR(readOptional(field, "loaded", replica.loaded));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "lastActiveSeconds", replica.lastActiveSeconds, 0,
                                       std::numeric_limits<std::int64_t>::max()));
  return replica;
}

// Claims the uuids of `node`'s GPUs in `ownerByUuid` (uuid → "<node> GPU <id>"); a uuid
// claimed already is an error on the GPU's uuid field under `nodeField`.
Result<void> claimGpuUuids(const Field& nodeField, const model::NodeSpec& node,
                           std::map<std::string, std::string>& ownerByUuid) {
  for (std::size_t g = 0; g < node.gpus.size(); ++g) {
    const model::GpuSpec& gpu = node.gpus[g];
    if (gpu.uuid.empty()) continue;
    const std::string owner = node.name + " GPU " + gpu.id;
    if (const auto [it, inserted] = ownerByUuid.emplace(gpu.uuid, owner); !inserted) {
      const Field uuid = nodeField.child("gpus").item(g).child("uuid");
      return fail(uuid.error("uuid " + gpu.uuid + " is already used by " + it->second));
    }
  }
  return {};
}

Result<void> checkUniqueGpuUuids(const Field& nodesField,
                                 const std::vector<model::NodeSpec>& nodes) {
  std::map<std::string, std::string> ownerByUuid;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    TESSERA_RETURN_IF_ERROR(claimGpuUuids(nodesField.item(n), nodes[n], ownerByUuid));
  }
  return {};
}

}  // namespace

Result<model::NodeSpec> parseNodeEntry(const Field& field, const model::GpuCatalog& catalog) {
  auto node = parseNode(field, catalog);
  if (!node) return node;
  std::map<std::string, std::string> ownerByUuid;
  TESSERA_RETURN_IF_ERROR(claimGpuUuids(field, *node, ownerByUuid));
  return node;
}

Result<ClusterFile> parseClusterYaml(const std::string& text, const std::string& sourceName,
                                     model::GpuCatalog& catalog) {
  auto document = parseYamlDocument(text, sourceName);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(sourceName, *document);
  if (root.isNull()) {
    return fail(
        root.error("empty file; a cluster file has nodes (and optionally gpuTypes, "
                   "models, replicas)"));
  }
  // The kind first: a file given to the wrong flag is better told so than about its keys.
  TESSERA_RETURN_IF_ERROR(checkApiHeader(root, kClusterKind));
  TESSERA_RETURN_IF_ERROR(
      expectMap(root, {"apiVersion", "kind", "gpuTypes", "nodes", "models", "replicas"}));

  // Custom types go into a copy so that a failed load leaves the caller's catalogue as it was.
  model::GpuCatalog working = catalog;
  ClusterFile file;
  const Field gpuTypes = root.child("gpuTypes");
  TESSERA_RETURN_IF_ERROR(expectSequence(gpuTypes));
  for (std::size_t i = 0; i < gpuTypes.size(); ++i) {
    auto type = parseGpuType(gpuTypes.item(i));
    if (!type) return fail(std::move(type.error()));
    if (auto added = working.add(*type); !added) {
      return fail(gpuTypes.item(i).error(added.error().message));
    }
    file.customGpuTypes.push_back(std::move(*type));
  }

  auto models = parseModelList(root.child("models"));
  if (!models) return fail(std::move(models.error()));
  file.models = std::move(*models);

  const Field nodes = root.child("nodes");
  TESSERA_RETURN_IF_ERROR(require(nodes));
  TESSERA_RETURN_IF_ERROR(expectSequence(nodes));
  std::map<std::string, int> lineByNode;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto node = parseNode(nodes.item(i), working);
    if (!node) return fail(std::move(node.error()));
    const Field name = nodes.item(i).child("name");
    if (const auto [it, inserted] = lineByNode.emplace(node->name, name.line()); !inserted) {
      return fail(name.error("duplicate node \"" + node->name + "\" (first on line " +
                             std::to_string(it->second) + ")"));
    }
    file.nodes.push_back(std::move(*node));
  }
  TESSERA_RETURN_IF_ERROR(checkUniqueGpuUuids(nodes, file.nodes));

  const Field replicas = root.child("replicas");
  TESSERA_RETURN_IF_ERROR(expectSequence(replicas));
  std::map<std::string, int> lineByReplica;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    auto replica = parseReplica(replicas.item(i), file.nodes, file.models);
    if (!replica) return fail(std::move(replica.error()));
    const Field id = replicas.item(i).child("replicaId");
    if (const auto [it, inserted] = lineByReplica.emplace(replica->replicaId, id.line());
        !inserted) {
      return fail(id.error("duplicate replica \"" + replica->replicaId + "\" (first on line " +
                           std::to_string(it->second) + ")"));
    }
    file.replicas.push_back(std::move(*replica));
  }

  catalog = std::move(working);
  return file;
}

Result<ClusterFile> loadClusterFile(const std::string& path, model::GpuCatalog& catalog) {
  auto text = readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseClusterYaml(*text, path, catalog);
}

}  // namespace tessera::config
