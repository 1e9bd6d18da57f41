// Target workloads (task shapes), the FGD fragment measure, the per-node views the artifact
// policies score from, and their registration.

#include "sched/plugins/artifact_policies.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "sched/plugins/artifact_internal.h"
#include "sched/plugins/packing_gradient.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

constexpr std::string_view kWorkload = "workload";

Result<std::vector<std::string>> parseTypeNames(const std::string& where, const PluginArgs* value) {
  std::vector<std::string> names;
  if (value == nullptr || value->is_null()) return names;
  if (!value->is_array()) {
    return fail(Error::invalid(where + ": 'gpuTypes' must be a list of GPU type names"));
  }
  for (const PluginArgs& item : *value) {
    if (!item.is_string() || item.get<std::string>().empty()) {
      return fail(Error::invalid(where + ": 'gpuTypes' must hold non-empty type names"));
    }
    names.push_back(item.get<std::string>());
  }
  return names;
}

Result<TaskShape> parseShape(const std::string& where, const PluginArgs& item) {
  auto reader =
      ArgReader::open(where, item, {"cpuMilli", "gpuMilli", "gpus", "gpuTypes", "weight"});
  if (!reader) return fail(reader.error());
  if (!item.is_object()) return fail(Error::invalid(where + ": a shape must be an object"));
  if (reader->find("weight") == nullptr) {
    return fail(Error::invalid(where + ": 'weight' is required"));
  }
  auto cpu = reader->integer("cpuMilli", 0, 0, std::int64_t{1} << 40);
  if (!cpu) return fail(cpu.error());
  auto gpuMilli = reader->integer("gpuMilli", 0, 0, kArtifactMilliPerGpu);
  if (!gpuMilli) return fail(gpuMilli.error());
  auto gpus = reader->integer("gpus", 0, 0, kMaxGpusPerReplica);
  if (!gpus) return fail(gpus.error());
  if ((*gpus == 0) != (*gpuMilli == 0)) {
    return fail(Error::invalid(where +
                               ": 'gpus' and 'gpuMilli' must both be 0 (a CPU-only shape) " +
                               "or both be positive"));
  }
  auto weight = reader->number("weight", 0.0, 0.0, 1.0);
  if (!weight) return fail(weight.error());
  auto types = parseTypeNames(where, reader->find("gpuTypes"));
  if (!types) return fail(types.error());
  TaskShape shape;
  shape.cpuMilli = *cpu;
  shape.gpuMilli = static_cast<std::int32_t>(*gpuMilli);
  shape.gpus = static_cast<int>(*gpus);
  shape.gpuTypes = std::move(*types);
  shape.weight = *weight;
  return shape;
}

// CanNodeHostPodOnGpuMemory: at least `gpus` GPUs with r_i >= gpuMilli.
bool gpusFit(std::span<const std::int32_t> freeGpuMilli, const TaskShape& shape) {
  int need = shape.gpus;
  for (std::int32_t r : freeGpuMilli) {
    if (r >= shape.gpuMilli && --need <= 0) return true;
  }
  return false;
}

// Registering the artifact policies can only fail if they are registered twice: a
// programming error, not a runtime condition.
void mustRegister(Result<void> r) {
  if (r) return;
  std::fprintf(stderr, "tessera: registering the artifact policies failed: %s\n",
               r.error().message.c_str());
  std::abort();
}

}  // namespace

// ---- task shapes --------------------------------------------------------------------------

Result<std::vector<TaskShape>> parseTaskShapes(const PluginArgs& args) {
  auto reader = ArgReader::open(kWorkload, args, {kWorkload});
  if (!reader) return fail(reader.error());
  const PluginArgs* list = reader->find(kWorkload);
  if (list == nullptr || !list->is_array() || list->empty()) {
    return fail(Error::invalid("'workload' must be a non-empty list of task shapes"));
  }
  std::vector<TaskShape> shapes;
  shapes.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto shape = parseShape("workload[" + std::to_string(i) + "]", (*list)[i]);
    if (!shape) return fail(shape.error());
    shapes.push_back(std::move(*shape));
  }
  return shapes;
}

PluginArgs taskShapesToArgs(std::span<const TaskShape> shapes) {
  PluginArgs list = PluginArgs::array();
  for (const TaskShape& s : shapes) {
    PluginArgs item = {
        {"cpuMilli", s.cpuMilli}, {"gpuMilli", s.gpuMilli}, {"gpus", s.gpus}, {"weight", s.weight}};
    if (!s.gpuTypes.empty()) item["gpuTypes"] = s.gpuTypes;
    list.push_back(std::move(item));
  }
  return PluginArgs{{std::string(kWorkload), std::move(list)}};
}

Result<void> resolveTaskShapes(const model::GpuCatalog& catalog, std::vector<TaskShape>& shapes) {
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::vector<int> indices;
    for (const std::string& name : shapes[i].gpuTypes) {
      const int index = catalog.indexOf(name);
      if (index < 0) {
        std::string known;
        for (const std::string& n : catalog.names()) known += (known.empty() ? "" : ", ") + n;
        return fail(Error::invalid("workload[" + std::to_string(i) + "]: unknown GPU type '" +
                                   name + "' (known: " + known + ")"));
      }
      indices.push_back(index);
    }
    shapes[i].gpuTypeIndices = std::move(indices);
  }
  return {};
}

// ---- the fragment measure -----------------------------------------------------------------

double fgdNodeFragmentMilli(std::int64_t freeCpuMilli, std::span<const std::int32_t> freeGpuMilli,
                            int gpuType, std::span<const TaskShape> workload) {
  // The artifact's categories (pkg/utils/frag.go FragRatioDataMap), in its order.
  enum Category { kQ1LackBoth, kQ2LackGpu, kQ3Satisfied, kQ4LackCpu, kXl, kXr, kNoAccess, kCount };
  std::array<double, kCount> amount{};
  std::int64_t totalMilli = 0;
  for (std::int32_t r : freeGpuMilli) totalMilli += r;
  const double total = static_cast<double>(totalMilli);
  for (const TaskShape& m : workload) {
    const double p = m.weight;
    if (!(p >= 0 && p <= 1)) continue;  // the artifact skips a bad frequency
    const bool cpuFits = freeCpuMilli >= m.cpuMilli;
    if (m.gpuMilli == 0) {
      amount[cpuFits ? kXl : kXr] += p * total;
    } else if (!artifact::typeAccepts(m, gpuType)) {
      amount[kNoAccess] += p * total;
    } else if (gpusFit(freeGpuMilli, m)) {
      if (cpuFits) {
        // Only GPUs too small for m are fragments (the artifact files them under Q2).
        std::int64_t tooSmall = 0;
        for (std::int32_t r : freeGpuMilli) {
          if (r < m.gpuMilli) tooSmall += r;
        }
        amount[kQ2LackGpu] += p * static_cast<double>(tooSmall);
      } else {
        amount[kQ4LackCpu] += p * total;
      }
    } else {
      amount[cpuFits ? kQ2LackGpu : kQ1LackBoth] += p * total;
    }
  }
  double sum = 0;
  for (int c = 0; c < kCount; ++c) {
    if (c != kQ3Satisfied) sum += amount[static_cast<std::size_t>(c)];
  }
  return sum;
}

// ---- node views ---------------------------------------------------------------------------

namespace artifact {

bool typeAccepts(const TaskShape& shape, int gpuType) {
  if (shape.gpuTypes.empty()) return true;
  return gpuType >= 0 && std::find(shape.gpuTypeIndices.begin(), shape.gpuTypeIndices.end(),
                                   gpuType) != shape.gpuTypeIndices.end();
}

std::vector<TaskShape> matchShapeTypes(const model::GpuCatalog& catalog,
                                       std::vector<TaskShape> shapes) {
  for (TaskShape& m : shapes) {
    m.gpuTypeIndices.clear();
    for (const std::string& name : m.gpuTypes) {
      const int index = catalog.indexOf(name);
      if (index >= 0) m.gpuTypeIndices.push_back(index);
    }
    std::sort(m.gpuTypeIndices.begin(), m.gpuTypeIndices.end());
    m.gpuTypeIndices.erase(std::unique(m.gpuTypeIndices.begin(), m.gpuTypeIndices.end()),
                           m.gpuTypeIndices.end());
  }
  return shapes;
}

const NodeView& NodeViews::get(const ClusterState& state, NodeId node) {
  if (views_.size() < state.nodes().size()) views_.resize(state.nodes().size());
  NodeView& view = views_[static_cast<std::size_t>(node)];
  const std::uint64_t generation = state.node(node).generation;
  if (view.generation != generation || generation == 0) rebuild(state, node, view);
  return view;
}

void NodeViews::rebuild(const ClusterState& state, NodeId node, NodeView& view) const {
  const NodeRecord& rec = state.node(node);
  view.generation = rec.generation;
  view.freeCpuMilli = rec.freeCpuMilli();
  view.freeGpuMilli.clear();
  view.freeGpuMilliTotal = 0;
  view.gpuType = -1;
  view.firstGpu = rec.gpuIds.empty() ? -1 : rec.gpuIds.front();
  view.contiguous = true;
  for (std::size_t i = 0; i < rec.gpuIds.size(); ++i) {
    const GpuRecord& g = state.gpu(rec.gpuIds[i]);
    if (view.gpuType < 0) view.gpuType = g.typeIndex;
    view.contiguous = view.contiguous && rec.gpuIds[i] == view.firstGpu + static_cast<GpuId>(i) &&
                      g.indexInNode == static_cast<int>(i);
    view.freeGpuMilli.push_back(g.freeComputeMilli());
    view.freeGpuMilliTotal += g.freeComputeMilli();
  }
  // GpuClustering's tags: share-gpu for a one-GPU pod with less than a GPU, k-gpu otherwise.
  view.gpuPodTags = 0;
  for (ReplicaId id : rec.replicas) {
    const ReplicaRecord& r = state.replica(id);
    if (r.removed || r.placement.gpus.empty()) continue;
    const auto k = r.placement.gpus.size();
    const bool share = k == 1 && r.placement.gpus.front().computeMilli < kArtifactMilliPerGpu;
    const std::size_t bit = share ? 0 : k;
    if (bit < 32) view.gpuPodTags |= std::uint32_t{1} << bit;
  }
}

}  // namespace artifact

// ---- registration -------------------------------------------------------------------------

void registerArtifactPlugins(PluginRegistry& registry) {
  mustRegister(registry.addScore("ArtifactRandom", &artifact::createRandom));
  mustRegister(registry.addScore("ArtifactDotProd", &artifact::createDotProd));
  mustRegister(registry.addScore("ArtifactGpuClustering", &artifact::createGpuClustering));
  mustRegister(registry.addScore("ArtifactGpuPacking", &artifact::createGpuPacking));
  mustRegister(registry.addScore("ArtifactBestFit", &artifact::createBestFit));
  mustRegister(registry.addScore("ArtifactFgd", &artifact::createFgd));
  mustRegister(registry.addScore(std::string(kPackingGradientName), &createPackingGradient));
}

}  // namespace tessera::sched
