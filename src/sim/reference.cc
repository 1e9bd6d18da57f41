#include "sim/reference.h"

#include <charconv>
#include <unordered_map>

#include "sim/csv.h"

namespace tessera::sim {
namespace {

// The seed columns of a reference file ("seed42" ...), as (column, seed) pairs.
Result<std::vector<std::pair<int, int>>> seedColumns(const CsvTable& t) {
  std::vector<std::pair<int, int>> out;
  for (std::size_t i = 1; i < t.header.size(); ++i) {
    const std::string& h = t.header[i];
    int seed = 0;
    auto [ptr, ec] =
        std::from_chars(h.data() + std::min<std::size_t>(4, h.size()), h.data() + h.size(), seed);
    if (!h.starts_with("seed") || ec != std::errc() || ptr != h.data() + h.size()) {
      return fail(Error::invalid(t.label + ":1: column " + h + ": expected seed<N>"));
    }
    out.emplace_back(static_cast<int>(i), seed);
  }
  if (out.empty()) return fail(Error::invalid(t.label + ":1: no seed columns"));
  return out;
}

std::string seedList(const std::vector<int>& seeds) {
  std::string s;
  for (int seed : seeds) s += (s.empty() ? "" : ", ") + std::to_string(seed);
  return s;
}

}  // namespace

Result<std::span<const int>> ArrivalOrders::forSeed(int seed) const {
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (seeds[i] == seed) return std::span<const int>(orders[i]);
  }
  return fail(Error::notFound(label + ": no arrival order for seed " + std::to_string(seed) +
                              " (seeds: " + seedList(seeds) + ")"));
}

Result<ArrivalOrders> readArrivalOrders(const std::string& path) {
  auto t = readCsv(path);
  if (!t) return fail(t.error());
  auto cols = seedColumns(*t);
  if (!cols) return fail(cols.error());
  ArrivalOrders out;
  out.label = path;
  for (const auto& [c, seed] : *cols) out.seeds.push_back(seed);
  out.orders.resize(cols->size());
  for (const CsvRow& row : t->rows) {
    auto seq = t->integer(row, 0, 0, 1 << 30);
    if (!seq) return fail(seq.error());
    for (std::size_t s = 0; s < cols->size(); ++s) {
      const int c = (*cols)[s].first;
      if (row.fields[static_cast<std::size_t>(c)].empty()) continue;
      auto& order = out.orders[s];
      if (static_cast<std::int64_t>(order.size()) != *seq) {
        return fail(t->error(row, c, "sequence has a gap before position " + std::to_string(*seq)));
      }
      auto index = t->integer(row, c, 0, 1 << 30);
      if (!index) return fail(index.error());
      order.push_back(static_cast<int>(*index));
    }
  }
  return out;
}

Result<std::vector<std::int64_t>> NodeRanks::forSeed(int seed,
                                                     std::span<const std::string> nodeNames) const {
  std::size_t s = 0;
  while (s < seeds.size() && seeds[s] != seed) ++s;
  if (s == seeds.size()) {
    return fail(Error::notFound(label + ": no node ranks for seed " + std::to_string(seed) +
                                " (seeds: " + seedList(seeds) + ")"));
  }
  std::unordered_map<std::string_view, int> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], static_cast<int>(i));
  std::vector<std::int64_t> out;
  out.reserve(nodeNames.size());
  for (const std::string& name : nodeNames) {
    auto it = index.find(name);
    if (it == index.end()) {
      return fail(Error::invalid(label + ": node " + name + " of the node list has no rank"));
    }
    out.push_back(ranks[s][static_cast<std::size_t>(it->second)]);
  }
  return out;
}

Result<NodeRanks> readNodeRanks(const std::string& path) {
  auto t = readCsv(path);
  if (!t) return fail(t.error());
  auto cols = seedColumns(*t);
  if (!cols) return fail(cols.error());
  NodeRanks out;
  out.label = path;
  for (const auto& [c, seed] : *cols) out.seeds.push_back(seed);
  out.ranks.resize(cols->size());
  for (const CsvRow& row : t->rows) {
    out.nodes.push_back(row.fields[0]);
    for (std::size_t s = 0; s < cols->size(); ++s) {
      auto rank = t->integer(row, (*cols)[s].first, 0, 1 << 30);
      if (!rank) return fail(rank.error());
      out.ranks[s].push_back(static_cast<int>(*rank));
    }
  }
  return out;
}

Result<std::vector<ExpectedRun>> readExpectedResults(const std::string& path) {
  auto t = readCsv(path);
  if (!t) return fail(t.error());
  int keys[4];
  const char* names[4] = {"workload", "sc_policy", "tune", "seed"};
  for (int i = 0; i < 4; ++i) {
    auto c = t->requireColumn(names[i]);
    if (!c) return fail(c.error());
    keys[i] = *c;
  }
  std::array<int, kBuckets> bucketCols{};
  for (int k = 0; k < kBuckets; ++k)
    bucketCols[static_cast<std::size_t>(k)] = t->column(std::to_string(k));
  std::vector<ExpectedRun> out;
  out.reserve(t->rows.size());
  for (const CsvRow& row : t->rows) {
    ExpectedRun run;
    run.workload = row.fields[static_cast<std::size_t>(keys[0])];
    run.policy = row.fields[static_cast<std::size_t>(keys[1])];
    auto seed = t->integer(row, keys[3], 0, std::int64_t{1} << 40);
    if (!seed) return fail(seed.error());
    run.seed = static_cast<int>(*seed);
    const std::string& tune = row.fields[static_cast<std::size_t>(keys[2])];
    try {
      run.tune = std::stod(tune);
    } catch (const std::exception&) {
      return fail(t->error(row, keys[2], "expected a number, got \"" + tune + "\""));
    }
    for (int k = 0; k < kBuckets; ++k) {
      const int c = bucketCols[static_cast<std::size_t>(k)];
      if (c < 0) continue;
      const std::string& cell = row.fields[static_cast<std::size_t>(c)];
      if (cell.empty()) continue;
      double v = 0;
      auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
      if (ec != std::errc() || ptr != cell.data() + cell.size()) {
        return fail(t->error(row, c, "expected a number, got \"" + cell + "\""));
      }
      run.values[static_cast<std::size_t>(k)] = v;
    }
    out.push_back(std::move(run));
  }
  return out;
}

std::string artifactPolicyId(std::string_view policy) {
  if (policy == "random") return "01-Random";
  if (policy == "dotprod") return "02-DotProd";
  if (policy == "clustering") return "03-GpuClustering";
  if (policy == "packing") return "04-GpuPacking";
  if (policy == "bestfit") return "05-BestFit";
  if (policy == "fgd") return "06-FGD";
  return {};
}

std::string arrivalOrderPath(const std::string& referenceDir, const std::string& trace) {
  return referenceDir + "/arrival_order/openb_pod_list_" + trace + ".csv";
}

std::string nodeRankPath(const std::string& referenceDir, const std::string& trace) {
  return referenceDir + "/node_tiebreak_rank/openb_pod_list_" + trace + ".csv";
}

}  // namespace tessera::sim
