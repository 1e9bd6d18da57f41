// Decoding an API body (docs/benchmarks.md, "Request bodies"): the node and model bodies of
// POST /api/v1/nodes and /models, decoded the way the control plane does (config::jsonToYaml,
// then the file loaders' per-item decoders on the tree) against the way it did before: the
// body wrapped as a one-item file, written out as JSON text, parsed by yaml-cpp and loaded
// by parseClusterYaml / parseRequestsYaml (a catalogue copy included, which a file load
// needs for its custom types). Both are measured in the same run; each checks its answer.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "config/items.h"
#include "config/loaders.h"
#include "config/model_yaml.h"
#include "config/yaml_json.h"

namespace tessera::bench {
namespace {

using nlohmann::json;

// A node as an agent registers it: eight GPUs with topology, labels and a taint.
json nodeBody() {
  json gpus = json::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back({{"id", std::to_string(i)},
                    {"uuid", "GPU-" + std::to_string(1000 + i)},
                    {"type", "H100-80GB"},
                    {"numaNode", i / 4},
                    {"nvlinkGroup", 0},
                    {"pcieSwitch", i / 2},
                    {"healthy", true}});
  }
  return {{"name", "gpu-node-17"},
          {"cpu", 192},
          {"hostMemory", "2Ti"},
          {"labels", {{"zone", "eu-west-1a"}, {"pool", "inference"}}},
          {"taints", json::array({{{"key", "gpu"}, {"value", "h100"}, {"effect", "NoSchedule"}}})},
          {"cachedModels", {"llama-8b", "llama-70b"}},
          {"gpus", std::move(gpus)}};
}

json modelBody() {
  return {{"name", "llama-70b"},    {"weights", "140Gi"},       {"kvCache", "16Gi"},
          {"overhead", "4Gi"},      {"computeMilli", 800},      {"gpusPerReplica", 2},
          {"nvlinkRequired", true}, {"sharing", {"exclusive"}}, {"priority", 10}};
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "body_decode_bench: %s failed\n", what);
    std::abort();
  }
}

void BM_NodeBodyViaText(benchmark::State& state) {
  const json body = nodeBody();
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  for (auto _ : state) {
    model::GpuCatalog scratch = catalog;
    auto file =
        config::parseClusterYaml(json{{"nodes", json::array({body})}}.dump(1), "body", scratch);
    check(file && file->nodes.size() == 1 && file->nodes[0].gpus.size() == 8, "node via text");
    benchmark::DoNotOptimize(file);
  }
  state.SetLabel("baseline");
}

void BM_NodeBodyViaTree(benchmark::State& state) {
  const json body = nodeBody();
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  for (auto _ : state) {
    const YAML::Node tree = config::jsonToYaml(body);
    auto node = config::parseNodeEntry(config::Field::tree("body", tree), catalog);
    check(node && node->gpus.size() == 8, "node via tree");
    benchmark::DoNotOptimize(node);
  }
  state.SetLabel("vs BM_NodeBodyViaText");
}

void BM_ModelBodyViaText(benchmark::State& state) {
  const json body = modelBody();
  for (auto _ : state) {
    auto file = config::parseRequestsYaml(
        json{{"models", json::array({body})}, {"requests", json::array()}}.dump(1), "body", {});
    check(file && file->models.size() == 1, "model via text");
    benchmark::DoNotOptimize(file);
  }
  state.SetLabel("baseline");
}

void BM_ModelBodyViaTree(benchmark::State& state) {
  const json body = modelBody();
  for (auto _ : state) {
    const YAML::Node tree = config::jsonToYaml(body);
    auto profile = config::parseModelProfile(config::Field::tree("body", tree));
    check(profile && profile->gpusPerReplica == 2, "model via tree");
    benchmark::DoNotOptimize(profile);
  }
  state.SetLabel("vs BM_ModelBodyViaText");
}

BENCHMARK(BM_NodeBodyViaText);
BENCHMARK(BM_NodeBodyViaTree);
BENCHMARK(BM_ModelBodyViaText);
BENCHMARK(BM_ModelBodyViaTree);

}  // namespace
}  // namespace tessera::bench

BENCHMARK_MAIN();
