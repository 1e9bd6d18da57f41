#include <gtest/gtest.h>

#include "config/loaders.h"

namespace tessera::config {
namespace {

sched::Profile parseProfileOk(const std::string& yaml) {
  auto profile = parseProfileYaml(yaml, "profile.yaml");
  EXPECT_TRUE(profile) << profile.error().message;
  return profile.value_or(sched::Profile{});
}

std::string profileErrorOf(const std::string& yaml) {
  auto profile = parseProfileYaml(yaml, "profile.yaml");
  EXPECT_FALSE(profile) << "expected an error";
  return profile ? std::string() : profile.error().message;
}

TEST(ProfileFile, ReadsOptionsPluginsWeightsAndArgs) {
  const sched::Profile profile = parseProfileOk(R"(apiVersion: tessera.io/v1alpha1
kind: PlacementProfile
name: packed
memorySafetyFactor: 1.5
reservationTtlSeconds: 2.5
gpuTieBreak: index
plugins:
  filter:
    - name: MemoryFit
    - name: ComputeCap
      args: {cap: 0.8, mode: soft}
  score:
    - {name: BestFit, weight: 2}
    - name: Fragmentation
      weight: 0
      args:
        workload:
          - {memoryMib: 20480, gpus: 1, weight: 3}
          - {memoryMib: 81920, gpus: 4}
    - name: ModelAffinity
)");
  EXPECT_EQ(profile.name, "packed");
  EXPECT_DOUBLE_EQ(profile.options.memorySafetyFactor, 1.5);
  EXPECT_EQ(profile.options.reservationTtlMs, 2500);
  EXPECT_EQ(profile.options.gpuTieBreak, sched::GpuTieBreak::kIndex);
  ASSERT_EQ(profile.filters.size(), 2u);
  EXPECT_EQ(profile.filters[0].name, "MemoryFit");
  EXPECT_EQ(profile.filters[0].args, nlohmann::json::object());
  EXPECT_EQ(profile.filters[1].args, nlohmann::json::parse(R"({"cap": 0.8, "mode": "soft"})"));
  ASSERT_EQ(profile.scores.size(), 3u);
  EXPECT_EQ(profile.scores[0].weight, 2);
  EXPECT_EQ(profile.scores[1].weight, 0);
  EXPECT_EQ(profile.scores[1].args, nlohmann::json::parse(R"({"workload": [
      {"memoryMib": 20480, "gpus": 1, "weight": 3}, {"memoryMib": 81920, "gpus": 4}]})"));
  EXPECT_EQ(profile.scores[2].weight, 1);  // the default weight
}

TEST(ProfileFile, WhatIsLeftOutKeepsTheDefaults) {
  const sched::Profile defaults = sched::defaultProfile();
  const sched::Profile onlyName = parseProfileOk("name: mine\n");
  EXPECT_EQ(onlyName.name, "mine");
  EXPECT_DOUBLE_EQ(onlyName.options.memorySafetyFactor, defaults.options.memorySafetyFactor);
  EXPECT_EQ(onlyName.options.reservationTtlMs, defaults.options.reservationTtlMs);
  EXPECT_EQ(onlyName.filters.size(), defaults.filters.size());
  EXPECT_EQ(onlyName.scores.size(), defaults.scores.size());

  // A list that is given replaces the default list; the other list stays.
  const sched::Profile scoresOnly = parseProfileOk("plugins:\n  score: [{name: BestFit}]\n");
  EXPECT_EQ(scoresOnly.name, "default");
  EXPECT_EQ(scoresOnly.filters.size(), defaults.filters.size());
  ASSERT_EQ(scoresOnly.scores.size(), 1u);
  EXPECT_EQ(scoresOnly.scores[0].name, "BestFit");
  EXPECT_TRUE(parseProfileOk("plugins:\n  filter: []\n").filters.empty());
}

TEST(ProfileFile, PluginNamesAreLeftToTheRegistry) {
  // buildPlugins reports unknown names with the registry's list; the loader only reads shape.
  EXPECT_EQ(parseProfileOk("plugins:\n  filter: [{name: NoSuchPlugin}]\n").filters[0].name,
            "NoSuchPlugin");
}

struct ProfileBadInput {
  std::string name;
  std::string yaml;
  std::string error;
};

void PrintTo(const ProfileBadInput& input, std::ostream* os) {
  *os << input.name;
}

class ProfileFileErrors : public testing::TestWithParam<ProfileBadInput> {};

TEST_P(ProfileFileErrors, NameFileLineAndField) {
  EXPECT_EQ(profileErrorOf(GetParam().yaml), GetParam().error);
}

const ProfileBadInput kProfileErrors[] = {
    {"EmptyFile", "", "profile.yaml:1: empty file; a profile has at least a name or plugins"},
    {"ApiVersion", "apiVersion: kubescheduler.config.k8s.io/v1\nname: x\n",
     "profile.yaml:1: apiVersion: must be tessera.io/v1alpha1, got "
     "kubescheduler.config.k8s.io/v1"},
    {"Kind", "kind: KubeSchedulerConfiguration\n",
     "profile.yaml:1: kind: must be PlacementProfile, got KubeSchedulerConfiguration (is this the "
     "right file?)"},
    {"UnknownKey", "name: x\nsafetyFactor: 1.2\n",
     "profile.yaml:2: safetyFactor: unknown key; allowed: apiVersion, kind, name, "
     "memorySafetyFactor, reservationTtlSeconds, gpuTieBreak, plugins"},
    {"SafetyFactorBelowOne", "memorySafetyFactor: 0.9\n",
     "profile.yaml:1: memorySafetyFactor: must be >= 1, got 0.9"},
    {"SafetyFactorAbsurd", "memorySafetyFactor: 12\n",
     "profile.yaml:1: memorySafetyFactor: must be <= 10, got 12"},
    {"SafetyFactorText", "memorySafetyFactor: high\n",
     "profile.yaml:1: memorySafetyFactor: must be a number, got high"},
    {"TtlZero", "reservationTtlSeconds: 0\n",
     "profile.yaml:1: reservationTtlSeconds: must be at least 0.001, got 0"},
    {"TtlNegative", "reservationTtlSeconds: -1\n",
     "profile.yaml:1: reservationTtlSeconds: must be >= 0, got -1"},
    {"TtlAbsurd", "reservationTtlSeconds: 100000\n",
     "profile.yaml:1: reservationTtlSeconds: must be <= 86400, got 100000"},
    {"TieBreak", "gpuTieBreak: best-fit\n",
     "profile.yaml:1: gpuTieBreak: must be bestFit or index, got best-fit"},
    {"PluginsKey", "plugins:\n  scores: []\n",
     "profile.yaml:2: plugins.scores: unknown key (did you mean \"score\"?); allowed: filter, "
     "score"},
    {"PluginListNotAList", "plugins:\n  filter: {name: MemoryFit}\n",
     "profile.yaml:2: plugins.filter: must be a list, got a mapping"},
    {"PluginWithoutName", "plugins:\n  filter:\n    - args: {}\n",
     "profile.yaml:3: plugins.filter[0].name: required"},
    {"WeightOnAFilter", "plugins:\n  filter:\n    - name: MemoryFit\n      weight: 2\n",
     "profile.yaml:4: plugins.filter[0].weight: unknown key; allowed: name, args"},
    {"NegativeWeight", "plugins:\n  score:\n    - name: BestFit\n      weight: -1\n",
     "profile.yaml:4: plugins.score[0].weight: must be >= 0, got -1"},
    {"WeightAbsurd", "plugins:\n  score:\n    - {name: BestFit, weight: 5000}\n",
     "profile.yaml:3: plugins.score[0].weight: must be <= 1000, got 5000"},
    {"FractionalWeight", "plugins:\n  score:\n    - {name: BestFit, weight: 1.5}\n",
     "profile.yaml:3: plugins.score[0].weight: must be an integer, got 1.5"},
    {"DuplicatePlugin", "plugins:\n  score:\n    - name: BestFit\n    - name: BestFit\n",
     "profile.yaml:4: plugins.score[1].name: plugin BestFit is listed twice (first on line 3)"},
    {"ArgsNotAMapping", "plugins:\n  filter:\n    - name: ComputeCap\n      args: [0.8]\n",
     "profile.yaml:4: plugins.filter[0].args: must be a mapping, got a list"},
    {"ArgsDuplicateKey",
     "plugins:\n  filter:\n    - name: ComputeCap\n      args:\n        cap: 0.8\n        cap: "
     "0.9\n",
     "profile.yaml:6: plugins.filter[0].args.cap: duplicate key"},
};

INSTANTIATE_TEST_SUITE_P(BadInputs, ProfileFileErrors, testing::ValuesIn(kProfileErrors),
                         [](const testing::TestParamInfo<ProfileBadInput>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace tessera::config
