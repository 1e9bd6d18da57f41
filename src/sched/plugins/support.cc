#include "sched/plugins/support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "model/mig.h"

namespace tessera::sched {

Result<ArgReader> ArgReader::open(std::string_view plugin, const PluginArgs& args,
                                  std::initializer_list<std::string_view> known) {
  if (args.is_null()) return ArgReader(std::string(plugin), nullptr);
  if (!args.is_object()) {
    return fail(Error::invalid(std::string(plugin) + ": arguments must be an object"));
  }
  for (const auto& [key, value] : args.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return fail(Error::invalid(std::string(plugin) + ": unknown argument '" + key + "'" +
                               (list.empty() ? " (it takes none)" : " (known: " + list + ")")));
  }
  return ArgReader(std::string(plugin), &args);
}

const PluginArgs* ArgReader::find(std::string_view key) const {
  if (args_ == nullptr) return nullptr;
  auto it = args_->find(key);
  return it == args_->end() ? nullptr : &*it;
}

Result<double> ArgReader::number(std::string_view key, double fallback, double min,
                                 double max) const {
  const PluginArgs* v = find(key);
  if (v == nullptr) return fallback;
  const std::string where = plugin_ + ": argument '" + std::string(key) + "'";
  if (!v->is_number()) return fail(Error::invalid(where + " must be a number"));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    return fail(Error::invalid(where + " must be in " + formatDecimal(min, 3) + ".." +
                               formatDecimal(max, 3) + ", got " + formatDecimal(d, 3)));
  }
  return d;
}

Result<std::int64_t> ArgReader::integer(std::string_view key, std::int64_t fallback,
                                        std::int64_t min, std::int64_t max) const {
  const PluginArgs* v = find(key);
  if (v == nullptr) return fallback;
  const std::string where = plugin_ + ": argument '" + std::string(key) + "'";
  std::int64_t i = 0;
  if (v->is_number_integer()) {
    i = v->get<std::int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9.0e15) {
    i = static_cast<std::int64_t>(v->get<double>());
  } else {
    return fail(Error::invalid(where + " must be an integer"));
  }
  if (i < min || i > max) {
    return fail(Error::invalid(where + " must be in " + std::to_string(min) + ".." +
                               std::to_string(max) + ", got " + std::to_string(i)));
  }
  return i;
}

Result<std::string> ArgReader::choice(std::string_view key, std::string_view fallback,
                                      std::initializer_list<std::string_view> allowed) const {
  const PluginArgs* v = find(key);
  if (v == nullptr) return std::string(fallback);
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : " | ") + std::string(a);
  const std::string where = plugin_ + ": argument '" + std::string(key) + "'";
  if (!v->is_string()) return fail(Error::invalid(where + " must be one of " + list));
  const std::string s = v->get<std::string>();
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    return fail(Error::invalid(where + " must be one of " + list + ", got '" + s + "'"));
  }
  return s;
}

std::string formatDecimal(double value, int maxDecimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::clamp(maxDecimals, 0, 9), value);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string describeMemoryNeed(const Needs& needs) {
  std::string s = std::to_string(needs.memoryMib) + " MiB";
  if (needs.estimateMib > 0 && needs.memoryMib != needs.estimateMib) {
    const double factor =
        static_cast<double>(needs.memoryMib) / static_cast<double>(needs.estimateMib);
    s += " (" + std::to_string(needs.estimateMib) + " × " + formatDecimal(factor, 2) + ")";
  }
  return s;
}

std::string gpuLabel(const ClusterState& state, GpuId gpu) {
  const GpuRecord& g = state.gpu(gpu);
  return state.node(g.node).spec.name + "/" + g.spec.id;
}

std::int64_t memoryTakenMib(const DecisionContext& ctx, const Option& option, GpuId gpu) {
  const GpuRecord& g = ctx.state.gpu(gpu);
  switch (option.mode) {
    case model::SharingMode::kExclusive:
      return std::max<std::int64_t>(0, g.freeMemoryMib());
    case model::SharingMode::kMig:
      if (option.migProfile >= 0 && g.typeIndex >= 0) {
        const model::GpuType& type = ctx.state.catalog().at(g.typeIndex);
        const auto p = static_cast<std::size_t>(option.migProfile);
        if (p < type.migProfiles.size()) return type.migProfiles[p].memoryMib;
      }
      return ctx.needs.memoryMib;
    case model::SharingMode::kShared:
      break;
  }
  return ctx.needs.memoryMib;
}

std::int32_t computeTakenMilli(const DecisionContext& ctx, const Option& option, GpuId gpu) {
  const GpuRecord& g = ctx.state.gpu(gpu);
  switch (option.mode) {
    case model::SharingMode::kExclusive:
      return std::max<std::int32_t>(0, g.freeComputeMilli());
    case model::SharingMode::kMig:
      if (option.migProfile >= 0 && g.typeIndex >= 0) {
        const model::GpuType& type = ctx.state.catalog().at(g.typeIndex);
        const auto p = static_cast<std::size_t>(option.migProfile);
        const int slices = model::migComputeSlices(type);
        if (p < type.migProfiles.size() && slices > 0) {
          return type.migProfiles[p].computeSlices * g.spec.computeMilli / slices;
        }
      }
      return ctx.needs.computeMilli;
    case model::SharingMode::kShared:
      break;
  }
  return ctx.needs.computeMilli;
}

}  // namespace tessera::sched
