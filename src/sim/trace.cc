#include "sim/trace.h"

#include <unordered_set>

#include "sim/csv.h"

namespace tessera::sim {
namespace {

std::string knownTypes(const model::GpuCatalog& catalog) {
  std::string out;
  for (int i = 0; i < catalog.size(); ++i) {
    const model::GpuType& t = catalog.at(i);
    out += (out.empty() ? "" : ", ") + t.name;
    // The trace's spellings are aliases; show the short ones so a user sees "V100M16" too.
    for (const auto& alias : t.aliases) {
      if (alias.size() <= 8 && alias.find(' ') == std::string::npos) out += "/" + alias;
    }
  }
  return out;
}

// Resolves one trace type name; the error names the row and column.
Result<std::string> resolveType(const CsvTable& table, const CsvRow& row, int column,
                                std::string_view name, const model::GpuCatalog& catalog) {
  const model::GpuType* type = catalog.find(name);
  if (type == nullptr) {
    return fail(table.error(
        row, column,
        "unknown GPU type '" + std::string(name) + "' (known: " + knownTypes(catalog) + ")"));
  }
  return type->name;
}

}  // namespace

Result<std::vector<model::NodeSpec>> parseNodeList(std::string_view text, std::string label,
                                                   const model::GpuCatalog& catalog) {
  auto table = parseCsv(text, std::move(label));
  if (!table) return fail(table.error());
  int cols[5];
  const char* names[5] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
  for (int i = 0; i < 5; ++i) {
    auto c = table->requireColumn(names[i]);
    if (!c) return fail(c.error());
    cols[i] = *c;
  }
  std::vector<model::NodeSpec> nodes;
  nodes.reserve(table->rows.size());
  std::unordered_set<std::string> seen;
  for (const CsvRow& row : table->rows) {
    model::NodeSpec node;
    node.name = row.fields[static_cast<std::size_t>(cols[0])];
    if (node.name.empty()) return fail(table->error(row, cols[0], "empty node name"));
    if (!seen.insert(node.name).second) {
      return fail(table->error(row, cols[0], "duplicate node " + node.name));
    }
    auto cpu = table->integer(row, cols[1], 0, std::int64_t{1} << 40);
    if (!cpu) return fail(cpu.error());
    auto mem = table->integer(row, cols[2], 0, std::int64_t{1} << 40);
    if (!mem) return fail(mem.error());
    auto gpus = table->integer(row, cols[3], 0, 64);
    if (!gpus) return fail(gpus.error());
    node.cpuMilli = *cpu;
    node.hostMemoryMib = *mem;
    const std::string& modelName = row.fields[static_cast<std::size_t>(cols[4])];
    if (*gpus > 0) {
      if (modelName.empty()) {
        return fail(table->error(row, cols[4], "empty GPU type on a node with GPUs"));
      }
      auto type = resolveType(*table, row, cols[4], modelName, catalog);
      if (!type) return fail(type.error());
      for (std::int64_t i = 0; i < *gpus; ++i) {
        model::GpuSpec gpu;
        gpu.id = std::to_string(i);
        gpu.type = *type;
        node.gpus.push_back(std::move(gpu));
      }
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<std::vector<model::NodeSpec>> readNodeList(const std::string& path,
                                                  const model::GpuCatalog& catalog) {
  auto text = readTextFile(path);
  if (!text) return fail(text.error());
  return parseNodeList(*text, path, catalog);
}

Result<std::vector<TracePod>> parsePodList(std::string_view text, std::string label,
                                           const model::GpuCatalog& catalog) {
  auto table = parseCsv(text, std::move(label));
  if (!table) return fail(table.error());
  int cols[5];
  const char* names[5] = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"};
  for (int i = 0; i < 5; ++i) {
    auto c = table->requireColumn(names[i]);
    if (!c) return fail(c.error());
    cols[i] = *c;
  }
  const int specCol = table->column("gpu_spec");  // absent in the 5-column files
  std::vector<TracePod> pods;
  pods.reserve(table->rows.size());
  std::unordered_set<std::string> seen;
  for (const CsvRow& row : table->rows) {
    TracePod pod;
    pod.name = row.fields[static_cast<std::size_t>(cols[0])];
    if (pod.name.empty()) return fail(table->error(row, cols[0], "empty pod name"));
    if (!seen.insert(pod.name).second) {
      return fail(table->error(row, cols[0], "duplicate pod " + pod.name));
    }
    auto cpu = table->integer(row, cols[1], 0, std::int64_t{1} << 40);
    if (!cpu) return fail(cpu.error());
    auto mem = table->integer(row, cols[2], 0, std::int64_t{1} << 40);
    if (!mem) return fail(mem.error());
    auto k = table->integer(row, cols[3], 0, 16);
    if (!k) return fail(k.error());
    auto g = table->integer(row, cols[4], 0, 1000);
    if (!g) return fail(g.error());
    pod.cpuMilli = *cpu;
    pod.memoryMib = *mem;
    pod.gpus = static_cast<int>(*k);
    pod.gpuMilli = static_cast<std::int32_t>(*g);
    if (pod.gpus == 0 && pod.gpuMilli != 0) {
      return fail(table->error(row, cols[4],
                               "must be 0 when num_gpu is 0, got " + std::to_string(pod.gpuMilli)));
    }
    if (pod.gpus > 0 && pod.gpuMilli == 0) {
      return fail(table->error(row, cols[4], "must be 1..1000 when num_gpu > 0, got 0"));
    }
    if (pod.gpus > 1 && pod.gpuMilli != 1000) {
      return fail(table->error(
          row, cols[4],
          "a multi-GPU task must take whole GPUs (1000), got " + std::to_string(pod.gpuMilli)));
    }
    if (specCol >= 0) {
      pod.gpuSpec = row.fields[static_cast<std::size_t>(specCol)];
      std::size_t pos = 0;
      while (!pod.gpuSpec.empty() && pos <= pod.gpuSpec.size()) {
        std::size_t bar = pod.gpuSpec.find('|', pos);
        if (bar == std::string::npos) bar = pod.gpuSpec.size();
        const std::string_view part = std::string_view(pod.gpuSpec).substr(pos, bar - pos);
        if (part.empty()) {
          return fail(table->error(row, specCol, "empty GPU type in \"" + pod.gpuSpec + "\""));
        }
        auto type = resolveType(*table, row, specCol, part, catalog);
        if (!type) return fail(type.error());
        pod.gpuTypes.push_back(*type);
        pos = bar + 1;
      }
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

Result<std::vector<TracePod>> readPodList(const std::string& path,
                                          const model::GpuCatalog& catalog) {
  auto text = readTextFile(path);
  if (!text) return fail(text.error());
  return parsePodList(*text, path, catalog);
}

std::int64_t gpuCapacityMilli(const std::vector<model::NodeSpec>& nodes) {
  std::int64_t total = 0;
  for (const auto& n : nodes) {
    for (const auto& g : n.gpus) total += g.computeMilli;
  }
  return total;
}

std::string traceNameOf(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (name.ends_with(".csv")) name.remove_suffix(4);
  constexpr std::string_view kPrefix = "openb_pod_list_";
  if (name.starts_with(kPrefix)) name.remove_prefix(kPrefix.size());
  return std::string(name);
}

}  // namespace tessera::sim
