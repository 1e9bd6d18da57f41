// loadServingModelFile / parseServingModelYaml: the served model of `tessera simulate serving
// --model FILE` (docs/serving-simulator.md, "Model file"). Keys not given keep the default
// model's values.

#include <tuple>

#include "sim/serving_model_yaml.h"

namespace tessera::sim {

Result<ServingModel> readServingModel(const config::Field& root, bool header) {
  using namespace tessera::config;
  std::vector<std::string_view> keys = {"name",        "weightsMib",       "weights",
                                        "overheadMib", "overhead",         "kvBytesPerToken",
                                        "parametersB", "layers",           "hiddenSize",
                                        "maxNumSeqs",  "maxBatchedTokens", "gpuMemoryUtilization"};
  if (header) {
    keys.push_back("apiVersion");
    keys.push_back("kind");
  }
  TESSERA_RETURN_IF_ERROR(expectMap(root, keys));
  if (header) TESSERA_RETURN_IF_ERROR(checkApiHeader(root, "ServingModel"));
  ServingModel m;
  const Field name = root.child("name");
  TESSERA_RETURN_IF_ERROR(require(name));
  auto nameText = readName(name);
  if (!nameText) return fail(std::move(nameText.error()));
  m.name = std::move(*nameText);
  constexpr std::int64_t kMaxMib = std::int64_t{16} * 1024 * 1024;  // 16 TiB
  for (auto [mibKey, quantityKey, out] : {std::tuple{"weightsMib", "weights", &m.weightsMib},
                                          std::tuple{"overheadMib", "overhead", &m.overheadMib}}) {
    auto v = readMemory(root, {.mibKey = mibKey,
                               .quantityKey = quantityKey,
                               .minMib = 0,
                               .maxMib = kMaxMib,
                               .capacity = false});
    if (!v) return fail(std::move(v.error()));
    if (*v) *out = **v;
  }
  if (m.weightsMib <= 0) return fail(root.child("weightsMib").error("must be > 0"));
  TESSERA_RETURN_IF_ERROR(
      readOptional(root, "kvBytesPerToken", m.kvBytesPerToken, 1, std::int64_t{1} << 30));
  TESSERA_RETURN_IF_ERROR(readOptional(root, "parametersB", m.parametersB, 0.001, 100000));
  TESSERA_RETURN_IF_ERROR(readOptional(root, "layers", m.layers, 1, 10000));
  TESSERA_RETURN_IF_ERROR(readOptional(root, "hiddenSize", m.hiddenSize, 1, 1 << 20));
  TESSERA_RETURN_IF_ERROR(readOptional(root, "maxNumSeqs", m.maxNumSeqs, 1, 1 << 20));
  TESSERA_RETURN_IF_ERROR(
      readOptional(root, "maxBatchedTokens", m.maxBatchedTokens, 1, std::int64_t{1} << 30));
  TESSERA_RETURN_IF_ERROR(
      readOptional(root, "gpuMemoryUtilization", m.gpuMemoryUtilization, 0.05, 1.0));
  return m;
}

Result<ServingModel> parseServingModelYaml(const std::string& text, const std::string& source) {
  using namespace tessera::config;
  auto document = parseYamlDocument(text, source);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(source, *document);
  if (root.isNull()) return fail(root.error("empty file; a serving model has at least a name"));
  return readServingModel(root, /*header=*/true);
}

Result<ServingModel> loadServingModelFile(const std::string& path) {
  auto text = config::readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseServingModelYaml(*text, path);
}

}  // namespace tessera::sim
