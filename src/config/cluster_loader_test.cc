#include <gtest/gtest.h>

#include "config/loaders.h"

namespace tessera::config {
namespace {

Result<ClusterFile> parse(const std::string& yaml, model::GpuCatalog& catalog) {
  return parseClusterYaml(yaml, "cluster.yaml", catalog);
}

ClusterFile parseOk(const std::string& yaml) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto file = parse(yaml, catalog);
  EXPECT_TRUE(file) << file.error().message;
  return file.value_or(ClusterFile{});
}

std::string errorOf(const std::string& yaml) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto file = parse(yaml, catalog);
  EXPECT_FALSE(file) << "expected an error";
  return file ? std::string() : file.error().message;
}

TEST(ClusterFile, ExpandsTheGpuShorthandInContiguousBlocks) {
  const ClusterFile file = parseOk(R"(nodes:
  - name: n1
    cpu: 96
    hostMemory: 1Ti
    gpus: {type: a100-sxm4-80gb, count: 8, nvlinkGroups: 2, numaNodes: 4}
)");
  ASSERT_EQ(file.nodes.size(), 1u);
  const model::NodeSpec& node = file.nodes[0];
  EXPECT_EQ(node.cpuMilli, 96'000);
  EXPECT_EQ(node.hostMemoryMib, 1024 * 1024);
  ASSERT_EQ(node.gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const model::GpuSpec& gpu = node.gpus[static_cast<std::size_t>(i)];
    EXPECT_EQ(gpu.id, std::to_string(i));
    EXPECT_EQ(gpu.type, "A100-80GB");  // the alias resolves to the catalogue name
    EXPECT_EQ(gpu.memoryMib, 81920);   // figures from the catalogue
    EXPECT_EQ(gpu.smCount, 108);
    EXPECT_DOUBLE_EQ(gpu.memoryBandwidthGBps, 2039);
    EXPECT_EQ(gpu.computeMilli, 1000);
    EXPECT_EQ(gpu.nvlinkGroup, i / 4);
    EXPECT_EQ(gpu.numaNode, i / 2);
    EXPECT_EQ(gpu.pcieSwitch, -1);
  }
}

TEST(ClusterFile, ReadsEveryNodeAndGpuField) {
  const ClusterFile file = parseOk(R"(nodes:
  - name: n1
    cpuMilli: 64500
    hostMemoryMib: 524288
    labels: {zone: a, "tessera.io/pool": premium}
    taints:
      - {key: dedicated, value: batch, effect: NoSchedule}
      - {key: maintenance, effect: PreferNoSchedule}
    healthy: false
    cordoned: true
    rank: -3
    cachedModels: [m1, m2]
    gpus:
      - id: gpu-a
        uuid: GPU-1234
        type: L4
        memory: 20GB
        computeMilli: 500
        memoryBandwidthGBps: 250.5
        smCount: 50
        numaNode: 1
        nvlinkGroup: -1
        pcieSwitch: 3
        timeSlicingReplicas: 4
        healthy: false
      - type: H100-80GB
        migEnabled: true
        migInstances:
          - {profile: 3g.40gb}
          - {profile: 1g.10gb}
          - {profile: 1g.10gb, startSlot: 6}
)");
  const model::NodeSpec& node = file.nodes.at(0);
  EXPECT_EQ(node.cpuMilli, 64500);
  EXPECT_EQ(node.hostMemoryMib, 524288);
  EXPECT_EQ(node.labels.at("tessera.io/pool"), "premium");
  ASSERT_EQ(node.taints.size(), 2u);
  EXPECT_EQ(node.taints[1].key, "maintenance");
  EXPECT_EQ(node.taints[1].value, "");
  EXPECT_EQ(node.taints[1].effect, "PreferNoSchedule");
  EXPECT_FALSE(node.healthy);
  EXPECT_TRUE(node.cordoned);
  EXPECT_EQ(node.rank, -3);
  EXPECT_EQ(node.cachedModels, (std::vector<std::string>{"m1", "m2"}));
  ASSERT_EQ(node.gpus.size(), 2u);
  const model::GpuSpec& l4 = node.gpus[0];
  EXPECT_EQ(l4.id, "gpu-a");
  EXPECT_EQ(l4.uuid, "GPU-1234");
  EXPECT_EQ(l4.memoryMib, 19073);  // 20e9 bytes, rounded down: a capacity never over-promises
  EXPECT_EQ(l4.computeMilli, 500);
  EXPECT_DOUBLE_EQ(l4.memoryBandwidthGBps, 250.5);
  EXPECT_EQ(l4.smCount, 50);
  EXPECT_EQ(l4.numaNode, 1);
  EXPECT_EQ(l4.nvlinkGroup, -1);
  EXPECT_EQ(l4.pcieSwitch, 3);
  EXPECT_EQ(l4.timeSlicingReplicas, 4);
  EXPECT_FALSE(l4.healthy);
  const model::GpuSpec& h100 = node.gpus[1];
  EXPECT_EQ(h100.id, "1");  // ids default to the position in the list
  EXPECT_TRUE(h100.migEnabled);
  ASSERT_EQ(h100.migInstances.size(), 3u);
  // Without startSlot an instance takes the lowest free allowed start.
  EXPECT_EQ(h100.migInstances[0].profile, "3g.40gb");
  EXPECT_EQ(h100.migInstances[0].startSlot, 0);
  EXPECT_EQ(h100.migInstances[1].startSlot, 4);
  EXPECT_EQ(h100.migInstances[2].startSlot, 6);
}

TEST(ClusterFile, AddsCustomGpuTypesToTheCatalogue) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  const int before = catalog.size();
  auto file = parse(R"(gpuTypes:
  - name: X1
    aliases: [x-one]
    architecture: Test
    memory: 32Gi
    smCount: 60
    memoryBandwidthGBps: 900
    fp16Tflops: 100
    nvlinkGBps: 200
    migMemorySlots: 4
    migProfiles:
      - {name: 1g.8gb, computeSlices: 1, memoryMib: 8192, slotCount: 1, allowedStarts: [0, 1, 2, 3]}
      - {name: 4g.32gb, computeSlices: 4, memory: 32Gi, slotCount: 4, allowedStarts: [0]}
  - name: Mystery
    opaque: true
nodes:
  - name: n1
    gpus: {type: x-one, count: 2}
  - name: n2
    gpus: [{type: Mystery}, {type: Mystery, memoryMib: 30000}]
)",
                    catalog);
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(catalog.size(), before + 2);
  ASSERT_NE(catalog.find("X-ONE"), nullptr);
  EXPECT_EQ(catalog.find("x-one")->name, "X1");
  ASSERT_EQ(file->customGpuTypes.size(), 2u);
  const model::GpuType& x1 = file->customGpuTypes[0];
  EXPECT_EQ(x1.memoryMib, 32768);
  EXPECT_EQ(x1.nvlinkGBps, 200);
  ASSERT_EQ(x1.migProfiles.size(), 2u);
  EXPECT_EQ(x1.migProfiles[0].maxInstances, 4);  // defaults to the number of allowed starts
  EXPECT_EQ(x1.migProfiles[1].memoryMib, 32768);
  EXPECT_EQ(file->nodes[0].gpus[1].type, "X1");
  EXPECT_EQ(file->nodes[0].gpus[1].memoryMib, 32768);
  // An opaque type has no memory figure: 0 (unknown) unless the GPU states it.
  EXPECT_EQ(file->nodes[1].gpus[0].memoryMib, 0);
  EXPECT_EQ(file->nodes[1].gpus[1].memoryMib, 30000);
}

TEST(ClusterFile, AFailedLoadLeavesTheCatalogueUntouched) {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  const int before = catalog.size();
  auto file = parse(R"(gpuTypes:
  - {name: X1, memoryMib: 1024, smCount: 1, memoryBandwidthGBps: 1, fp16Tflops: 1}
nodes:
  - {name: n1, gpus: {type: X2, count: 1}}
)",
                    catalog);
  ASSERT_FALSE(file);
  EXPECT_EQ(catalog.size(), before);
  EXPECT_EQ(catalog.find("X1"), nullptr);
}

TEST(ClusterFile, ReadsModelsAndExistingReplicas) {
  const ClusterFile file = parseOk(R"(models:
  - name: m70
    weights: 140Gi
    kvCacheMib: 20480
    overhead: 4Gi
    computeMilli: 600
    memoryBandwidthGBps: 1500
    gpusPerReplica: 2
    nvlinkRequired: true
    numaAligned: true
    priority: 7
    sharing: [exclusive]
    cpu: 8
    hostMemory: 64Gi
nodes:
  - name: n1
    gpus: {type: H100-80GB, count: 4, nvlinkGroups: 1}
replicas:
  - replicaId: r1
    node: n1
    gpus: [0, 1]
    model: m70
    lastActiveSeconds: 60
  - replicaId: r2
    node: n1
    gpus: ["2"]
    model: {name: small, weightsMib: 1000, sharing: shared}
    deployment: d2
    loaded: false
)");
  ASSERT_EQ(file.models.size(), 1u);
  const model::ModelProfile& m = file.models[0];
  EXPECT_EQ(m.weightsMib, 140 * 1024);
  EXPECT_EQ(m.kvCacheMib, 20480);
  EXPECT_EQ(m.overheadMib, 4096);
  EXPECT_EQ(m.computeMilli, 600);
  EXPECT_DOUBLE_EQ(m.memoryBandwidthGBps, 1500);
  EXPECT_EQ(m.gpusPerReplica, 2);
  EXPECT_TRUE(m.nvlinkRequired);
  EXPECT_TRUE(m.numaAligned);
  EXPECT_EQ(m.priority, 7);
  EXPECT_EQ(m.sharing, static_cast<model::SharingModes>(model::SharingMode::kExclusive));
  EXPECT_EQ(m.cpuMilli, 8000);
  EXPECT_EQ(m.hostMemoryMib, 65536);
  ASSERT_EQ(file.replicas.size(), 2u);
  const ExistingReplica& r1 = file.replicas[0];
  EXPECT_EQ(r1.node, "n1");
  EXPECT_EQ(r1.gpus, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(r1.model, "m70");
  EXPECT_EQ(r1.profile.weightsMib, 140 * 1024);
  EXPECT_EQ(r1.deployment, "m70");  // defaults to the model
  EXPECT_TRUE(r1.loaded);
  EXPECT_EQ(r1.lastActiveSeconds, 60);
  const ExistingReplica& r2 = file.replicas[1];
  EXPECT_EQ(r2.model, "small");
  EXPECT_EQ(r2.profile.sharing, static_cast<model::SharingModes>(model::SharingMode::kShared));
  EXPECT_EQ(r2.deployment, "d2");
  EXPECT_FALSE(r2.loaded);
}

TEST(ClusterFile, TheErrorFormatFromTheHeader) {
  EXPECT_EQ(errorOf(R"(apiVersion: tessera.io/v1alpha1
kind: Cluster
nodes:
  - name: a
    gpus: {type: L4, count: 1}
  - name: b
    gpus: {type: L4, count: 1}
  - name: c
    cpu: 16
    labels:
      zone: z1
    gpus:
      - id: "0"
        memoryMib: -5
        type: L4
)"),
            "cluster.yaml:14: nodes[2].gpus[0].memoryMib: must be > 0, got -5");
}

struct BadInput {
  std::string name;
  std::string yaml;
  std::string error;
};

// Test names instead of gtest's byte dump when a case fails.
void PrintTo(const BadInput& input, std::ostream* os) {
  *os << input.name;
}

class ClusterFileErrors : public testing::TestWithParam<BadInput> {};

TEST_P(ClusterFileErrors, NameFileLineAndField) {
  EXPECT_EQ(errorOf(GetParam().yaml), GetParam().error);
}

const BadInput kClusterErrors[] = {
    {"EmptyFile", "",
     "cluster.yaml:1: empty file; a cluster file has nodes (and optionally gpuTypes, models, "
     "replicas)"},
    {"SyntaxError", "nodes:\n  - name: a\n    gpus: {type: L4, count: 1\n",
     "cluster.yaml:4: YAML syntax error: end of map flow not found"},
    {"NotAMapping", "- a\n- b\n", "cluster.yaml:1: must be a mapping, got a list"},
    {"UnknownTopLevelKey", "nodes: []\nnode: []\n",
     "cluster.yaml:2: node: unknown key (did you mean \"nodes\"?); allowed: apiVersion, kind, "
     "gpuTypes, nodes, models, replicas"},
    {"WrongKind", "kind: PlacementProfile\nnodes: []\n",
     "cluster.yaml:1: kind: must be Cluster, got PlacementProfile (is this the right file?)"},
    {"ProfileGivenAsClusterFile",
     "apiVersion: tessera.io/v1alpha1\nkind: PlacementProfile\nname: default\n",
     "cluster.yaml:2: kind: must be Cluster, got PlacementProfile (is this the right file?)"},
    {"MissingNodes", "models: []\n", "cluster.yaml:1: nodes: required"},
    {"NodesNotAList", "nodes: {name: a}\n", "cluster.yaml:1: nodes: must be a list, got a mapping"},
    {"NodeWithoutName", "nodes:\n  - cpu: 4\n", "cluster.yaml:2: nodes[0].name: required"},
    {"UnknownNodeKey", "nodes:\n  - name: a\n    gpu: {type: L4, count: 1}\n",
     "cluster.yaml:3: nodes[0].gpu: unknown key (did you mean \"gpus\"?); allowed: name, "
     "cpuMilli, cpu, hostMemoryMib, hostMemory, labels, taints, healthy, cordoned, rank, "
     "cachedModels, gpus"},
    {"DuplicateNode", "nodes:\n  - name: a\n  - name: b\n  - name: a\n",
     "cluster.yaml:4: nodes[2].name: duplicate node \"a\" (first on line 2)"},
    {"CpuAndCpuMilli", "nodes:\n  - name: a\n    cpu: 4\n    cpuMilli: 4000\n",
     "cluster.yaml:3: nodes[0].cpu: give either cpuMilli or cpu, not both"},
    {"HostMemoryInBytes", "nodes:\n  - name: a\n    hostMemoryMib: 549755813888\n",
     "cluster.yaml:3: nodes[0].hostMemoryMib: must be <= 268435456 MiB (256 TiB), got "
     "549755813888"},
    {"BooleanSpelledYes", "nodes:\n  - name: a\n    cordoned: yes\n",
     "cluster.yaml:3: nodes[0].cordoned: must be true or false, got yes"},
    {"TaintEffect", "nodes:\n  - name: a\n    taints: [{key: k, effect: NoScheduling}]\n",
     "cluster.yaml:3: nodes[0].taints[0].effect: must be NoSchedule, PreferNoSchedule or "
     "NoExecute, got NoScheduling"},
    {"TaintWithoutEffect", "nodes:\n  - name: a\n    taints:\n      - key: k\n",
     "cluster.yaml:4: nodes[0].taints[0].effect: required"},
    {"LabelsNotAMap", "nodes:\n  - name: a\n    labels: [a, b]\n",
     "cluster.yaml:3: nodes[0].labels: must be a mapping, got a list"},
    {"UnknownGpuType", "nodes:\n  - name: a\n    gpus: {type: A100, count: 1}\n",
     "cluster.yaml:3: nodes[0].gpus.type: unknown GPU type \"A100\"; known types: P100-16GB, "
     "V100-16GB, V100-32GB, T4, A10, A30, A100-40GB, A100-80GB, H100-80GB, H200-141GB, L4, L40S, "
     "G2, G3 (declare others under gpuTypes)"},
    {"ShorthandCountZero", "nodes:\n  - name: a\n    gpus: {type: L4, count: 0}\n",
     "cluster.yaml:3: nodes[0].gpus.count: must be > 0, got 0"},
    {"ShorthandCountMissing", "nodes:\n  - name: a\n    gpus:\n      type: L4\n",
     "cluster.yaml:4: nodes[0].gpus.count: required"},
    {"ShorthandCountTooLarge", "nodes:\n  - name: a\n    gpus: {type: L4, count: 65}\n",
     "cluster.yaml:3: nodes[0].gpus.count: must be <= 64, got 65"},
    {"ShorthandUnevenGroups",
     "nodes:\n  - name: a\n    gpus: {type: L4, count: 8, nvlinkGroups: 3}\n",
     "cluster.yaml:3: nodes[0].gpus.nvlinkGroups: count (8) must be a multiple of nvlinkGroups "
     "(3)"},
    {"ShorthandMoreGroupsThanGpus",
     "nodes:\n  - name: a\n    gpus: {type: L4, count: 2, numaNodes: 4}\n",
     "cluster.yaml:3: nodes[0].gpus.numaNodes: must be <= 2, got 4"},
    {"ShorthandUnknownKey", "nodes:\n  - name: a\n    gpus: {type: L4, count: 2, id: x}\n",
     "cluster.yaml:3: nodes[0].gpus.id: unknown key; allowed: type, count, nvlinkGroups, "
     "numaNodes, pcieSwitches, memoryMib, memory, computeMilli, memoryBandwidthGBps, smCount, "
     "migEnabled, timeSlicingReplicas"},
    {"GpusNotAListOrMap", "nodes:\n  - name: a\n    gpus: 8\n",
     "cluster.yaml:3: nodes[0].gpus: must be a list of GPUs or a {type, count} mapping, got 8"},
    {"GpuWithoutType", "nodes:\n  - name: a\n    gpus:\n      - id: \"0\"\n",
     "cluster.yaml:4: nodes[0].gpus[0].type: required"},
    {"DuplicateGpuId",
     "nodes:\n  - name: a\n    gpus:\n      - {id: x, type: L4}\n      - {id: x, type: L4}\n",
     "cluster.yaml:5: nodes[0].gpus[1].id: duplicate GPU id \"x\" (first on line 4)"},
    {"ImplicitIdCollides",
     "nodes:\n  - name: a\n    gpus:\n      - {id: \"1\", type: L4}\n      - {type: L4}\n",
     "cluster.yaml:5: nodes[0].gpus[1].id: duplicate GPU id \"1\" (first on line 4)"},
    {"GpuMemoryTooLarge", "nodes:\n  - name: a\n    gpus:\n      - {type: L4, memory: 20Ti}\n",
     "cluster.yaml:4: nodes[0].gpus[0].memory: must be <= 16777216 MiB (16 TiB), got \"20Ti\" = "
     "20971520 MiB (20 TiB)"},
    {"GpuMemoryWithoutUnit", "nodes:\n  - name: a\n    gpus:\n      - {type: L4, memory: 24}\n",
     "cluster.yaml:4: nodes[0].gpus[0].memory: needs a unit (Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, "
     "TB), got \"24\"; or give plain MiB as memoryMib"},
    {"GpuComputeZero", "nodes:\n  - name: a\n    gpus:\n      - {type: L4, computeMilli: 0}\n",
     "cluster.yaml:4: nodes[0].gpus[0].computeMilli: must be > 0, got 0"},
    {"GpuComputeAboveACard",
     "nodes:\n  - name: a\n    gpus:\n      - {type: L4, computeMilli: 1001}\n",
     "cluster.yaml:4: nodes[0].gpus[0].computeMilli: must be <= 1000, got 1001"},
    {"GpuBandwidthZero",
     "nodes:\n  - name: a\n    gpus:\n      - {type: L4, memoryBandwidthGBps: 0}\n",
     "cluster.yaml:4: nodes[0].gpus[0].memoryBandwidthGBps: must be > 0, got 0"},
    {"GpuNumaBelowUnknown", "nodes:\n  - name: a\n    gpus:\n      - {type: L4, numaNode: -2}\n",
     "cluster.yaml:4: nodes[0].gpus[0].numaNode: must be >= -1, got -2"},
    {"MigOnANonMigCard", "nodes:\n  - name: a\n    gpus:\n      - {type: L4, migEnabled: true}\n",
     "cluster.yaml:4: nodes[0].gpus[0].migEnabled: GPU type L4 cannot be partitioned with MIG"},
    {"MigInstancesWithoutMig",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migInstances:\n"
     "          - {profile: 1g.10gb}\n",
     "cluster.yaml:6: nodes[0].gpus[0].migInstances: MIG instances need migEnabled: true on this "
     "GPU"},
    {"UnknownMigProfile",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migEnabled: true\n"
     "        migInstances: [{profile: 1g.5gb}]\n",
     "cluster.yaml:6: nodes[0].gpus[0].migInstances[0].profile: GPU type A100-80GB has no MIG "
     "profile \"1g.5gb\"; profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, "
     "7g.80gb"},
    {"MigStartNotAllowed",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migEnabled: true\n"
     "        migInstances: [{profile: 3g.40gb, startSlot: 2}]\n",
     "cluster.yaml:6: nodes[0].gpus[0].migInstances[0].startSlot: GPU type \"A100-80GB\": MIG "
     "instance 0 (3g.40gb@2): start slice 2 is not an allowed start of 3g.40gb"},
    {"MigOverlap",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migEnabled: true\n"
     "        migInstances:\n          - {profile: 4g.40gb, startSlot: 0}\n"
     "          - {profile: 2g.20gb, startSlot: 2}\n",
     "cluster.yaml:8: nodes[0].gpus[0].migInstances[1].startSlot: GPU type \"A100-80GB\": MIG "
     "instance 1 (2g.20gb@2): overlaps the memory slices of an earlier instance"},
    {"MigCardFull",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migEnabled: true\n"
     "        migInstances:\n          - {profile: 7g.80gb}\n          - {profile: 1g.10gb}\n",
     "cluster.yaml:8: nodes[0].gpus[0].migInstances[1]: no free memory slices left for a 1g.10gb "
     "instance"},
    {"MigTooManyOfAProfile",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migEnabled: true\n"
     "        migInstances:\n          - {profile: 1g.10gb+me}\n          - {profile: "
     "1g.10gb+me}\n",
     "cluster.yaml:8: nodes[0].gpus[0].migInstances[1]: GPU type \"A100-80GB\": MIG instance 1 "
     "(1g.10gb+me@1): more than maxInstances (1) of 1g.10gb+me"},
    {"MigTwoMediaExtensions",
     "nodes:\n  - name: a\n    gpus:\n      - type: A30\n        migEnabled: true\n"
     "        migInstances:\n          - {profile: 1g.6gb+me}\n          - {profile: 2g.12gb+me}\n",
     "cluster.yaml:8: nodes[0].gpus[0].migInstances[1]: GPU type \"A30\": MIG instance 1 "
     "(2g.12gb+me@2): a second media-extension (+me) instance; the card has one"},
    {"MigAllowedStartsLeftWhenTheFirstIsTaken",
     "nodes:\n  - name: a\n    gpus:\n      - type: A100-80GB\n        migEnabled: true\n"
     "        migInstances:\n          - {profile: 3g.40gb}\n          - {profile: 3g.40gb}\n"
     "          - {profile: 3g.40gb}\n",
     "cluster.yaml:9: nodes[0].gpus[0].migInstances[2]: no free memory slices left for a 3g.40gb "
     "instance"},
    {"DuplicateUuid",
     "nodes:\n  - name: a\n    gpus: [{type: L4, uuid: GPU-1}]\n  - name: b\n"
     "    gpus:\n      - {type: L4, uuid: GPU-1}\n",
     "cluster.yaml:6: nodes[1].gpus[0].uuid: uuid GPU-1 is already used by a GPU 0"},
    {"GpuTypeNameTaken",
     "gpuTypes:\n  - {name: l4, memoryMib: 1024, smCount: 1, memoryBandwidthGBps: 1, "
     "fp16Tflops: 1}\nnodes: []\n",
     "cluster.yaml:2: gpuTypes[0]: GPU type \"l4\": name \"l4\" is already taken by GPU type "
     "\"L4\""},
    {"GpuTypeFiguresRejectedByTheCatalogue",
     "gpuTypes:\n  - name: Z\n    opaque: true\n    memoryMib: 1024\nnodes: []\n",
     "cluster.yaml:2: gpuTypes[0]: GPU type \"Z\": opaque: an opaque type carries no figures; "
     "drop opaque or the figures"},
    {"GpuTypeZeroSms", "gpuTypes:\n  - name: Z\n    smCount: 0\nnodes: []\n",
     "cluster.yaml:3: gpuTypes[0].smCount: must be > 0, got 0"},
    {"GpuTypeMigProfilesWithoutSlots",
     "gpuTypes:\n  - name: Z\n    memoryMib: 1024\n    migProfiles:\n"
     "      - {name: a, computeSlices: 1, memoryMib: 512, slotCount: 1, allowedStarts: [0]}\n"
     "nodes: []\n",
     "cluster.yaml:5: gpuTypes[0].migProfiles: MIG profiles need migMemorySlots > 0"},
    {"GpuTypeMigStartPastTheCard",
     "gpuTypes:\n  - name: Z\n    memoryMib: 1024\n    migMemorySlots: 2\n    migProfiles:\n"
     "      - {name: a, computeSlices: 1, memoryMib: 512, slotCount: 1, allowedStarts: [0, 2]}\n"
     "nodes: []\n",
     "cluster.yaml:6: gpuTypes[0].migProfiles[0].allowedStarts[1]: must be <= 1, got 2"},
    {"ModelWithoutMemory", "models:\n  - name: m\n    computeMilli: 100\nnodes: []\n",
     "cluster.yaml:2: models[0]: needs GPU memory: weightsMib + kvCacheMib + overheadMib (or "
     "weights, kvCache, overhead) must add up to more than 0"},
    {"ModelNegativeWeights", "models:\n  - name: m\n    weightsMib: -1\nnodes: []\n",
     "cluster.yaml:3: models[0].weightsMib: must be >= 0, got -1"},
    {"ModelGpusPerReplica",
     "models:\n  - {name: m, weightsMib: 1, gpusPerReplica: 17}\nnodes: []\n",
     "cluster.yaml:2: models[0].gpusPerReplica: must be <= 16, got 17"},
    {"ModelComputeOverACard",
     "models:\n  - {name: m, weightsMib: 1, computeMilli: 1500}\nnodes: []\n",
     "cluster.yaml:2: models[0].computeMilli: must be <= 1000, got 1500"},
    {"ModelSharingMode",
     "models:\n  - name: m\n    weightsMib: 1\n    sharing: [exclusive, timeslice]\nnodes: []\n",
     "cluster.yaml:4: models[0].sharing[1]: unknown sharing mode \"timeslice\"; allowed: "
     "exclusive, shared, mig"},
    {"ModelSharingEmpty", "models:\n  - name: m\n    weightsMib: 1\n    sharing: []\nnodes: []\n",
     "cluster.yaml:4: models[0].sharing: must name at least one of exclusive, shared, mig"},
    {"ModelMigProfileWithoutMig",
     "models:\n  - name: m\n    weightsMib: 1\n    sharing: [shared]\n    migProfile: 1g.10gb\n"
     "nodes: []\n",
     "cluster.yaml:5: models[0].migProfile: set, but sharing does not include mig"},
    {"DuplicateModel",
     "models:\n  - {name: m, weightsMib: 1}\n  - {name: m, weightsMib: 2}\nnodes: []\n",
     "cluster.yaml:3: models[1].name: duplicate model \"m\" (first declared on line 2)"},
    {"ReplicaOnUnknownNode",
     "nodes:\n  - {name: a, gpus: {type: L4, count: 1}}\nreplicas:\n"
     "  - {replicaId: r, node: b, gpus: [\"0\"], model: {name: m, weightsMib: 1}}\n",
     "cluster.yaml:4: replicas[0].node: unknown node \"b\"; nodes: a"},
    {"ReplicaOnUnknownGpu",
     "nodes:\n  - {name: a, gpus: {type: L4, count: 2}}\nreplicas:\n  - replicaId: r\n    node: a\n"
     "    gpus: [\"2\"]\n    model: {name: m, weightsMib: 1}\n",
     "cluster.yaml:6: replicas[0].gpus[0]: node a has no GPU \"2\"; its GPUs: 0, 1"},
    {"ReplicaGpuCountDisagreesWithModel",
     "nodes:\n  - {name: a, gpus: {type: L4, count: 2}}\nreplicas:\n  - replicaId: r\n    node: a\n"
     "    gpus: [\"0\", \"1\"]\n    model: {name: m, weightsMib: 1}\n",
     "cluster.yaml:6: replicas[0].gpus: lists 2 GPUs but model m has gpusPerReplica 1"},
    {"ReplicaUnknownModel",
     "models:\n  - {name: m1, weightsMib: 1}\nnodes:\n  - {name: a, gpus: {type: L4, count: 1}}\n"
     "replicas:\n  - {replicaId: r, node: a, gpus: [\"0\"], model: m2}\n",
     "cluster.yaml:6: replicas[0].model: unknown model \"m2\"; known models: m1"},
    {"ReplicaWithoutGpus",
     "nodes:\n  - {name: a, gpus: {type: L4, count: 1}}\nreplicas:\n"
     "  - {replicaId: r, node: a, model: {name: m, weightsMib: 1}}\n",
     "cluster.yaml:4: replicas[0].gpus: required"},
    {"DuplicateReplica",
     "nodes:\n  - {name: a, gpus: {type: L4, count: 2}}\nreplicas:\n"
     "  - {replicaId: r, node: a, gpus: [\"0\"], model: {name: m, weightsMib: 1}}\n"
     "  - {replicaId: r, node: a, gpus: [\"1\"], model: {name: m, weightsMib: 1}}\n",
     "cluster.yaml:5: replicas[1].replicaId: duplicate replica \"r\" (first on line 4)"},
    {"ReplicaNegativeActivity",
     "nodes:\n  - {name: a, gpus: {type: L4, count: 1}}\nreplicas:\n"
     "  - {replicaId: r, node: a, gpus: [\"0\"], model: {name: m, weightsMib: 1}, "
     "lastActiveSeconds: -1}\n",
     "cluster.yaml:4: replicas[0].lastActiveSeconds: must be >= 0, got -1"},
};

INSTANTIATE_TEST_SUITE_P(BadInputs, ClusterFileErrors, testing::ValuesIn(kClusterErrors),
                         [](const testing::TestParamInfo<BadInput>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace tessera::config
