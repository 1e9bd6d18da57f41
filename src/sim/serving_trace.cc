#include "sim/serving_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "scale/number_text.h"
#include "sim/csv.h"

namespace tessera::sim {
namespace {

using scale::shortNumber;

constexpr std::int64_t kMaxTokens = std::numeric_limits<std::int32_t>::max();

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

// Shifts arrivals to start at 0, scales them and sorts by arrival (stable: file order among
// equal times).
Result<ServingTrace> finish(ServingTrace trace, std::vector<Micros> raw, double timeScale,
                            const std::string& label) {
  if (!(timeScale > 0) || !std::isfinite(timeScale)) {
    return fail(Error::invalid("time scale must be a number > 0"));
  }
  if (trace.requests.empty()) return fail(Error::invalid(label + ": no requests"));
  const auto [lo, hi] = std::minmax_element(raw.begin(), raw.end());
  const Micros first = *lo;
  if (auto ok = checkServingSpan(static_cast<double>(*hi - first) / 1e6 * timeScale,
                                 label + " at time scale " + shortNumber(timeScale));
      !ok) {
    return fail(ok.error());
  }
  for (std::size_t i = 0; i < raw.size(); ++i) {
    trace.requests[i].arrivalUs = std::llround(static_cast<double>(raw[i] - first) * timeScale);
  }
  std::stable_sort(
      trace.requests.begin(), trace.requests.end(),
      [](const ServingRequest& a, const ServingRequest& b) { return a.arrivalUs < b.arrivalUs; });
  return trace;
}

std::string baseName(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::size_t dot = name.find_last_of('.');
  if (dot != std::string_view::npos && dot > 0) name = name.substr(0, dot);
  return std::string(name);
}

}  // namespace

bool parseDateTime(std::string_view s, Micros& out) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (s.size() < 19 || !digits(s, 0, 4, year) || s[4] != '-' || !digits(s, 5, 2, month) ||
      s[7] != '-' || !digits(s, 8, 2, day) || (s[10] != ' ' && s[10] != 'T') ||
      !digits(s, 11, 2, hour) || s[13] != ':' || !digits(s, 14, 2, minute) || s[16] != ':' ||
      !digits(s, 17, 2, second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  std::size_t i = 19;
  std::int64_t micros = 0;
  if (i < s.size() && s[i] == '.') {
    std::int64_t scale = 100000;
    const std::size_t first = ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      micros += (s[i] - '0') * scale;
      scale /= 10;
    }
    if (i == first) return false;  // a '.' with no digits
  }
  // An optional UTC offset, as the Azure 2024 traces write it ("+00:00"): Z, ±HH, ±HHMM or
  // ±HH:MM. The time is moved to UTC, so rows with different offsets still order right.
  std::int64_t offsetMinutes = 0;
  if (i < s.size()) {
    if (s[i] == 'Z' || s[i] == 'z') {
      ++i;
    } else if (s[i] == '+' || s[i] == '-') {
      const int sign = s[i] == '-' ? -1 : 1;
      int oh = 0, om = 0;
      const std::string_view rest = s.substr(i + 1);
      const bool read =
          (rest.size() == 2 && digits(rest, 0, 2, oh)) ||
          (rest.size() == 4 && digits(rest, 0, 2, oh) && digits(rest, 2, 2, om)) ||
          (rest.size() == 5 && digits(rest, 0, 2, oh) && rest[2] == ':' && digits(rest, 3, 2, om));
      if (!read || oh > 23 || om > 59) return false;
      offsetMinutes = sign * (oh * 60 + om);
      i = s.size();
    }
    if (i != s.size()) return false;
  }
  const std::int64_t days =
      daysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  out = ((days * 24 + hour) * 60 + minute - offsetMinutes) * 60'000'000LL + second * 1'000'000LL +
        micros;
  return true;
}

Result<ServingTrace> parseAzureLlmTrace(std::string_view text, std::string label,
                                        double timeScale) {
  auto table = parseCsv(text, label);
  if (!table) return fail(table.error());
  auto ts = table->requireColumn("TIMESTAMP");
  if (!ts) return fail(ts.error());
  auto ctx = table->requireColumn("ContextTokens");
  if (!ctx) return fail(ctx.error());
  auto gen = table->requireColumn("GeneratedTokens");
  if (!gen) return fail(gen.error());
  ServingTrace trace;
  trace.name = baseName(label);
  trace.requests.reserve(table->rows.size());
  std::vector<Micros> raw;
  raw.reserve(table->rows.size());
  for (const CsvRow& row : table->rows) {
    Micros at = 0;
    const std::string& when = row.fields[static_cast<std::size_t>(*ts)];
    if (!parseDateTime(when, at)) {
      return fail(table->error(
          row, *ts,
          "expected a time like 2023-11-16 18:15:46.6805900 (a UTC offset such as +00:00 may "
          "follow), got \"" +
              when + "\""));
    }
    auto in = table->integer(row, *ctx, 0, kMaxTokens);
    if (!in) return fail(in.error());
    auto out = table->integer(row, *gen, 0, kMaxTokens);
    if (!out) return fail(out.error());
    raw.push_back(at);
    trace.requests.push_back(
        {0, static_cast<std::int32_t>(*in), static_cast<std::int32_t>(*out), row.line});
  }
  return finish(std::move(trace), std::move(raw), timeScale, table->label);
}

Result<ServingTrace> parseMooncakeTrace(std::string_view text, std::string label,
                                        double timeScale) {
  ServingTrace trace;
  trace.name = baseName(label);
  std::vector<Micros> raw;
  int lineNo = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = label + ":" + std::to_string(lineNo) + ": ";
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return fail(Error::invalid(where + "not a JSON object"));
    if (!j.is_object()) return fail(Error::invalid(where + "expected a JSON object"));
    // Integers, or numbers with an integral value (some writers print 12.0).
    auto integer = [&](const char* field, std::int64_t max) -> Result<std::int64_t> {
      const auto it = j.find(field);
      if (it == j.end()) return fail(Error::invalid(where + "field " + field + ": missing"));
      const nlohmann::json& v = *it;
      if (v.is_number_integer() || v.is_number_unsigned()) {
        if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
          return fail(Error::invalid(where + "field " + field + ": too large, got " + v.dump()));
        }
        const auto x = v.get<std::int64_t>();
        if (x < 0 || x > max) {
          return fail(Error::invalid(where + "field " + field + ": must be in 0.." +
                                     std::to_string(max) + ", got " + v.dump()));
        }
        return x;
      }
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (d >= 0 && d <= static_cast<double>(max) && d == std::floor(d)) {
          return static_cast<std::int64_t>(d);
        }
      }
      return fail(Error::invalid(where + "field " + field +
                                 ": expected a non-negative integer, got " + v.dump()));
    };
    // Milliseconds; a fraction (some converters write one) is kept to the microsecond.
    // The bound keeps every arrival and every difference of two within 64 bits of microseconds.
    constexpr double kMaxMs = 4e15;
    const auto t = j.find("timestamp");
    if (t == j.end()) return fail(Error::invalid(where + "field timestamp: missing"));
    const double ms = t->is_number() ? t->get<double>() : -1;
    if (!(ms >= 0 && ms <= kMaxMs)) {
      return fail(Error::invalid(
          where +
          "field timestamp: expected a non-negative number of milliseconds (at most 4e15), got " +
          t->dump()));
    }
    const Micros atUs = std::llround(ms * 1000);
    auto in = integer("input_length", kMaxTokens);
    if (!in) return fail(in.error());
    auto out = integer("output_length", kMaxTokens);
    if (!out) return fail(out.error());
    std::vector<std::uint32_t> blocks;
    if (const auto h = j.find("hash_ids"); h != j.end()) {
      if (!h->is_array()) {
        return fail(Error::invalid(where + "field hash_ids: expected a list, got " + h->dump()));
      }
      blocks.reserve(h->size());
      for (const auto& id : *h) {
        if (!id.is_number_unsigned() || id.get<std::uint64_t>() > 0xffffffffu) {
          return fail(Error::invalid(
              where + "field hash_ids: expected non-negative integers, got " + id.dump()));
        }
        blocks.push_back(static_cast<std::uint32_t>(id.get<std::uint64_t>()));
      }
    }
    raw.push_back(atUs);
    trace.requests.push_back({0, static_cast<std::int32_t>(*in), static_cast<std::int32_t>(*out),
                              lineNo, std::move(blocks)});
  }
  return finish(std::move(trace), std::move(raw), timeScale, label);
}

Result<std::vector<QpsPoint>> parseQpsSeries(std::string_view text, const std::string& label) {
  auto table = parseCsv(text, label);
  if (!table) return fail(table.error());
  int ts = table->column("timestamp_anon");
  if (ts < 0) ts = table->column("timestamp");
  if (ts < 0) {
    return fail(Error::invalid(label + ": no timestamp_anon or timestamp column in the header"));
  }
  auto value = table->requireColumn("value");
  if (!value) return fail(value.error());
  auto number = [&](const CsvRow& row, int column, const char* what) {
    return table->nonNegative(row, column, what);
  };
  std::map<double, double> sum;
  for (const CsvRow& row : table->rows) {
    auto at = number(row, ts, "seconds");
    if (!at) return fail(at.error());
    auto v = number(row, *value, "requests per second");
    if (!v) return fail(v.error());
    sum[*at] += *v;
  }
  if (sum.size() < 2) return fail(Error::invalid(label + ": a QPS series needs two timestamps"));
  std::vector<QpsPoint> out;
  out.reserve(sum.size());
  const double first = sum.begin()->first;
  for (const auto& [at, v] : sum) out.push_back({at - first, v});
  return out;
}

Result<std::string> readCsvOrTarGz(const std::string& path) {
  if (!path.ends_with(".tar.gz") && !path.ends_with(".tgz")) return readTextFile(path);
  if (path.find('\'') != std::string::npos) {
    return fail(Error::invalid(path + ": a path with a single quote cannot be passed to tar"));
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return fail(Error::notFound(path + ": no such file"));
  // GenTD26's archives carry macOS metadata entries; only *.csv members are read.
  const std::string command =
      "tar -xzOf '" + path + "' --wildcards '*.csv' --exclude '._*' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return fail(Error::invalid(path + ": cannot run tar to read the archive"));
  std::string text;
  char buf[65536];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0 || text.empty()) {
    return fail(Error::invalid(path + ": tar could not read a .csv member from the archive"));
  }
  return text;
}

Result<std::vector<QpsPoint>> readQpsSeries(const std::string& path) {
  auto text = readCsvOrTarGz(path);
  if (!text) return fail(text.error());
  return parseQpsSeries(*text, path);
}

Result<void> scaleTokenLengths(ServingTrace& trace, double prompt, double output) {
  for (const double m : {prompt, output}) {
    if (!(m > 0) || !std::isfinite(m)) {
      return fail(Error::invalid("token-length multiples must be numbers > 0"));
    }
  }
  if (prompt == 1 && output == 1) return {};  // as recorded (whatever lengths the reader took)
  constexpr double kMostTokens = 1e7;
  const auto scaled = [](std::int32_t tokens, double m) {
    if (tokens <= 0) return 0.0;
    return std::max(1.0, std::round(tokens * m));
  };
  for (const ServingRequest& r : trace.requests) {
    if (scaled(r.inputTokens, prompt) > kMostTokens ||
        scaled(r.outputTokens, output) > kMostTokens) {
      return fail(Error::invalid("trace " + trace.name + " line " + std::to_string(r.line) +
                                 ": the scaled lengths exceed 10 million tokens"));
    }
  }
  for (ServingRequest& r : trace.requests) {
    r.inputTokens = static_cast<std::int32_t>(scaled(r.inputTokens, prompt));
    r.outputTokens = static_cast<std::int32_t>(scaled(r.outputTokens, output));
    const auto blocks = static_cast<std::size_t>(
        (static_cast<std::int64_t>(r.inputTokens) + kMooncakeBlockTokens - 1) /
        kMooncakeBlockTokens);
    if (r.blockHashes.size() > blocks) r.blockHashes.resize(blocks);
  }
  return {};
}

Result<ServingTrace> shapeTrace(const std::vector<QpsPoint>& series, const ServingTrace& tokens,
                                const QpsShapeOptions& o, std::string name) {
  if (series.size() < 2) return fail(Error::invalid("a QPS series needs two points"));
  if (tokens.requests.empty())
    return fail(Error::invalid("no requests to draw token lengths from"));
  if (!(o.meanRatePerSec > 0) || !std::isfinite(o.meanRatePerSec)) {
    return fail(Error::invalid("the mean request rate must be a number > 0"));
  }
  if (!(o.spanSeconds >= 0) || !std::isfinite(o.spanSeconds)) {
    return fail(Error::invalid("the span must be a number >= 0"));
  }
  const double recorded = series.back().timeS;
  const double stretch = o.spanSeconds > 0 ? o.spanSeconds / recorded : 1.0;
  // Integral of the series over its span (each value held until the next point).
  double area = 0;
  for (std::size_t i = 0; i + 1 < series.size(); ++i) {
    area += series[i].qps * (series[i + 1].timeS - series[i].timeS) * stretch;
  }
  if (!(area > 0)) return fail(Error::invalid("the QPS series is zero throughout"));
  const double scale = o.meanRatePerSec * recorded * stretch / area;
  TESSERA_RETURN_IF_ERROR(checkServingSpan(recorded * stretch, "the shaped QPS series"));
  if (o.meanRatePerSec * recorded * stretch > kMaxServingRequests) {
    return fail(Error::invalid("the shaped QPS series would hold about " +
                               shortNumber(o.meanRatePerSec * recorded * stretch) +
                               " requests (mean rate " + shortNumber(o.meanRatePerSec) +
                               "/s over " + shortNumber(recorded * stretch) + " s); at most " +
                               shortNumber(kMaxServingRequests)));
  }
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> unit(1.0);
  std::uniform_int_distribution<std::size_t> pick(0, tokens.requests.size() - 1);
  ServingTrace t;
  t.name = std::move(name);
  for (std::size_t i = 0; i + 1 < series.size(); ++i) {
    const double rate = series[i].qps * scale;
    if (rate <= 0) continue;
    const double from = series[i].timeS * stretch;
    const double to = series[i + 1].timeS * stretch;
    for (double at = from + unit(rng) / rate; at < to; at += unit(rng) / rate) {
      ServingRequest r = tokens.requests[pick(rng)];
      r.arrivalUs = static_cast<Micros>(std::llround(at * 1e6));
      r.line = static_cast<int>(t.requests.size()) + 1;
      t.requests.push_back(std::move(r));
    }
  }
  if (t.requests.empty()) return fail(Error::invalid("the QPS series drew no requests"));
  const Micros first = t.requests.front().arrivalUs;
  for (ServingRequest& r : t.requests) r.arrivalUs -= first;
  return t;
}

Result<void> checkServingSpan(double spanSeconds, std::string_view what) {
  if (!std::isfinite(spanSeconds) || spanSeconds > kMaxServingSpanSeconds) {
    const std::string days =
        std::isfinite(spanSeconds) ? shortNumber(spanSeconds / 86'400) : std::string("endless");
    return fail(Error::invalid(std::string(what) + " spans " + days +
                               " days; the serving simulation replays at most " +
                               shortNumber(kMaxServingSpanSeconds / 86'400) + " days"));
  }
  return {};
}

Result<ServingTraceFormat> servingTraceFormatOf(std::string_view path) {
  if (path.ends_with(".csv")) return ServingTraceFormat::kAzure;
  if (path.ends_with(".jsonl") || path.ends_with(".json")) return ServingTraceFormat::kMooncake;
  return fail(Error::invalid(std::string(path) +
                             ": cannot tell the trace format from the name (.csv: azure, "
                             ".jsonl: mooncake); pass --format"));
}

Result<ServingTrace> readServingTrace(const std::string& path, ServingTraceFormat format,
                                      double timeScale) {
  auto text = readTextFile(path);
  if (!text) return fail(text.error());
  return format == ServingTraceFormat::kAzure ? parseAzureLlmTrace(*text, path, timeScale)
                                              : parseMooncakeTrace(*text, path, timeScale);
}

}  // namespace tessera::sim
