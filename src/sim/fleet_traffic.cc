#include "sim/fleet_traffic.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>

#include "sim/csv.h"

namespace tessera::sim {
Result<std::map<std::string, std::vector<QpsPoint>>> parseQpsByContainer(
    std::string_view text, const std::string& label, std::string_view requestType) {
  auto table = parseCsv(text, label);
  if (!table) return fail(table.error());
  auto ts = table->requireColumn("timestamp_anon");
  if (!ts) return fail(ts.error());
  auto value = table->requireColumn("value");
  if (!value) return fail(value.error());
  auto container = table->requireColumn("container_ip");
  if (!container) return fail(container.error());
  const int type = table->column("request_type");
  std::map<std::string, std::map<double, double>> sums;
  double first = 0;
  bool any = false;
  for (const CsvRow& row : table->rows) {
    if (!requestType.empty() && type >= 0 &&
        row.fields[static_cast<std::size_t>(type)] != requestType) {
      continue;
    }
    auto at = table->nonNegative(row, *ts, "seconds");
    if (!at) return fail(at.error());
    auto v = table->nonNegative(row, *value, "requests per second");
    if (!v) return fail(v.error());
    const std::string& id = row.fields[static_cast<std::size_t>(*container)];
    if (id.empty()) return fail(table->error(row, *container, "empty container id"));
    sums[id][*at] += *v;
    first = any ? std::min(first, *at) : *at;
    any = true;
  }
  if (!any) {
    return fail(Error::invalid(label + ": no rows" +
                               (requestType.empty()
                                    ? std::string()
                                    : " of request_type \"" + std::string(requestType) + "\"")));
  }
  std::map<std::string, std::vector<QpsPoint>> out;
  for (const auto& [id, points] : sums) {
    if (points.size() < 2) continue;  // one sample is no shape
    std::vector<QpsPoint>& series = out[id];
    series.reserve(points.size() + 1);
    // Held at 0 from the file's first timestamp to the container's first sample.
    if (points.begin()->first > first) series.push_back({0, 0});
    for (const auto& [at, v] : points) series.push_back({at - first, v});
  }
  if (out.empty()) return fail(Error::invalid(label + ": no container has two samples"));
  return out;
}

Result<std::map<std::string, std::vector<QpsPoint>>> readQpsByContainer(
    const std::string& path, std::string_view requestType) {
  auto text = readCsvOrTarGz(path);
  if (!text) return fail(text.error());
  return parseQpsByContainer(*text, path, requestType);
}

std::vector<std::string> LoraTrace::byVolume() const {
  std::vector<std::string> ids;
  ids.reserve(arrivals.size());
  for (const auto& [id, a] : arrivals) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(), [this](const std::string& a, const std::string& b) {
    return arrivals.at(a).size() > arrivals.at(b).size();
  });
  return ids;
}

Result<LoraTrace> parseLoraTrace(std::string_view text, const std::string& label) {
  auto table = parseCsv(text, label);
  if (!table) return fail(table.error());
  auto when = table->requireColumn("gmt_create");
  if (!when) return fail(when.error());
  auto checkpoint = table->requireColumn("checkpoint_model_version_id");
  if (!checkpoint) return fail(checkpoint.error());
  std::vector<std::pair<Micros, std::string>> rows;
  rows.reserve(table->rows.size());
  for (const CsvRow& row : table->rows) {
    Micros at = 0;
    const std::string& w = row.fields[static_cast<std::size_t>(*when)];
    if (!parseDateTime(w, at)) {
      return fail(
          table->error(row, *when, "expected a time like 2024-11-15 16:57:50, got \"" + w + "\""));
    }
    const std::string& id = row.fields[static_cast<std::size_t>(*checkpoint)];
    rows.emplace_back(at, id);
  }
  if (rows.empty()) return fail(Error::invalid(label + ": no requests"));
  Micros first = rows.front().first, last = first;
  for (const auto& [at, id] : rows) {
    first = std::min(first, at);
    last = std::max(last, at);
  }
  LoraTrace t;
  t.spanSeconds = static_cast<double>(last - first) / 1e6;
  for (const auto& [at, id] : rows) {
    if (id.empty()) {
      ++t.withoutCheckpoint;
      continue;
    }
    t.arrivals[id].push_back(static_cast<double>(at - first) / 1e6);
  }
  if (t.arrivals.empty()) return fail(Error::invalid(label + ": no request names a checkpoint"));
  for (auto& [id, a] : t.arrivals) std::sort(a.begin(), a.end());
  return t;
}

Result<LoraTrace> readLoraTrace(const std::string& path) {
  auto text = readCsvOrTarGz(path);
  if (!text) return fail(text.error());
  return parseLoraTrace(*text, path);
}

Result<ServingTrace> traceFromArrivals(const std::vector<double>& arrivals, double compress,
                                       const ServingTrace& tokens, std::uint64_t seed,
                                       std::string name) {
  if (arrivals.empty()) return fail(Error::invalid(name + ": no arrivals"));
  if (tokens.requests.empty())
    return fail(Error::invalid("no requests to draw token lengths from"));
  if (!(compress > 0) || !std::isfinite(compress)) {
    return fail(Error::invalid("the compression must be a number > 0"));
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, tokens.requests.size() - 1);
  ServingTrace t;
  t.name = std::move(name);
  t.requests.reserve(arrivals.size());
  const double first = *std::min_element(arrivals.begin(), arrivals.end());
  for (double a : arrivals) {
    ServingRequest r = tokens.requests[pick(rng)];
    r.arrivalUs = static_cast<Micros>(std::llround((a - first) / compress * 1e6));
    r.line = static_cast<int>(t.requests.size()) + 1;
    t.requests.push_back(std::move(r));
  }
  std::stable_sort(
      t.requests.begin(), t.requests.end(),
      [](const ServingRequest& a, const ServingRequest& b) { return a.arrivalUs < b.arrivalUs; });
  return t;
}

Result<std::vector<double>> readLatencySeconds(const std::string& path) {
  auto text = readCsvOrTarGz(path);
  if (!text) return fail(text.error());
  auto table = parseCsv(*text, path);
  if (!table) return fail(table.error());
  auto value = table->requireColumn("value");
  if (!value) return fail(value.error());
  std::vector<double> out;
  out.reserve(table->rows.size());
  for (const CsvRow& row : table->rows) {
    auto v = table->nonNegative(row, *value, "milliseconds");
    if (!v) return fail(v.error());
    out.push_back(*v / 1000);
  }
  if (out.empty()) return fail(Error::invalid(path + ": no latency samples"));
  return out;
}

}  // namespace tessera::sim
