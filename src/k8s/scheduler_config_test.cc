// deploy/base/kube-scheduler/scheduler-config.yaml must agree with the server: the verbs are the
// routes it serves, the managed resources the ones pods are read with, and the fields obey
// kube-scheduler's validation (weight > 0 with a prioritize verb, unique extended-resource
// names).

#include <set>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "k8s/pod.h"

namespace tessera::k8s {
namespace {

TEST(SchedulerConfig, TheShippedConfigurationMatchesTheExtender) {
  const YAML::Node doc = YAML::LoadFile(std::string(TESSERA_SOURCE_DIR) +
                                        "/deploy/base/kube-scheduler/scheduler-config.yaml");
  EXPECT_EQ(doc["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(doc["kind"].as<std::string>(), "KubeSchedulerConfiguration");
  ASSERT_TRUE(doc["profiles"].IsSequence());
  EXPECT_EQ(doc["profiles"][0]["schedulerName"].as<std::string>(), "tessera-scheduler");
  ASSERT_EQ(doc["extenders"].size(), 1u);
  const YAML::Node e = doc["extenders"][0];
  const std::string prefix = e["urlPrefix"].as<std::string>();
  EXPECT_TRUE(prefix.ends_with("/scheduler")) << prefix;
  EXPECT_TRUE(prefix.starts_with("https://")) << "the extender takes no token: TLS protects it";
  EXPECT_TRUE(e["enableHTTPS"].as<bool>());
  // The routes HttpServer serves under /scheduler.
  EXPECT_EQ(e["filterVerb"].as<std::string>(), "filter");
  EXPECT_EQ(e["prioritizeVerb"].as<std::string>(), "prioritize");
  EXPECT_EQ(e["preemptVerb"].as<std::string>(), "preempt");
  // Tessera binds, so the GPUs it books are the ones the device plugin hands out.
  EXPECT_EQ(e["bindVerb"].as<std::string>(), "bind");
  EXPECT_GT(e["weight"].as<int>(), 0);
  EXPECT_TRUE(e["nodeCacheCapable"].as<bool>());
  EXPECT_FALSE(e["ignorable"].as<bool>());
  std::set<std::string> names;
  for (const YAML::Node& r : e["managedResources"]) {
    EXPECT_TRUE(names.insert(r["name"].as<std::string>()).second) << "duplicate resource";
    EXPECT_TRUE(r["ignoredByScheduler"].as<bool>());
  }
  EXPECT_EQ(names,
            (std::set<std::string>{std::string(kResourceGpuMemory),
                                   std::string(kResourceGpuCompute), std::string(kResourceGpus)}));
}

}  // namespace
}  // namespace tessera::k8s
