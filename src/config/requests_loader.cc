// loadRequestsFile / parseRequestsYaml: replicas to place (docs/configuration.md, "Requests
// file").

#include <map>
#include <string>

#include "config/items.h"
#include "config/limits.h"
#include "config/loaders.h"
#include "config/model_yaml.h"
#include "config/yaml_field.h"

namespace tessera::config {
namespace {

constexpr std::string_view kRequestsKind = "PlacementRequests";

Result<model::Toleration> parseToleration(const Field& field) {
  TESSERA_RETURN_IF_ERROR(expectMap(field, {"key", "operator", "value", "effect"}));
  model::Toleration toleration;
  TESSERA_RETURN_IF_ERROR(readOptional(field, "key", toleration.key));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "operator", toleration.op));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "value", toleration.value));
  TESSERA_RETURN_IF_ERROR(readOptional(field, "effect", toleration.effect));
  const Field op = field.child("operator");
  if (toleration.op != "Equal" && toleration.op != "Exists") {
    return fail(op.error("must be Equal or Exists, got " + op.describe()));
  }
  // The same rules as Kubernetes: Exists matches on the key alone, and only Exists may
  // leave the key out (tolerating every taint).
  if (toleration.op == "Exists" && !toleration.value.empty()) {
    return fail(field.child("value").error("must be empty when operator is Exists"));
  }
  if (toleration.key.empty() && toleration.op != "Exists") {
    return fail(field.error("key is required unless operator is Exists"));
  }
  const std::string& effect = toleration.effect;
  if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
      effect != "NoExecute") {
    return fail(field.child("effect").error(
        "must be NoSchedule, PreferNoSchedule, NoExecute or left out (every effect), got " +
        field.child("effect").describe()));
  }
  return toleration;
}

}  // namespace

// One `requests:` entry, expanded to `count` requests when written with `name`.
Result<std::vector<model::PlacementRequest>> parseRequestEntry(
    const Field& field, const std::vector<const std::vector<model::ModelProfile>*>& scopes,
    const model::GpuCatalog* catalog) {
  TESSERA_RETURN_IF_ERROR(expectMap(field, {"replicaId", "name", "count", "model", "gpuTypes",
                                            "nodeSelector", "tolerations", "deployment"}));
  const Field replicaId = field.child("replicaId");
  const Field name = field.child("name");
  const Field count = field.child("count");
  if (!replicaId.absent() && !name.absent()) {
    return fail(name.error("give either replicaId (one replica) or name (with count), not both"));
  }
  if (replicaId.absent() && name.absent()) {
    return fail(
        field.error("needs replicaId (one replica) or name (replicas name-0, name-1, ...)"));
  }
  if (!count.absent() && name.absent()) {
    return fail(count.error("needs name (replicas are called name-0, name-1, ...), not replicaId"));
  }

  model::PlacementRequest request;
  auto profile = resolveModel(field.child("model"), scopes);
  if (!profile) return fail(std::move(profile.error()));
  request.model = std::move(*profile);
  TESSERA_RETURN_IF_ERROR(readOptional(field, "gpuTypes", request.gpuTypes));
  if (catalog != nullptr) {
    // A misspelt type would otherwise only be "rejected by GpuType" on every GPU.
    for (std::size_t i = 0; i < request.gpuTypes.size(); ++i) {
      const std::vector<std::string> one{request.gpuTypes[i]};
      if (auto known = catalog->checkKnown(one, "gpuTypes"); !known) {
        const std::string& message = known.error().message;
        return fail(field.child("gpuTypes").item(i).error(message.substr(message.find(':') + 2)));
      }
    }
  }
  TESSERA_RETURN_IF_ERROR(readOptional(field, "nodeSelector", request.nodeSelector));
  const Field tolerations = field.child("tolerations");
  TESSERA_RETURN_IF_ERROR(expectSequence(tolerations));
  for (std::size_t i = 0; i < tolerations.size(); ++i) {
    auto toleration = parseToleration(tolerations.item(i));
    if (!toleration) return fail(std::move(toleration.error()));
    request.tolerations.push_back(std::move(*toleration));
  }
  request.deployment = request.model.name;
  if (const Field deployment = field.child("deployment"); !deployment.absent()) {
    auto text = readObjectName(deployment, NameKind::kSubdomain);
    if (!text) return fail(std::move(text.error()));
    request.deployment = std::move(*text);
  }

  std::vector<model::PlacementRequest> requests;
  if (!replicaId.absent()) {
    auto id = readObjectName(replicaId, NameKind::kObjectKey);
    if (!id) return fail(std::move(id.error()));
    request.replicaId = std::move(*id);
    requests.push_back(std::move(request));
    return requests;
  }
  // Room for "-<index>" within a subdomain's 253 characters.
  auto base = readObjectName(name, NameKind::kSubdomain, 240);
  if (!base) return fail(std::move(base.error()));
  std::int64_t n = 1;
  TESSERA_RETURN_IF_ERROR(readOptional(field, "count", n, 1, limits::kMaxRequestCount));
  for (std::int64_t i = 0; i < n; ++i) {
    model::PlacementRequest copy = request;
    copy.replicaId = *base + "-" + std::to_string(i);
    requests.push_back(std::move(copy));
  }
  return requests;
}

Result<RequestsFile> parseRequestsYaml(const std::string& text, const std::string& sourceName,
                                       const std::vector<model::ModelProfile>& known,
                                       const model::GpuCatalog* catalog) {
  auto document = parseYamlDocument(text, sourceName);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(sourceName, *document);
  if (root.isNull()) {
    return fail(root.error("empty file; a requests file has requests (and optionally models)"));
  }
  // The kind first: a file given to the wrong flag is better told so than about its keys.
  TESSERA_RETURN_IF_ERROR(checkApiHeader(root, kRequestsKind));
  TESSERA_RETURN_IF_ERROR(expectMap(root, {"apiVersion", "kind", "models", "requests"}));

  RequestsFile file;
  auto models = parseModelList(root.child("models"));
  if (!models) return fail(std::move(models.error()));
  file.models = std::move(*models);
  // The file's own models shadow same-named ones from the cluster file.
  const std::vector<const std::vector<model::ModelProfile>*> scopes = {&file.models, &known};

  const Field requests = root.child("requests");
  TESSERA_RETURN_IF_ERROR(require(requests));
  TESSERA_RETURN_IF_ERROR(expectSequence(requests));
  std::map<std::string, std::size_t> entryById;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Field item = requests.item(i);
    auto expanded = parseRequestEntry(item, scopes, catalog);
    if (!expanded) return fail(std::move(expanded.error()));
    for (model::PlacementRequest& request : *expanded) {
      if (const auto [it, inserted] = entryById.emplace(request.replicaId, i); !inserted) {
        const Field other = requests.item(it->second);
        return fail(item.error("replica id \"" + request.replicaId + "\" is already used by " +
                               other.path() + " (line " + std::to_string(other.line()) + ")"));
      }
      file.requests.push_back(std::move(request));
    }
  }
  return file;
}

Result<RequestsFile> loadRequestsFile(const std::string& path,
                                      const std::vector<model::ModelProfile>& known,
                                      const model::GpuCatalog* catalog) {
  auto text = readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseRequestsYaml(*text, path, known, catalog);
}

}  // namespace tessera::config
