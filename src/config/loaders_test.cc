// The bundled examples (examples/*.yaml) load, agree with each other and with the built-in
// default profile; the file-reading entry points name the file in their errors.

#include "config/loaders.h"

#include <cstdio>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "sched/plugin.h"

namespace tessera::config {
namespace {

std::string examplePath(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/examples/" + name;
}

struct Examples {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ClusterFile cluster;
  RequestsFile requests;
};

Examples loadExamples() {
  Examples e;
  auto cluster = loadClusterFile(examplePath("cluster.yaml"), e.catalog);
  EXPECT_TRUE(cluster) << cluster.error().message;
  if (!cluster) return e;
  e.cluster = std::move(*cluster);
  auto requests = loadRequestsFile(examplePath("requests.yaml"), e.cluster.models);
  EXPECT_TRUE(requests) << requests.error().message;
  if (requests) e.requests = std::move(*requests);
  return e;
}

const model::NodeSpec* findNode(const ClusterFile& file, const std::string& name) {
  for (const model::NodeSpec& node : file.nodes) {
    if (node.name == name) return &node;
  }
  return nullptr;
}

TEST(Examples, ClusterFileDescribesTheMixedFleet) {
  const Examples e = loadExamples();
  ASSERT_EQ(e.cluster.customGpuTypes.size(), 1u);
  EXPECT_NE(e.catalog.find("NVIDIA RTX A6000"), nullptr);
  EXPECT_EQ(e.cluster.nodes.size(), 7u);

  const model::NodeSpec* h100 = findNode(e.cluster, "h100-a");
  ASSERT_NE(h100, nullptr);
  ASSERT_EQ(h100->gpus.size(), 8u);
  EXPECT_EQ(h100->gpus[7].type, "H100-80GB");
  EXPECT_EQ(h100->gpus[7].nvlinkGroup, 0);
  EXPECT_EQ(h100->gpus[7].numaNode, 1);

  const model::NodeSpec* mig = findNode(e.cluster, "a100-mig");
  ASSERT_NE(mig, nullptr);
  EXPECT_TRUE(mig->gpus[0].migEnabled);
  EXPECT_EQ(mig->gpus[0].migInstances.size(), 3u);
  EXPECT_TRUE(mig->gpus[1].migEnabled);
  EXPECT_FALSE(mig->gpus[2].migEnabled);

  const model::NodeSpec* tainted = findNode(e.cluster, "l4-b");
  ASSERT_NE(tainted, nullptr);
  ASSERT_EQ(tainted->taints.size(), 1u);
  EXPECT_EQ(tainted->taints[0].effect, "NoSchedule");

  EXPECT_EQ(e.cluster.replicas.size(), 6u);
  std::set<int> priorities;
  for (const ExistingReplica& r : e.cluster.replicas) priorities.insert(r.profile.priority);
  EXPECT_GE(priorities.size(), 4u) << "the example should show eviction order by priority";
}

TEST(Examples, RequestsFileCoversTheScenarios) {
  const Examples e = loadExamples();
  const auto& requests = e.requests.requests;
  EXPECT_GE(requests.size(), 12u);
  std::set<std::string> ids;
  bool multiGpuNvlink = false;
  bool migOnly = false;
  bool tolerates = false;
  for (const model::PlacementRequest& r : requests) {
    EXPECT_TRUE(ids.insert(r.replicaId).second) << r.replicaId;
    multiGpuNvlink |= r.model.gpusPerReplica >= 2 && r.model.nvlinkRequired;
    migOnly |= r.model.sharing == static_cast<model::SharingModes>(model::SharingMode::kMig);
    tolerates |= !r.tolerations.empty();
    // The loader cannot check these (it has no catalogue); the example must still be right.
    for (const std::string& type : r.gpuTypes) {
      EXPECT_NE(e.catalog.find(type), nullptr) << r.replicaId << ": " << type;
    }
  }
  EXPECT_TRUE(multiGpuNvlink);
  EXPECT_TRUE(migOnly);
  EXPECT_TRUE(tolerates);
  EXPECT_TRUE(ids.contains("llama70b-prod-1"));
}

TEST(Examples, CachedModelsNameDeclaredModels) {
  const Examples e = loadExamples();
  std::set<std::string> models;
  for (const auto& m : e.cluster.models) models.insert(m.name);
  for (const auto& m : e.requests.models) models.insert(m.name);
  for (const model::NodeSpec& node : e.cluster.nodes) {
    for (const std::string& cached : node.cachedModels) {
      EXPECT_TRUE(models.contains(cached)) << node.name << ": " << cached;
    }
  }
}

TEST(Examples, ProfileFileIsTheDefaultProfileWrittenOut) {
  auto loaded = loadProfileFile(examplePath("profile.yaml"));
  ASSERT_TRUE(loaded) << loaded.error().message;
  const sched::Profile expected = sched::defaultProfile();
  EXPECT_EQ(loaded->name, expected.name);
  EXPECT_DOUBLE_EQ(loaded->options.memorySafetyFactor, expected.options.memorySafetyFactor);
  EXPECT_EQ(loaded->options.reservationTtlMs, expected.options.reservationTtlMs);
  EXPECT_EQ(loaded->options.gpuTieBreak, expected.options.gpuTieBreak);
  const auto same = [](const std::vector<sched::PluginSpec>& a,
                       const std::vector<sched::PluginSpec>& b, bool weighted) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      if (weighted) {
        EXPECT_EQ(a[i].weight, b[i].weight) << a[i].name;
      }
      EXPECT_EQ(a[i].args, b[i].args) << a[i].name;
    }
  };
  same(loaded->filters, expected.filters, false);
  same(loaded->scores, expected.scores, true);

  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  auto plugins = sched::buildPlugins(*loaded, registry);
  EXPECT_TRUE(plugins) << plugins.error().message;
}

TEST(LoadFiles, ErrorsNameThePathAsGiven) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto missing = loadClusterFile("/nonexistent/cluster.yaml", catalog);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message,
            "/nonexistent/cluster.yaml: cannot open: No such file or directory");

  const std::string path = testing::TempDir() + "tessera_bad_profile.yaml";
  {
    std::ofstream out(path);
    out << "name: x\nmemorySafetyFactor: 0\n";
  }
  auto bad = loadProfileFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, path + ":2: memorySafetyFactor: must be >= 1, got 0");

  auto noRequests = loadRequestsFile("/nonexistent/requests.yaml", {});
  ASSERT_FALSE(noRequests);
  EXPECT_EQ(noRequests.error().message,
            "/nonexistent/requests.yaml: cannot open: No such file or directory");
}

}  // namespace
}  // namespace tessera::config
