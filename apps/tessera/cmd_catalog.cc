#include "cmd_catalog.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/gpu_catalog.h"
#include "table.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

template <typename T>
json optionalJson(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

template <typename T>
std::string optionalText(const std::optional<T>& value, std::string_view unit = "") {
  if (!value) return "-";
  if constexpr (std::is_floating_point_v<T>) {
    return fmt::format("{:g}{}", *value, unit);
  } else {
    return fmt::format("{}{}", *value, unit);
  }
}

std::string joined(const std::vector<std::string>& items) {
  return items.empty() ? "-" : fmt::format("{}", fmt::join(items, ","));
}

json migProfileJson(const model::MigProfile& p) {
  return {{"name", p.name},
          {"computeSlices", p.computeSlices},
          {"memoryMib", p.memoryMib},
          {"slotCount", p.slotCount},
          {"allowedStarts", p.allowedStarts},
          {"maxInstances", p.maxInstances}};
}

json typeJson(const model::GpuType& t) {
  json profiles = json::array();
  for (const auto& p : t.migProfiles) profiles.push_back(migProfileJson(p));
  return {{"name", t.name},
          {"aliases", t.aliases},
          {"architecture", t.architecture.empty() ? json(nullptr) : json(t.architecture)},
          {"opaque", t.opaque},
          {"memoryMib", optionalJson(t.memoryMib)},
          {"smCount", optionalJson(t.smCount)},
          {"memoryBandwidthGBps", optionalJson(t.memoryBandwidthGBps)},
          {"fp16Tflops", optionalJson(t.fp16Tflops)},
          {"nvlinkGBps", optionalJson(t.nvlinkGBps)},
          {"migMemorySlots", t.migMemorySlots},
          {"migProfiles", std::move(profiles)}};
}

void printTypes(const model::GpuCatalog& catalog, std::ostream& out) {
  Table table({{"TYPE"},
               {"ARCH"},
               {"MEMORY", Align::kRight},
               {"SMS", Align::kRight},
               {"BANDWIDTH", Align::kRight},
               {"FP16", Align::kRight},
               {"NVLINK", Align::kRight},
               {"MIG PROFILES"},
               {"ALIASES"}});
  for (int i = 0; i < catalog.size(); ++i) {
    const model::GpuType& t = catalog.at(i);
    std::vector<std::string> mig;
    for (const auto& p : t.migProfiles) mig.push_back(p.name);
    table.addRow({t.name, t.architecture.empty() ? "-" : t.architecture,
                  t.memoryMib ? formatMib(*t.memoryMib) : "-", optionalText(t.smCount),
                  optionalText(t.memoryBandwidthGBps, " GB/s"),
                  optionalText(t.fp16Tflops, " TFLOPS"), optionalText(t.nvlinkGBps, " GB/s"),
                  joined(mig), joined(t.aliases)});
  }
  table.print(out);
  out << '\n'
      << catalog.size() << " GPU types. `tessera catalog --type NAME` shows one in detail.\n";
}

void printType(const model::GpuType& t, std::ostream& out) {
  out << t.name << (t.opaque ? " (undisclosed type: figures unknown)" : "") << '\n';
  Table figures({{"FIELD"}, {"VALUE"}});
  figures.addRow({"architecture", t.architecture.empty() ? "-" : t.architecture});
  figures.addRow({"aliases", joined(t.aliases)});
  figures.addRow({"memory", t.memoryMib ? formatMib(*t.memoryMib) : "-"});
  figures.addRow({"SMs", optionalText(t.smCount)});
  figures.addRow({"memory bandwidth", optionalText(t.memoryBandwidthGBps, " GB/s")});
  figures.addRow({"FP16 dense", optionalText(t.fp16Tflops, " TFLOPS")});
  figures.addRow({"NVLink", optionalText(t.nvlinkGBps, " GB/s")});
  figures.addRow({"MIG memory slices", t.migCapable() ? std::to_string(t.migMemorySlots) : "-"});
  figures.print(out, "  ");
  if (!t.migCapable()) {
    out << "\n  No MIG support.\n";
    return;
  }
  out << "\n  MIG profiles:\n";
  Table profiles({{"PROFILE"},
                  {"COMPUTE", Align::kRight},
                  {"MEMORY", Align::kRight},
                  {"SLICES", Align::kRight},
                  {"STARTS"},
                  {"MAX", Align::kRight}});
  // Compute slices are fractions of the full-card profile (7 on A100/H100), not of the
  // memory slices (8).
  int computeSlices = 1;
  for (const auto& p : t.migProfiles) computeSlices = std::max(computeSlices, p.computeSlices);
  for (const auto& p : t.migProfiles) {
    std::vector<std::string> starts;
    for (int s : p.allowedStarts) starts.push_back(std::to_string(s));
    profiles.addRow({p.name, fmt::format("{}/{}", p.computeSlices, computeSlices),
                     formatMib(p.memoryMib), std::to_string(p.slotCount), joined(starts),
                     std::to_string(p.maxInstances)});
  }
  profiles.print(out, "  ");
}

}  // namespace

int runCatalog(const CatalogOptions& options, std::ostream& out, std::ostream& err) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  const model::GpuType* one = nullptr;
  if (options.type) {
    one = catalog.find(*options.type);
    if (one == nullptr) {
      return reportError(
          err, "catalog",
          Error::invalid(fmt::format("--type: unknown GPU type '{}' (known: {})", *options.type,
                                     fmt::join(catalog.names(), ", "))));
    }
  }
  if (options.format == OutputFormat::kJson) {
    json doc;
    if (one != nullptr) {
      doc = typeJson(*one);
    } else {
      json types = json::array();
      for (int i = 0; i < catalog.size(); ++i) types.push_back(typeJson(catalog.at(i)));
      doc = {{"gpuTypes", std::move(types)}};
    }
    out << doc.dump(2) << '\n';
    return kExitOk;
  }
  if (one != nullptr) {
    printType(*one, out);
  } else {
    printTypes(catalog, out);
  }
  return kExitOk;
}

}  // namespace tessera::cli
