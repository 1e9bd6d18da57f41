// The shipped files are what Tessera's own readers accept: every example ModelDeployment
// reads with the controller's readModelDeployment and its pod with the extender's readPod;
// the example pods ask for what their comments say; the agent files of the base and the dev
// overlay load with the agent's parser.

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/agent_config.h"
#include "deploy_test_support.h"
#include "k8s/controller.h"
#include "k8s/pod.h"

namespace tessera::deploytest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> docsOf(const std::string& relative) {
  return yamlDocuments(readText(sourceDir() / relative), relative);
}

// A pod as kube-scheduler would send it, from a Deployment's template.
json podOf(const json& deployment) {
  json pod{{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = deployment["spec"]["template"]["metadata"];
  pod["metadata"]["name"] = deployment["metadata"]["name"].get<std::string>() + "-0";
  pod["metadata"]["namespace"] = deployment["metadata"]["namespace"];
  pod["spec"] = deployment["spec"]["template"]["spec"];
  return pod;
}

const k8s::ModelLookup kNoModels = [](std::string_view) { return std::nullopt; };

TEST(Readers, EveryExampleModelDeploymentReadsWithTheController) {
  int seen = 0;
  for (const auto& e : fs::directory_iterator(sourceDir() / "deploy/examples")) {
    if (e.path().extension() != ".yaml") continue;
    for (json doc : yamlDocuments(readText(e.path()), e.path().string())) {
      if (doc.value("kind", "") != "ModelDeployment") continue;
      ++seen;
      const std::string where =
          e.path().filename().string() + ": " + doc["metadata"]["name"].get<std::string>();
      doc["metadata"]["uid"] = "uid-" + doc["metadata"]["name"].get<std::string>();
      auto spec = k8s::readModelDeployment(doc);
      ASSERT_TRUE(spec) << where << ": " << spec.error().message;
      EXPECT_EQ(spec->tesseraName, doc["metadata"]["namespace"].get<std::string>() + "." +
                                       doc["metadata"]["name"].get<std::string>());
      // The pod it makes is one the extender places.
      json pod =
          k8s::podFor(*spec, spec->version, doc["metadata"]["name"].get<std::string>() + "-x");
      const auto inlineModel = [&](std::string_view) -> std::optional<model::ModelProfile> {
        if (!spec->modelProfile) return std::nullopt;
        model::ModelProfile p;
        p.name = spec->modelName;
        p.weightsMib = 1024;
        return p;
      };
      auto read = k8s::readPod(pod, inlineModel);
      ASSERT_TRUE(read) << where << ": " << read.error().message;
      EXPECT_TRUE(read->managed) << where;
    }
  }
  EXPECT_GE(seen, 2);
}

TEST(Readers, TheSharedGpuPodsFitOneCardTogether) {
  std::vector<k8s::PodRequest> pods;
  for (const json& d : docsOf("deploy/examples/shared-gpu-pods.yaml")) {
    if (d["kind"] != "Deployment") continue;
    EXPECT_EQ(d["spec"]["template"]["spec"]["schedulerName"], "tessera-scheduler");
    auto read = k8s::readPod(podOf(d), kNoModels);
    ASSERT_TRUE(read) << read.error().message;
    ASSERT_TRUE(read->managed);
    pods.push_back(*read);
  }
  ASSERT_EQ(pods.size(), 2u);
  std::int64_t mib = 0;
  std::int32_t milli = 0;
  for (const auto& p : pods) {
    EXPECT_EQ(p.request.model.gpusPerReplica, 1);
    EXPECT_EQ(p.request.model.sharing,
              static_cast<model::SharingModes>(model::SharingMode::kShared));
    mib += p.request.model.memoryPerGpuMib();
    milli += p.request.model.computeMilli;
  }
  // As the file says: both on one A100-80GB, with the default 1.2 safety factor.
  EXPECT_LE(static_cast<double>(mib) * 1.2, 80.0 * 1024);
  EXPECT_LE(milli, 1000);
}

TEST(Readers, TheAutoscalerExamplePodsBelongToTheirTesseraDeployment) {
  for (const json& d : docsOf("deploy/examples/keda-scaledobject.yaml")) {
    if (d["kind"] != "Deployment") continue;
    auto read =
        k8s::readPod(podOf(d), [](std::string_view name) -> std::optional<model::ModelProfile> {
          model::ModelProfile p;
          p.name = std::string(name);
          p.weightsMib = 16 * 1024;
          return p;
        });
    ASSERT_TRUE(read) << read.error().message;
    EXPECT_TRUE(read->managed);
    EXPECT_EQ(read->request.deployment, "models.chat");
  }
}

TEST(Readers, TheAgentFilesLoad) {
  for (const char* file : {"deploy/base/agent-config.yaml", "deploy/overlays/dev/agent-config.yaml",
                           "deploy/overlays/dra/agent-config.yaml"}) {
    auto config = agent::parseAgentYaml(readText(sourceDir() / file), file);
    ASSERT_TRUE(config) << config.error().message;
  }
  // The DRA overlay's file is GPU mode `dra`: the driver takes every GPU, no device plugin.
  auto dra =
      agent::parseAgentYaml(readText(sourceDir() / "deploy/overlays/dra/agent-config.yaml"), "dra");
  ASSERT_TRUE(dra) << dra.error().message;
  EXPECT_TRUE(dra->draDriver.enabled);
  EXPECT_TRUE(dra->draDriver.gpus.empty());
  EXPECT_EQ(dra->devicePlugin.enabled, false);
  // And a broken one does not.
  EXPECT_FALSE(agent::parseAgentYaml("drain: {stopNewWork: 10}\n", "broken.yaml"));
}

}  // namespace
}  // namespace tessera::deploytest
