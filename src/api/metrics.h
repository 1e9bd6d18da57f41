#pragma once
// A small Prometheus text-format (version 0.0.4) writer and the two instrument kinds the
// server keeps over time: counters and histograms with fixed buckets, each a family keyed by
// one label set. Gauges are computed from the cluster state at scrape time instead.
//
// Threading: the instruments are safe from any thread (one mutex per family); the writer is
// a plain string builder.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::api {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Escapes a label value (backslash, double quote, newline) as the text format requires.
std::string escapeLabelValue(std::string_view value);

class MetricsWriter {
 public:
  // # HELP and # TYPE lines; call once per family, before its samples.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const Labels& labels, double value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help);
  void add(const Labels& labels, double delta = 1);
  double value(const Labels& labels) const;
  void write(MetricsWriter& w) const;

 private:
  std::string name_, help_;
  mutable std::mutex mu_;
  std::map<Labels, double> values_;
};

class HistogramFamily {
 public:
  // `bounds`: the buckets' upper bounds in ascending order (+Inf is implied).
  HistogramFamily(std::string name, std::string help, std::vector<double> bounds);
  void observe(const Labels& labels, double value);
  std::uint64_t count(const Labels& labels) const;
  void write(MetricsWriter& w) const;

 private:
  struct Series {
    std::vector<std::uint64_t> buckets;  // non-cumulative counts per bound, plus +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  std::string name_, help_;
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<Labels, Series> series_;
};

// Bucket bounds for request and decision latencies, 50 µs to 10 s.
std::vector<double> latencyBuckets();

}  // namespace tessera::api
