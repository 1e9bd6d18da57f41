#include <gtest/gtest.h>

#include "config/loaders.h"

namespace tessera::config {
namespace {

// What the cluster file declared; requests may reference these by name.
std::vector<model::ModelProfile> clusterModels() {
  model::ModelProfile big;
  big.name = "big";
  big.weightsMib = 100'000;
  big.gpusPerReplica = 2;
  model::ModelProfile small;
  small.name = "small";
  small.weightsMib = 10'000;
  return {big, small};
}

RequestsFile parseRequestsOk(const std::string& yaml) {
  auto file = parseRequestsYaml(yaml, "requests.yaml", clusterModels());
  EXPECT_TRUE(file) << file.error().message;
  return file.value_or(RequestsFile{});
}

std::string requestsErrorOf(const std::string& yaml) {
  auto file = parseRequestsYaml(yaml, "requests.yaml", clusterModels());
  EXPECT_FALSE(file) << "expected an error";
  return file ? std::string() : file.error().message;
}

TEST(RequestsFile, ReadsEveryRequestField) {
  const RequestsFile file = parseRequestsOk(R"(requests:
  - replicaId: r1
    model: big
    gpuTypes: [H100-80GB, A100-80GB]
    nodeSelector: {zone: a}
    tolerations:
      - {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}
      - {operator: Exists}
    deployment: big-prod
)");
  ASSERT_EQ(file.requests.size(), 1u);
  const model::PlacementRequest& r = file.requests[0];
  EXPECT_EQ(r.replicaId, "r1");
  EXPECT_EQ(r.model.name, "big");
  EXPECT_EQ(r.model.gpusPerReplica, 2);
  EXPECT_EQ(r.gpuTypes, (std::vector<std::string>{"H100-80GB", "A100-80GB"}));
  EXPECT_EQ(r.nodeSelector.at("zone"), "a");
  ASSERT_EQ(r.tolerations.size(), 2u);
  EXPECT_EQ(r.tolerations[0].key, "dedicated");
  EXPECT_EQ(r.tolerations[0].op, "Equal");
  EXPECT_EQ(r.tolerations[0].value, "batch");
  EXPECT_EQ(r.tolerations[0].effect, "NoSchedule");
  EXPECT_EQ(r.tolerations[1].key, "");
  EXPECT_EQ(r.tolerations[1].op, "Exists");
  EXPECT_EQ(r.deployment, "big-prod");
}

TEST(RequestsFile, CountExpandsToNumberedReplicas) {
  const RequestsFile file = parseRequestsOk(R"(requests:
  - {name: chat, count: 3, model: small}
  - {name: solo, model: small, deployment: d}
)");
  ASSERT_EQ(file.requests.size(), 4u);
  EXPECT_EQ(file.requests[0].replicaId, "chat-0");
  EXPECT_EQ(file.requests[1].replicaId, "chat-1");
  EXPECT_EQ(file.requests[2].replicaId, "chat-2");
  EXPECT_EQ(file.requests[2].deployment, "small");  // defaults to the model's name
  EXPECT_EQ(file.requests[3].replicaId, "solo-0");
  EXPECT_EQ(file.requests[3].deployment, "d");
}

TEST(RequestsFile, OwnModelsShadowTheClusterFilesAndInlineProfilesWork) {
  const RequestsFile file = parseRequestsOk(R"(models:
  - {name: small, weights: 20Gi}
requests:
  - {replicaId: a, model: small}
  - {replicaId: b, model: big}
  - replicaId: c
    model: {name: inline, weightsMib: 5, sharing: [mig], migProfile: 1g.10gb}
)");
  ASSERT_EQ(file.models.size(), 1u);
  EXPECT_EQ(file.requests[0].model.weightsMib, 20 * 1024);
  EXPECT_EQ(file.requests[1].model.weightsMib, 100'000);
  EXPECT_EQ(file.requests[2].model.name, "inline");
  EXPECT_EQ(file.requests[2].model.migProfile, "1g.10gb");
  EXPECT_EQ(file.requests[2].model.sharing,
            static_cast<model::SharingModes>(model::SharingMode::kMig));
}

TEST(RequestsFile, AnEmptyRequestListIsAllowed) {
  EXPECT_TRUE(parseRequestsOk("requests: []\n").requests.empty());
}

struct RequestsBadInput {
  std::string name;
  std::string yaml;
  std::string error;
};

void PrintTo(const RequestsBadInput& input, std::ostream* os) {
  *os << input.name;
}

class RequestsFileErrors : public testing::TestWithParam<RequestsBadInput> {};

TEST_P(RequestsFileErrors, NameFileLineAndField) {
  EXPECT_EQ(requestsErrorOf(GetParam().yaml), GetParam().error);
}

const RequestsBadInput kRequestErrors[] = {
    {"EmptyFile", "# nothing\n",
     "requests.yaml:1: empty file; a requests file has requests (and optionally models)"},
    {"MissingRequests", "models: []\n", "requests.yaml:1: requests: required"},
    {"WrongKind", "kind: Cluster\nrequests: []\n",
     "requests.yaml:1: kind: must be PlacementRequests, got Cluster (is this the right file?)"},
    {"UnknownKey", "requests:\n  - replicaId: a\n    model: small\n    gpuType: [L4]\n",
     "requests.yaml:4: requests[0].gpuType: unknown key (did you mean \"gpuTypes\"?); allowed: "
     "replicaId, name, count, model, gpuTypes, nodeSelector, tolerations, deployment"},
    {"NoId", "requests:\n  - model: small\n",
     "requests.yaml:2: requests[0]: needs replicaId (one replica) or name (replicas name-0, "
     "name-1, ...)"},
    {"IdAndName", "requests:\n  - replicaId: a\n    name: b\n    model: small\n",
     "requests.yaml:3: requests[0].name: give either replicaId (one replica) or name (with "
     "count), not both"},
    {"CountWithReplicaId", "requests:\n  - replicaId: a\n    count: 2\n    model: small\n",
     "requests.yaml:3: requests[0].count: needs name (replicas are called name-0, name-1, ...), "
     "not replicaId"},
    {"CountZero", "requests:\n  - {name: a, count: 0, model: small}\n",
     "requests.yaml:2: requests[0].count: must be > 0, got 0"},
    {"CountAbsurd", "requests:\n  - {name: a, count: 1000000, model: small}\n",
     "requests.yaml:2: requests[0].count: must be <= 100000, got 1000000"},
    {"MissingModel", "requests:\n  - replicaId: a\n",
     "requests.yaml:2: requests[0].model: required"},
    {"UnknownModel", "requests:\n  - replicaId: a\n    model: smal\n",
     "requests.yaml:3: requests[0].model: unknown model \"smal\"; known models: big, small"},
    {"ModelAsList", "requests:\n  - replicaId: a\n    model: [small]\n",
     "requests.yaml:3: requests[0].model: must be a model name or a profile mapping, got a list"},
    {"InlineModelBadField",
     "requests:\n  - replicaId: a\n    model:\n      name: x\n      weightsMib: 1\n"
     "      gpusPerReplica: 0\n",
     "requests.yaml:6: requests[0].model.gpusPerReplica: must be > 0, got 0"},
    {"InlineModelWithoutName", "requests:\n  - replicaId: a\n    model: {weightsMib: 1}\n",
     "requests.yaml:3: requests[0].model.name: required"},
    {"DuplicateIds",
     "requests:\n  - {name: a, count: 2, model: small}\n  - {replicaId: a-1, model: small}\n",
     "requests.yaml:3: requests[1]: replica id \"a-1\" is already used by requests[0] (line 2)"},
    {"TolerationOperator",
     "requests:\n  - replicaId: a\n    model: small\n    tolerations:\n"
     "      - {key: k, operator: In}\n",
     "requests.yaml:5: requests[0].tolerations[0].operator: must be Equal or Exists, got In"},
    {"TolerationExistsWithValue",
     "requests:\n  - replicaId: a\n    model: small\n    tolerations:\n"
     "      - {key: k, operator: Exists, value: v}\n",
     "requests.yaml:5: requests[0].tolerations[0].value: must be empty when operator is Exists"},
    {"TolerationWithoutKey",
     "requests:\n  - replicaId: a\n    model: small\n    tolerations:\n"
     "      - {value: v}\n",
     "requests.yaml:5: requests[0].tolerations[0]: key is required unless operator is Exists"},
    {"TolerationEffect",
     "requests:\n  - replicaId: a\n    model: small\n    tolerations:\n"
     "      - key: k\n        effect: noschedule\n",
     "requests.yaml:6: requests[0].tolerations[0].effect: must be NoSchedule, PreferNoSchedule, "
     "NoExecute or left out (every effect), got noschedule"},
    {"NodeSelectorValueList",
     "requests:\n  - replicaId: a\n    model: small\n    nodeSelector:\n      zone: [a, b]\n",
     "requests.yaml:5: requests[0].nodeSelector.zone: must be text, got a list"},
    {"GpuTypesNotAList", "requests:\n  - replicaId: a\n    model: small\n    gpuTypes: L4\n",
     "requests.yaml:4: requests[0].gpuTypes: must be a list, got L4"},
    {"ModelPriorityOverflow",
     "models:\n  - {name: m, weightsMib: 1, priority: 3000000000}\nrequests: []\n",
     "requests.yaml:2: models[0].priority: must be <= 2147483647, got 3000000000"},
};

INSTANTIATE_TEST_SUITE_P(BadInputs, RequestsFileErrors, testing::ValuesIn(kRequestErrors),
                         [](const testing::TestParamInfo<RequestsBadInput>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace tessera::config
