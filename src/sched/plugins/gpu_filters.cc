#include "sched/plugins/gpu_filters.h"

#include <cmath>

#include "sched/cluster_state.h"
#include "sched/mig_choice.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

// Bandwidth is booked as a double sum; the same tolerance as ClusterState's own check keeps
// a replica that exactly fills the card from being rejected by rounding.
constexpr double kBandwidthSlackGBps = 1e-9;

bool onlyExclusive(const model::PlacementRequest& request) {
  return !model::allows(request.model.sharing, model::SharingMode::kShared);
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

// ---- GpuType ------------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> GpuTypeFilter::create(const PluginArgs& args) {
  return createWithoutArgs<GpuTypeFilter, FilterPlugin>(args);
}

const std::vector<std::uint8_t>& GpuTypeFilter::allowedTypes(const DecisionContext& ctx) const {
  const model::GpuCatalog& catalog = ctx.state.catalog();
  if (cachedCatalog_ == &catalog && cachedCatalogSize_ == catalog.size() &&
      cachedNames_ == ctx.request.gpuTypes) {
    return allowed_;
  }
  cachedCatalog_ = &catalog;
  cachedCatalogSize_ = catalog.size();
  cachedNames_ = ctx.request.gpuTypes;
  allowed_.assign(static_cast<std::size_t>(catalog.size()), 0);
  for (const std::string& name : cachedNames_) {
    const int index = catalog.indexOf(name);
    if (index >= 0) allowed_[static_cast<std::size_t>(index)] = 1;
  }
  return allowed_;
}

bool GpuTypeFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (ctx.request.gpuTypes.empty()) return true;
  const std::vector<std::uint8_t>& allowed = allowedTypes(ctx);
  const int type = ctx.state.gpu(gpu).typeIndex;
  return type >= 0 && static_cast<std::size_t>(type) < allowed.size() &&
         allowed[static_cast<std::size_t>(type)] != 0;
}

std::string GpuTypeFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (passGpu(ctx, gpu)) return {};
  const model::GpuCatalog& catalog = ctx.state.catalog();
  const GpuRecord& g = ctx.state.gpu(gpu);
  const std::string have = g.typeIndex >= 0 && g.typeIndex < catalog.size()
                               ? catalog.at(g.typeIndex).name
                               : "'" + g.spec.type + "' (not in the catalogue)";
  std::string why =
      "GPU type " + have + " is not among the requested " + joinNames(ctx.request.gpuTypes);
  std::vector<std::string> unknown;
  for (const std::string& name : ctx.request.gpuTypes) {
    if (catalog.indexOf(name) < 0) unknown.push_back(name);
  }
  if (!unknown.empty()) why += " (unknown to the catalogue: " + joinNames(unknown) + ")";
  return why;
}

// ---- MemoryFit ----------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> MemoryFitFilter::create(const PluginArgs& args) {
  return createWithoutArgs<MemoryFitFilter, FilterPlugin>(args);
}

bool MemoryFitFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  const GpuRecord& g = ctx.state.gpu(gpu);
  const std::int64_t need = ctx.needs.memoryMib;
  if (g.exclusive) return false;
  if (g.spec.migEnabled) return ctx.state.placeableMemoryMib(gpu) >= need;
  if (g.spec.memoryMib == 0 && need > 0) return false;
  if (onlyExclusive(ctx.request) && !g.replicas.empty()) return false;
  return g.freeMemoryMib() >= need;
}

std::string MemoryFitFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (passGpu(ctx, gpu)) return {};
  const GpuRecord& g = ctx.state.gpu(gpu);
  const std::string need = describeMemoryNeed(ctx.needs);
  if (g.exclusive) return "GPU is held exclusively by another replica";
  if (g.spec.migEnabled) {
    return "needs " + need + ", the largest free or creatable MIG instance has " +
           std::to_string(ctx.state.placeableMemoryMib(gpu)) + " MiB";
  }
  if (g.spec.memoryMib == 0) {
    return "needs " + need + ", GPU memory capacity is unknown (declare memoryMib)";
  }
  if (onlyExclusive(ctx.request) && !g.replicas.empty()) {
    return "the request allows only exclusive use, GPU holds " + std::to_string(g.replicas.size()) +
           " replica(s)";
  }
  std::string why = "needs " + need + ", " + std::to_string(g.freeMemoryMib()) + " MiB free of " +
                    std::to_string(g.spec.memoryMib) + " MiB";
  if (g.foreignMib > 0) {
    why += " (" + std::to_string(g.foreignMib) + " MiB used by processes outside Tessera)";
  }
  return why;
}

// ---- ComputeCap ---------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> ComputeCapFilter::create(const PluginArgs& args) {
  auto reader = ArgReader::open(kName, args, {"cap", "mode"});
  if (!reader) return fail(reader.error());
  auto cap = reader->number("cap", 0.8, 0.001, 1.0);
  if (!cap) return fail(cap.error());
  auto mode = reader->choice("mode", "soft", {"hard", "soft"});
  if (!mode) return fail(mode.error());
  return std::make_unique<ComputeCapFilter>(*cap, *mode == "hard");
}

ComputeCapFilter::ComputeCapFilter(double cap, bool hard)
    : cap_(cap), capPermille_(std::llround(cap * 1000.0)), hard_(hard) {}

std::int32_t ComputeCapFilter::limitMilli(std::int32_t cardMilli) const {
  if (!hard_) return cardMilli;
  return static_cast<std::int32_t>(static_cast<std::int64_t>(cardMilli) * capPermille_ / 1000);
}

bool ComputeCapFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  const GpuRecord& g = ctx.state.gpu(gpu);
  return static_cast<std::int64_t>(g.bookedComputeMilli) + ctx.needs.computeMilli <=
         limitMilli(g.spec.computeMilli);
}

std::string ComputeCapFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (passGpu(ctx, gpu)) return {};
  const GpuRecord& g = ctx.state.gpu(gpu);
  std::string why = "needs " + std::to_string(ctx.needs.computeMilli) + " compute milli, " +
                    std::to_string(g.bookedComputeMilli) + " of " +
                    std::to_string(g.spec.computeMilli) + " booked";
  if (hard_) {
    why += "; cap " + formatDecimal(cap_, 3) + " allows " +
           std::to_string(limitMilli(g.spec.computeMilli));
  }
  return why;
}

// ---- Bandwidth ----------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> BandwidthFilter::create(const PluginArgs& args) {
  return createWithoutArgs<BandwidthFilter, FilterPlugin>(args);
}

bool BandwidthFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  const GpuRecord& g = ctx.state.gpu(gpu);
  const double capacity = g.spec.memoryBandwidthGBps;
  const double need = ctx.needs.bandwidthGBps;
  if (!(capacity > 0) || !(need > 0)) return true;
  return g.bookedBandwidthGBps + need <= capacity + kBandwidthSlackGBps;
}

std::string BandwidthFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (passGpu(ctx, gpu)) return {};
  const GpuRecord& g = ctx.state.gpu(gpu);
  return "needs " + formatDecimal(ctx.needs.bandwidthGBps, 1) + " GB/s memory bandwidth, " +
         formatDecimal(g.bookedBandwidthGBps, 1) + " of " +
         formatDecimal(g.spec.memoryBandwidthGBps, 1) + " GB/s booked";
}

// ---- MigSlice -----------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> MigSliceFilter::create(const PluginArgs& args) {
  return createWithoutArgs<MigSliceFilter, FilterPlugin>(args);
}

bool MigSliceFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  const model::SharingModes modes = ctx.request.model.sharing;
  if (ctx.state.gpu(gpu).spec.migEnabled) {
    return model::allows(modes, model::SharingMode::kMig) &&
           chooseMigSlice(ctx.state, gpu, ctx.request, ctx.needs).has_value();
  }
  return model::allows(modes, model::SharingMode::kShared) ||
         model::allows(modes, model::SharingMode::kExclusive);
}

std::string MigSliceFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (passGpu(ctx, gpu)) return {};
  const GpuRecord& g = ctx.state.gpu(gpu);
  if (!g.spec.migEnabled) return "GPU is not in MIG mode; the request allows only MIG slices";
  if (!model::allows(ctx.request.model.sharing, model::SharingMode::kMig)) {
    return "GPU is in MIG mode; the request does not allow MIG slices";
  }
  const MigAvailability a = migAvailability(ctx.state, gpu);
  std::string why = "no free or creatable MIG instance with at least " +
                    std::to_string(ctx.needs.memoryMib) + " MiB";
  if (!ctx.request.model.migProfile.empty()) {
    why += " and at least profile " + ctx.request.model.migProfile;
  }
  if (g.typeIndex >= 0 && g.typeIndex < ctx.state.catalog().size()) {
    why += " on " + ctx.state.catalog().at(g.typeIndex).name;
  }
  why += " (largest free instance " + std::to_string(a.largestFreeMib) +
         " MiB, largest creatable " + std::to_string(a.largestCreatableMib) + " MiB)";
  return why;
}

// ---- TimeSlicing --------------------------------------------------------------------------

Result<std::unique_ptr<FilterPlugin>> TimeSlicingFilter::create(const PluginArgs& args) {
  return createWithoutArgs<TimeSlicingFilter, FilterPlugin>(args);
}

bool TimeSlicingFilter::passGpu(const DecisionContext& ctx, GpuId gpu) const {
  const GpuRecord& g = ctx.state.gpu(gpu);
  return g.spec.timeSlicingReplicas <= 0 ||
         static_cast<int>(g.replicas.size()) < g.spec.timeSlicingReplicas;
}

std::string TimeSlicingFilter::whyGpu(const DecisionContext& ctx, GpuId gpu) const {
  if (passGpu(ctx, gpu)) return {};
  const GpuRecord& g = ctx.state.gpu(gpu);
  return "time-slicing limit reached: " + std::to_string(g.replicas.size()) + " of " +
         std::to_string(g.spec.timeSlicingReplicas) + " replicas";
}

}  // namespace tessera::sched
