#include "config/serve_config.h"

#include "config/yaml_field.h"

namespace tessera::config {
namespace {

constexpr std::string_view kServerConfigKind = "ServerConfig";

Result<void> optionalText(const Field& parent, std::string_view key,
                          std::optional<std::string>& out) {
  const Field f = parent.child(key);
  if (f.absent()) return {};
  auto v = readName(f);
  if (!v) return fail(std::move(v.error()));
  out = std::move(*v);
  return {};
}

}  // namespace

Result<ServeFile> parseServeYaml(const std::string& text, const std::string& sourceName) {
  auto document = parseYamlDocument(text, sourceName);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(sourceName, *document);
  ServeFile out;
  if (root.isNull()) return out;
  TESSERA_RETURN_IF_ERROR(checkApiHeader(root, kServerConfigKind));
  TESSERA_RETURN_IF_ERROR(
      expectMap(root, {"apiVersion", "kind", "listen", "store", "tokenFile", "insecureNoAuth",
                       "cluster", "profile", "tls", "maxBodyBytes", "threads", "logFormat",
                       "kubernetes"}));
  for (const auto& [key, slot] : {std::pair{"listen", &out.listen},
                                  {"store", &out.store},
                                  {"tokenFile", &out.tokenFile},
                                  {"cluster", &out.cluster},
                                  {"profile", &out.profile},
                                  {"logFormat", &out.logFormat}}) {
    TESSERA_RETURN_IF_ERROR(optionalText(root, key, *slot));
  }
  if (out.logFormat && *out.logFormat != "text" && *out.logFormat != "json") {
    return fail(
        root.child("logFormat").error("must be text or json, got \"" + *out.logFormat + "\""));
  }
  if (const Field f = root.child("insecureNoAuth"); !f.absent()) {
    auto v = readBool(f);
    if (!v) return fail(std::move(v.error()));
    out.insecureNoAuth = *v;
  }
  if (const Field f = root.child("maxBodyBytes"); !f.absent()) {
    auto v = readInt(f, 1024, std::int64_t{1} << 30);
    if (!v) return fail(std::move(v.error()));
    out.maxBodyBytes = *v;
  }
  if (const Field f = root.child("threads"); !f.absent()) {
    auto v = readInt(f, 1, 256);
    if (!v) return fail(std::move(v.error()));
    out.threads = *v;
  }
  if (const Field tls = root.child("tls"); !tls.isNull()) {
    TESSERA_RETURN_IF_ERROR(expectMap(tls, {"cert", "key"}));
    TESSERA_RETURN_IF_ERROR(optionalText(tls, "cert", out.tlsCert));
    TESSERA_RETURN_IF_ERROR(optionalText(tls, "key", out.tlsKey));
    if (out.tlsCert.has_value() != out.tlsKey.has_value()) {
      return fail(tls.error("needs both cert and key"));
    }
  }
  if (const Field kube = root.child("kubernetes"); !kube.isNull()) {
    TESSERA_RETURN_IF_ERROR(expectMap(kube, {"apiServer", "tokenFile", "caFile", "gpuMode"}));
    TESSERA_RETURN_IF_ERROR(optionalText(kube, "apiServer", out.kubeApiServer));
    TESSERA_RETURN_IF_ERROR(optionalText(kube, "tokenFile", out.kubeTokenFile));
    TESSERA_RETURN_IF_ERROR(optionalText(kube, "caFile", out.kubeCaFile));
    TESSERA_RETURN_IF_ERROR(optionalText(kube, "gpuMode", out.gpuMode));
    if (out.gpuMode && *out.gpuMode != "device-plugin" && *out.gpuMode != "dra") {
      return fail(kube.child("gpuMode").error("must be device-plugin or dra, got \"" +
                                              *out.gpuMode + "\""));
    }
  }
  return out;
}

Result<ServeFile> loadServeFile(const std::string& path) {
  auto text = readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseServeYaml(*text, path);
}

}  // namespace tessera::config
