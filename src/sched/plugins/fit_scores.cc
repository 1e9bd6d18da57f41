#include "sched/plugins/fit_scores.h"

#include <algorithm>
#include <cmath>

#include "sched/cluster_state.h"
#include "sched/plugins/support.h"

namespace tessera::sched {
namespace {

// Free compute is at most 1000 per GPU and 16 GPUs per option, so a memory weight above
// 16,000 makes memory decide and compute only break ties.
constexpr std::int64_t kMemoryOverCompute = 1 << 15;

// Memory (then compute) left free on the option's GPUs after placement, as one integer.
std::int64_t leftAfter(const DecisionContext& ctx, const Option& option) {
  std::int64_t memoryMib = 0;
  std::int64_t computeMilli = 0;
  for (GpuId g : optionGpus(option)) {
    const GpuEffect e = effectOn(ctx, option, g);
    memoryMib += e.freeMibAfter;
    computeMilli += e.freeComputeAfter;
  }
  return memoryMib * kMemoryOverCompute + computeMilli;
}

}  // namespace

// ---- BestFit ------------------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> BestFitScore::create(const PluginArgs& args) {
  return createWithoutArgs<BestFitScore, ScorePlugin>(args);
}

void BestFitScore::score(const DecisionContext& ctx, std::span<const Option> options,
                         std::span<std::int64_t> out) const {
  for (std::size_t i = 0; i < options.size(); ++i) out[i] = -leftAfter(ctx, options[i]);
}

void BestFitScore::normalize(std::span<std::int64_t> scores) const {
  normalizeMinMax(scores);
}

// ---- Spread -------------------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> SpreadScore::create(const PluginArgs& args) {
  return createWithoutArgs<SpreadScore, ScorePlugin>(args);
}

void SpreadScore::score(const DecisionContext& ctx, std::span<const Option> options,
                        std::span<std::int64_t> out) const {
  for (std::size_t i = 0; i < options.size(); ++i) out[i] = leftAfter(ctx, options[i]);
}

void SpreadScore::normalize(std::span<std::int64_t> scores) const {
  normalizeMinMax(scores);
}

// ---- ComputeHeadroom ----------------------------------------------------------------------

Result<std::unique_ptr<ScorePlugin>> ComputeHeadroomScore::create(const PluginArgs& args) {
  auto reader = ArgReader::open(kName, args, {"cap"});
  if (!reader) return fail(reader.error());
  auto cap = reader->number("cap", 0.8, 0.001, 1.0);
  if (!cap) return fail(cap.error());
  return std::make_unique<ComputeHeadroomScore>(*cap);
}

ComputeHeadroomScore::ComputeHeadroomScore(double cap) : capPermille_(std::llround(cap * 1000)) {}

void ComputeHeadroomScore::score(const DecisionContext& ctx, std::span<const Option> options,
                                 std::span<std::int64_t> out) const {
  for (std::size_t i = 0; i < options.size(); ++i) {
    std::int64_t worst = 100;
    for (GpuId g : optionGpus(options[i])) {
      const GpuRecord& gpu = ctx.state.gpu(g);
      const std::int64_t card = gpu.spec.computeMilli;
      const std::int64_t capMilli = card * capPermille_ / 1000;
      const std::int64_t after = std::int64_t{gpu.bookedComputeMilli} + ctx.needs.computeMilli;
      std::int64_t s = 100;
      if (after >= card) {
        s = after > capMilli ? 0 : 100;  // a cap of 1 leaves no ramp: full card is still fine
      } else if (after > capMilli) {
        s = 100 * (card - after) / (card - capMilli);
      }
      worst = std::min(worst, s);
    }
    out[i] = worst;
  }
}

}  // namespace tessera::sched
