#include "sched/plugins/fragmentation.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "sched/cluster_state.h"
#include "sched/mig_choice.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

// Explicit weights become integers in parts per million of the total.
constexpr double kWeightScale = 1'000'000.0;
// The derived mix keeps the most common shapes covering this share of replicas (FGD's
// podPopularityThreshold), and at most kMaxShapes of them, which bounds the table.
constexpr std::int64_t kCoveragePercent = 95;
constexpr std::size_t kMaxShapes = 64;

// As deriveNeeds rounds it, so a replica's shape equals the need of a request like it.
std::int64_t withSafetyFactor(std::int64_t estimateMib, double factor) {
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(estimateMib) * factor - 1e-9));
}

}  // namespace

// ---- FitTable -----------------------------------------------------------------------------

void FragmentationScore::FitTable::build(std::span<const Entry> entries) {
  memory_.clear();
  compute_.clear();
  total_ = 0;
  for (const Entry& e : entries) {
    memory_.push_back(e.memoryMib);
    compute_.push_back(e.computeMilli);
  }
  std::sort(memory_.begin(), memory_.end());
  memory_.erase(std::unique(memory_.begin(), memory_.end()), memory_.end());
  std::sort(compute_.begin(), compute_.end());
  compute_.erase(std::unique(compute_.begin(), compute_.end()), compute_.end());
  const std::size_t cols = compute_.size() + 1;
  prefix_.assign((memory_.size() + 1) * cols, 0);
  for (const Entry& e : entries) {
    const auto i = static_cast<std::size_t>(
        std::lower_bound(memory_.begin(), memory_.end(), e.memoryMib) - memory_.begin() + 1);
    const auto j = static_cast<std::size_t>(
        std::lower_bound(compute_.begin(), compute_.end(), e.computeMilli) - compute_.begin() + 1);
    prefix_[i * cols + j] += e.weight;
    total_ += e.weight;
  }
  for (std::size_t i = 1; i <= memory_.size(); ++i) {
    for (std::size_t j = 1; j < cols; ++j) {
      prefix_[i * cols + j] +=
          prefix_[(i - 1) * cols + j] + prefix_[i * cols + j - 1] - prefix_[(i - 1) * cols + j - 1];
    }
  }
}

std::int64_t FragmentationScore::FitTable::fitting(std::int64_t memoryMib,
                                                   std::int32_t computeMilli) const {
  const auto i = static_cast<std::size_t>(
      std::upper_bound(memory_.begin(), memory_.end(), memoryMib) - memory_.begin());
  const auto j = static_cast<std::size_t>(
      std::upper_bound(compute_.begin(), compute_.end(), computeMilli) - compute_.begin());
  return prefix_[i * (compute_.size() + 1) + j];
}

// ---- construction -------------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> FragmentationScore::create(const PluginArgs& args) {
  auto reader = ArgReader::open(kName, args, {"workload"});
  if (!reader) return fail(reader.error());
  std::vector<Shape> shapes;
  if (const PluginArgs* workload = reader->find("workload")) {
    if (!workload->is_array() || workload->empty()) {
      return fail(Error::invalid(std::string(kName) +
                                 ": argument 'workload' must be a non-empty list of shapes"));
    }
    for (std::size_t i = 0; i < workload->size(); ++i) {
      const std::string where = std::string(kName) + ".workload[" + std::to_string(i) + "]";
      const PluginArgs& item = (*workload)[i];
      auto shape = ArgReader::open(where, item, {"memoryMib", "computeMilli", "gpus", "weight"});
      if (!shape) return fail(shape.error());
      if (shape->find("memoryMib") == nullptr) {
        return fail(Error::invalid(where + ": 'memoryMib' is required"));
      }
      auto memory = shape->integer("memoryMib", 0, 0, std::int64_t{1} << 40);
      if (!memory) return fail(memory.error());
      auto compute = shape->integer("computeMilli", 0, 0, 1000);
      if (!compute) return fail(compute.error());
      auto gpus = shape->integer("gpus", 1, 0, kMaxGpusPerReplica);
      if (!gpus) return fail(gpus.error());
      auto weight = shape->number("weight", 1.0, 0.0, 1e12);
      if (!weight) return fail(weight.error());
      shapes.push_back(
          {*memory, static_cast<std::int32_t>(*compute), static_cast<int>(*gpus), *weight});
    }
    const bool anyGpuWeight = std::any_of(
        shapes.begin(), shapes.end(), [](const Shape& s) { return s.gpus > 0 && s.weight > 0; });
    if (!anyGpuWeight) {
      return fail(Error::invalid(std::string(kName) +
                                 ": 'workload' needs a GPU shape (gpus > 0) with weight > 0"));
    }
  }
  return std::make_unique<FragmentationScore>(std::move(shapes));
}

FragmentationScore::FragmentationScore(std::vector<Shape> workload) : derived_(workload.empty()) {
  double sum = 0;
  for (const Shape& s : workload) {
    if (s.gpus > 0 && s.weight > 0) sum += s.weight;
  }
  std::vector<FitTable::Entry> entries;
  for (const Shape& s : workload) {
    if (s.gpus <= 0 || !(s.weight > 0)) continue;
    const auto w = static_cast<std::int64_t>(std::llround(s.weight / sum * kWeightScale));
    if (w > 0) entries.push_back({s.memoryMib, s.computeMilli, w});
  }
  fixed_.build(entries);
}

// ---- the derived mix ----------------------------------------------------------------------

const FragmentationScore::FitTable& FragmentationScore::mixFor(const ClusterState& state) const {
  if (!derived_) return fixed_;
  DerivedMix& d = mix_;
  const auto nodes = state.nodes();
  const double factor = state.options().memorySafetyFactor;
  bool changed = false;
  auto forget = [&](NodeShapes& n) {
    for (const ShapeKey& k : n.shapes) {
      auto it = d.counts.find(k);
      if (--it->second == 0) d.counts.erase(it);
    }
    n.shapes.clear();
  };
  // Nodes past the end belong to another (smaller) state seen before.
  for (std::size_t i = nodes.size(); i < d.nodes.size(); ++i) {
    forget(d.nodes[i]);
    changed = true;
  }
  d.nodes.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeShapes& mine = d.nodes[i];
    if (mine.generation == nodes[i].generation) continue;
    forget(mine);
    mine.generation = nodes[i].generation;
    for (ReplicaId r : nodes[i].replicas) {
      const Placement& p = state.replica(r).placement;
      if (p.gpus.empty()) continue;  // CPU-only: no per-GPU shape
      const GpuAssignment& a = p.gpus.front();
      mine.shapes.emplace_back(withSafetyFactor(a.estimateMib, factor), a.computeMilli);
      ++d.counts[mine.shapes.back()];
    }
    changed = true;
  }
  if (!changed) return d.table;

  d.entries.clear();
  std::int64_t total = 0;
  for (const auto& [shape, count] : d.counts) {
    d.entries.push_back({shape.first, shape.second, count});
    total += count;
  }
  // Most common first; among equals, the map's (memory, compute) order, so the mix is a
  // function of the state alone.
  std::stable_sort(d.entries.begin(), d.entries.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  std::size_t keep = 0;
  std::int64_t covered = 0;
  while (keep < d.entries.size() && keep < kMaxShapes && covered * 100 < total * kCoveragePercent) {
    covered += d.entries[keep++].weight;
  }
  d.entries.resize(keep);
  d.table.build(d.entries);
  return d.table;
}

// ---- scoring ------------------------------------------------------------------------------

std::int64_t FragmentationScore::fragment(const FitTable& mix, const DecisionContext& ctx,
                                          const GpuView& view) const {
  if (view.freeMib <= 0) return 0;
  std::int64_t unfit = mix.total();
  if (view.open) unfit -= mix.fitting(view.fitMib, view.freeComputeMilli);
  if (derived_ && ctx.needs.gpuCount > 0) {
    // The request itself is part of a derived mix, with weight 1.
    const bool fits = view.open && ctx.needs.memoryMib <= view.fitMib &&
                      ctx.needs.computeMilli <= view.freeComputeMilli;
    if (!fits) unfit += 1;
  }
  return view.freeMib * unfit;
}

std::int64_t FragmentationScore::gpuFragment(const DecisionContext& ctx, GpuId gpu) const {
  const GpuRecord& g = ctx.state.gpu(gpu);
  GpuView v;
  v.freeMib = std::max<std::int64_t>(0, g.freeMemoryMib());
  v.fitMib = g.spec.migEnabled ? ctx.state.placeableMemoryMib(gpu) : v.freeMib;
  v.freeComputeMilli = std::max<std::int32_t>(0, g.freeComputeMilli());
  v.open = !g.exclusive && (g.spec.timeSlicingReplicas <= 0 ||
                            static_cast<int>(g.replicas.size()) < g.spec.timeSlicingReplicas);
  return fragment(mixFor(ctx.state), ctx, v);
}

void FragmentationScore::score(const DecisionContext& ctx, std::span<const Option> options,
                               std::span<std::int64_t> out) const {
  const FitTable& mix = mixFor(ctx.state);
  for (std::size_t i = 0; i < options.size(); ++i) {
    const Option& option = options[i];
    std::int64_t raw = 0;
    for (GpuId g : optionGpus(option)) {
      const GpuRecord& gpu = ctx.state.gpu(g);
      const GpuEffect e = effectOn(ctx, option, g);
      const int limit = gpu.spec.timeSlicingReplicas;
      const int replicas = static_cast<int>(gpu.replicas.size());

      GpuView before;
      before.freeMib = e.freeMibBefore;
      before.freeComputeMilli = e.freeComputeBefore;
      before.open = !gpu.exclusive && (limit <= 0 || replicas < limit);
      GpuView after;
      after.freeMib = e.freeMibAfter;
      after.freeComputeMilli = e.freeComputeAfter;
      after.open =
          option.mode != model::SharingMode::kExclusive && (limit <= 0 || replicas + 1 < limit);
      if (gpu.spec.migEnabled) {
        before.fitMib = ctx.state.placeableMemoryMib(g);
        std::optional<MigChoice> choice;
        if (option.migProfile >= 0) {
          choice = MigChoice{option.migProfile, option.migStart, option.migCreates};
        } else {
          choice = chooseMigSlice(ctx.state, g, ctx.request, ctx.needs);
        }
        after.fitMib = choice ? migPlaceableAfterMib(ctx.state, g, *choice) : 0;
      } else {
        before.fitMib = before.freeMib;
        after.fitMib = after.freeMib;
      }
      raw += fragment(mix, ctx, before) - fragment(mix, ctx, after);
    }
    out[i] = raw;
  }
}

void FragmentationScore::normalize(std::span<std::int64_t> scores) const {
  normalizeMinMax(scores);
}

}  // namespace tessera::sched
