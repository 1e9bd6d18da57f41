#include "api/metrics.h"

#include <cmath>
#include <cstdio>

namespace tessera::api {
namespace {

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::abs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void appendLabels(std::string& out, const Labels& labels) {
  if (labels.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first;
    out += "=\"";
    out += escapeLabelValue(labels[i].second);
    out += '"';
  }
  out += '}';
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void MetricsWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  for (char c : help) out_ += c == '\n' ? ' ' : c;
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void MetricsWriter::sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  appendLabels(out_, labels);
  out_ += ' ';
  out_ += formatValue(value);
  out_ += '\n';
}

CounterFamily::CounterFamily(std::string name, std::string help)
    : name_(std::move(name)), help_(std::move(help)) {}

void CounterFamily::add(const Labels& labels, double delta) {
  std::lock_guard lock(mu_);
  values_[labels] += delta;
}

double CounterFamily::value(const Labels& labels) const {
  std::lock_guard lock(mu_);
  const auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void CounterFamily::write(MetricsWriter& w) const {
  std::lock_guard lock(mu_);
  w.family(name_, "counter", help_);
  for (const auto& [labels, v] : values_) w.sample(name_, labels, v);
}

HistogramFamily::HistogramFamily(std::string name, std::string help, std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)) {}

void HistogramFamily::observe(const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  Series& s = series_[labels];
  if (s.buckets.empty()) s.buckets.assign(bounds_.size() + 1, 0);
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++s.buckets[i];
  s.sum += value;
  ++s.count;
}

std::uint64_t HistogramFamily::count(const Labels& labels) const {
  std::lock_guard lock(mu_);
  const auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

void HistogramFamily::write(MetricsWriter& w) const {
  std::lock_guard lock(mu_);
  w.family(name_, "histogram", help_);
  const std::string bucket = name_ + "_bucket";
  for (const auto& [labels, s] : series_) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      Labels withLe = labels;
      withLe.emplace_back("le", i < bounds_.size() ? formatValue(bounds_[i]) : "+Inf");
      w.sample(bucket, withLe, static_cast<double>(cumulative));
    }
    w.sample(name_ + "_sum", labels, s.sum);
    w.sample(name_ + "_count", labels, static_cast<double>(s.count));
  }
}

std::vector<double> latencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

}  // namespace tessera::api
