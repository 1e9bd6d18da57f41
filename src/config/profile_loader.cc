// loadProfileFile / parseProfileYaml: a placement profile (docs/configuration.md, "Profile
// file").

#include <cmath>
#include <map>
#include <string>

#include "config/limits.h"
#include "config/loaders.h"
#include "config/yaml_field.h"
#include "config/yaml_json.h"

namespace tessera::config {
namespace {

constexpr std::string_view kProfileKind = "PlacementProfile";

Result<std::vector<sched::PluginSpec>> parsePluginList(const Field& field, bool scored) {
  TESSERA_RETURN_IF_ERROR(expectSequence(field));
  std::vector<sched::PluginSpec> plugins;
  std::map<std::string, int> lineByName;
  for (std::size_t i = 0; i < field.size(); ++i) {
    const Field item = field.item(i);
    if (scored) {
      TESSERA_RETURN_IF_ERROR(expectMap(item, {"name", "weight", "args"}));
    } else {
      // A weight on a filter would be silently meaningless, so it is an unknown key here.
      TESSERA_RETURN_IF_ERROR(expectMap(item, {"name", "args"}));
    }
    sched::PluginSpec spec;
    const Field name = item.child("name");
    TESSERA_RETURN_IF_ERROR(require(name));
    auto text = readName(name);
    if (!text) return fail(std::move(text.error()));
    spec.name = std::move(*text);
    if (const auto [it, inserted] = lineByName.emplace(spec.name, name.line()); !inserted) {
      return fail(name.error("plugin " + spec.name + " is listed twice (first on line " +
                             std::to_string(it->second) + ")"));
    }
    TESSERA_RETURN_IF_ERROR(readOptional(item, "weight", spec.weight, 0, limits::kMaxPluginWeight));
    const Field args = item.child("args");
    if (!args.isNull()) {
      if (!args.isMap()) return fail(args.error("must be a mapping, got " + args.describe()));
      auto json = yamlToJson(args);
      if (!json) return fail(std::move(json.error()));
      spec.args = std::move(*json);
    }
    plugins.push_back(std::move(spec));
  }
  return plugins;
}

}  // namespace

Result<sched::Profile> parseProfileYaml(const std::string& text, const std::string& sourceName) {
  auto document = parseYamlDocument(text, sourceName);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(sourceName, *document);
  if (root.isNull()) {
    return fail(root.error("empty file; a profile has at least a name or plugins"));
  }
  // The kind first: a file given to the wrong flag is better told so than about its keys.
  TESSERA_RETURN_IF_ERROR(checkApiHeader(root, kProfileKind));
  TESSERA_RETURN_IF_ERROR(expectMap(root, {"apiVersion", "kind", "name", "memorySafetyFactor",
                                           "reservationTtlSeconds", "gpuTieBreak", "plugins"}));

  // Whatever the file leaves out keeps the built-in default, list by list.
  sched::Profile profile = sched::defaultProfile();
  if (const Field name = root.child("name"); !name.absent()) {
    auto value = readName(name);
    if (!value) return fail(std::move(value.error()));
    profile.name = std::move(*value);
  }
  TESSERA_RETURN_IF_ERROR(readOptional(root, "memorySafetyFactor",
                                       profile.options.memorySafetyFactor, limits::kMinSafetyFactor,
                                       limits::kMaxSafetyFactor));
  if (const Field ttl = root.child("reservationTtlSeconds"); !ttl.absent()) {
    auto seconds = readNumber(ttl, 0, limits::kMaxReservationTtlSeconds);
    if (!seconds) return fail(std::move(seconds.error()));
    const Millis ms = std::llround(*seconds * 1000.0);
    if (ms <= 0) return fail(ttl.error("must be at least 0.001, got " + ttl.describe()));
    profile.options.reservationTtlMs = ms;
  }
  if (const Field tieBreak = root.child("gpuTieBreak"); !tieBreak.absent()) {
    auto value = readName(tieBreak);
    if (!value) return fail(std::move(value.error()));
    if (*value == "bestFit") {
      profile.options.gpuTieBreak = sched::GpuTieBreak::kBestFit;
    } else if (*value == "index") {
      profile.options.gpuTieBreak = sched::GpuTieBreak::kIndex;
    } else {
      return fail(tieBreak.error("must be bestFit or index, got " + tieBreak.describe()));
    }
  }

  const Field plugins = root.child("plugins");
  if (!plugins.isNull()) {
    TESSERA_RETURN_IF_ERROR(expectMap(plugins, {"filter", "score"}));
    if (const Field filter = plugins.child("filter"); !filter.absent()) {
      auto list = parsePluginList(filter, false);
      if (!list) return fail(std::move(list.error()));
      profile.filters = std::move(*list);
    }
    if (const Field score = plugins.child("score"); !score.absent()) {
      auto list = parsePluginList(score, true);
      if (!list) return fail(std::move(list.error()));
      profile.scores = std::move(*list);
    }
  }
  return profile;
}

Result<sched::Profile> loadProfileFile(const std::string& path) {
  auto text = readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseProfileYaml(*text, path);
}

}  // namespace tessera::config
