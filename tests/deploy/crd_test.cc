// The ModelDeployment CRD: its schema is structural (the API server refuses it otherwise),
// every example under deploy/examples validates against it, and broken objects are refused
// with the field named. kubectl 1.20 cannot validate against a CRD without a cluster, so a
// small validator (schema.h) does what the API server's would for these keywords.

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deploy_test_support.h"
#include "schema.h"

namespace tessera::deploytest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Crd {
  json object;
  json schema;  // openAPIV3Schema of the served version
  std::string apiVersion;
  std::string kind;
};

Crd loadCrd() {
  const auto docs = yamlDocuments(readText(sourceDir() / "deploy/base/crd-modeldeployment.yaml"),
                                  "crd-modeldeployment.yaml");
  Crd crd;
  if (docs.size() != 1) {
    ADD_FAILURE() << "expected one document";
    return crd;
  }
  crd.object = docs[0];
  const json& spec = crd.object["spec"];
  crd.kind = spec["names"]["kind"];
  for (const json& v : spec["versions"]) {
    if (v.value("served", false) && v.value("storage", false)) {
      crd.apiVersion = spec["group"].get<std::string>() + "/" + v["name"].get<std::string>();
      crd.schema = v["schema"]["openAPIV3Schema"];
    }
  }
  return crd;
}

std::vector<std::pair<std::string, json>> exampleObjects(const std::string& kind) {
  std::vector<std::pair<std::string, json>> out;
  for (const auto& e : fs::directory_iterator(sourceDir() / "deploy/examples")) {
    if (e.path().extension() != ".yaml") continue;
    for (json& doc : yamlDocuments(readText(e.path()), e.path().string())) {
      if (doc.value("kind", "") == kind) {
        out.emplace_back(e.path().filename().string() + ": " + doc["metadata"].value("name", ""),
                         std::move(doc));
      }
    }
  }
  return out;
}

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const auto& e : errors) {
    if (e.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += "\n  " + e;
  return out;
}

class CrdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    crd_ = loadCrd();
    ASSERT_TRUE(crd_.schema.is_object());
    examples_ = exampleObjects(crd_.kind);
    ASSERT_GE(examples_.size(), 2u) << "deploy/examples should show ModelDeployments";
  }
  json example(const std::string& name) const {
    for (const auto& [where, obj] : examples_) {
      if (obj["metadata"]["name"] == name) return obj;
    }
    ADD_FAILURE() << "no example " << name;
    return json::object();
  }
  std::vector<std::string> check(const json& obj) const { return validate(crd_.schema, obj); }

  Crd crd_;
  std::vector<std::pair<std::string, json>> examples_;
};

TEST_F(CrdTest, TheSchemaIsStructuralAndTheResourceHasAStatusSubresource) {
  const auto problems = structuralProblems(crd_.schema);
  EXPECT_TRUE(problems.empty()) << joined(problems);
  EXPECT_EQ(crd_.apiVersion, "tessera.io/v1alpha1");
  EXPECT_EQ(crd_.object["spec"]["scope"], "Namespaced");
  bool status = false;
  for (const json& v : crd_.object["spec"]["versions"]) {
    status = status || (v.contains("subresources") && v["subresources"].contains("status"));
  }
  EXPECT_TRUE(status);
  // Every printer column points at a field the schema has.
  for (const json& v : crd_.object["spec"]["versions"]) {
    for (const json& col : v.value("additionalPrinterColumns", json::array())) {
      std::string path = col["jsonPath"];
      if (path == ".metadata.creationTimestamp") continue;
      json node = crd_.schema;
      std::size_t at = 1;
      while (at < path.size()) {
        const std::size_t dot = path.find('.', at);
        const std::string key =
            path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
        ASSERT_TRUE(node.contains("properties") && node["properties"].contains(key))
            << "printer column " << col["name"] << ": " << path;
        node = node["properties"][key];
        at = dot == std::string::npos ? path.size() : dot + 1;
      }
    }
  }
}

TEST_F(CrdTest, EveryExampleValidates) {
  for (const auto& [where, obj] : examples_) {
    EXPECT_EQ(obj["apiVersion"], crd_.apiVersion) << where;
    const auto errors = check(obj);
    EXPECT_TRUE(errors.empty()) << where << joined(errors);
  }
}

TEST_F(CrdTest, BrokenObjectsAreRefusedWithTheFieldNamed) {
  const json good = example("chat");
  ASSERT_TRUE(check(good).empty());

  json wrongType = good;
  wrongType["spec"]["replicas"]["min"] = "two";
  EXPECT_TRUE(mentions(check(wrongType), "spec.replicas.min: expected integer"))
      << joined(check(wrongType));

  json missingModel = good;
  missingModel["spec"].erase("model");
  EXPECT_TRUE(mentions(check(missingModel), "spec: missing required field model"));

  json missingName = good;
  missingName["spec"]["model"].erase("name");
  EXPECT_TRUE(mentions(check(missingName), "spec.model: missing required field name"));

  json canary = good;
  canary["spec"]["rollout"] = {{"strategy", "Canary"}, {"canaryWeight", 150}};
  EXPECT_TRUE(mentions(check(canary), "spec.rollout.canaryWeight: 150 is above the maximum 100"));
  canary["spec"]["rollout"]["canaryWeight"] = -1;
  EXPECT_TRUE(mentions(check(canary), "spec.rollout.canaryWeight: -1 is below the minimum 0"));
  canary["spec"]["rollout"]["canaryWeight"] = 12.5;
  EXPECT_TRUE(mentions(check(canary), "spec.rollout.canaryWeight: expected integer"));

  json strategy = good;
  strategy["spec"]["rollout"]["strategy"] = "BlueGreen";
  EXPECT_TRUE(mentions(check(strategy), "spec.rollout.strategy: \"BlueGreen\" is not one of"));

  json policy = good;
  policy["spec"]["autoscaling"]["policy"] = "Tessera";  // the recommender names are lowercase
  EXPECT_TRUE(mentions(check(policy), "spec.autoscaling.policy"));

  json unknown = good;
  unknown["spec"]["replica"] = {{"min", 1}};
  EXPECT_TRUE(mentions(check(unknown), "spec.replica: unknown field"));
  json unknownDeep = good;
  unknownDeep["spec"]["resources"]["gpuMem"] = "20Gi";
  EXPECT_TRUE(mentions(check(unknownDeep), "spec.resources.gpuMem: unknown field"));

  json sharing = good;
  sharing["spec"]["resources"]["sharing"] = {"shared", "timeslice"};
  EXPECT_TRUE(mentions(check(sharing), "spec.resources.sharing[1]"));

  json memory = good;
  memory["spec"]["resources"]["gpuMemory"] = true;
  EXPECT_TRUE(mentions(check(memory), "spec.resources.gpuMemory: expected an integer or a string"));

  json weights = good;
  weights["spec"]["model"]["weights"] = "lots";
  EXPECT_TRUE(mentions(check(weights), "spec.model.weights: \"lots\" does not match"));

  json targets = good;
  targets["spec"]["autoscaling"]["targets"]["queuePerReplica"] = "five";
  EXPECT_TRUE(
      mentions(check(targets), "spec.autoscaling.targets.queuePerReplica: expected number"));

  json noPods = good;
  noPods["spec"].erase("template");
  noPods["spec"].erase("image");
  EXPECT_TRUE(mentions(check(noPods), "spec: matches none of anyOf"));

  // Inside the pod template anything goes: it is a Kubernetes pod spec.
  json podSpec = good;
  podSpec["spec"]["template"]["spec"]["tolerations"] = json::array({{{"operator", "Exists"}}});
  EXPECT_TRUE(check(podSpec).empty()) << joined(check(podSpec));

  json status = good;
  status["status"] = {
      {"replicas", 2},
      {"readyReplicas", 1},
      {"currentVersion", "v1"},
      {"observedGeneration", 3},
      {"conditions", json::array({{{"type", "Available"},
                                   {"status", "True"},
                                   {"reason", "MinimumReplicasAvailable"},
                                   {"message", ""},
                                   {"lastTransitionTime", "2026-11-29T14:00:00Z"}}})}};
  EXPECT_TRUE(check(status).empty()) << joined(check(status));
  status["status"]["conditions"][0]["status"] = "Maybe";
  EXPECT_TRUE(mentions(check(status), "status.conditions[0].status"));
}

TEST_F(CrdTest, EverySpecFieldIsDocumented) {
  const std::string doc = readText(sourceDir() / "docs/kubernetes.md");
  // Schema nodes still to visit, depth first: (path, schema).
  std::vector<std::pair<std::string, json>> pending = {
      {"spec", crd_.schema["properties"]["spec"]}};
  while (!pending.empty()) {
    auto [path, node] = pending.back();
    pending.pop_back();
    if (path == "spec.template") continue;  // a pod template
    const json properties = node.value("properties", json::object());
    for (const auto& [key, sub] : properties.items()) {
      const std::string field = path + "." + key;
      EXPECT_NE(doc.find("`" + field + "`"), std::string::npos)
          << field << " is not described in docs/kubernetes.md";
      pending.emplace_back(field, sub);
    }
  }
}

}  // namespace
}  // namespace tessera::deploytest
