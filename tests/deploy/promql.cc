#include "promql.h"

#include <cctype>

namespace tessera::deploytest {
namespace {

const std::set<std::string, std::less<>>& functions() {
  static const std::set<std::string, std::less<>> names = {
      "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
      "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
      "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
      "delta", "deriv", "double_exponential_smoothing", "exp", "floor", "histogram_avg",
      "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
      "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase", "irate",
      "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time",
      "max_over_time", "min_over_time", "minute", "month", "pi", "predict_linear",
      "present_over_time", "quantile_over_time", "rad", "rate", "resets", "round", "scalar", "sgn",
      "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc", "sort_desc", "sqrt",
      "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp",
      "vector", "year",
      // aggregation operators
      "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
      "topk", "quantile", "limitk", "limit_ratio"};
  return names;
}

const std::set<std::string, std::less<>>& aggregations() {
  static const std::set<std::string, std::less<>> names = {
      "sum",   "min",          "max",     "avg",  "group",    "stddev", "stdvar",
      "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"};
  return names;
}

bool identStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool identChar(char c) {
  return identStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class Reader {
 public:
  explicit Reader(std::string_view e) : e_(e) {}

  Result<PromqlNames> run() {
    while (true) {
      skipSpace();
      if (i_ >= e_.size()) break;
      const char c = e_[i_];
      if (c == '"' || c == '\'' || c == '`') {
        TESSERA_RETURN_IF_ERROR(skipString());
      } else if (c == '{') {
        auto labels = readMatchers();
        if (!labels) return fail(labels.error());
        if (!lastMetric_.empty()) {
          out_.selectors.emplace(lastMetric_, *labels);
        }
        lastMetric_.clear();
      } else if (c == '[') {
        TESSERA_RETURN_IF_ERROR(skipPast(']'));
        lastMetric_.clear();
      } else if (c == '$') {
        skipVariable();
        lastMetric_.clear();
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i_ + 1 < e_.size() &&
                  std::isdigit(static_cast<unsigned char>(e_[i_ + 1])))) {
        skipNumber();
        lastMetric_.clear();
      } else if (identStart(c)) {
        TESSERA_RETURN_IF_ERROR(identifier());
      } else {
        ++i_;  // operators, parentheses, commas
        lastMetric_.clear();
      }
    }
    return out_;
  }

 private:
  void skipSpace() {
    while (i_ < e_.size()) {
      if (std::isspace(static_cast<unsigned char>(e_[i_]))) {
        ++i_;
      } else if (e_[i_] == '#') {
        while (i_ < e_.size() && e_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  Result<void> skipString() {
    const char q = e_[i_++];
    while (i_ < e_.size() && e_[i_] != q) {
      if (e_[i_] == '\\' && q != '`') ++i_;
      ++i_;
    }
    if (i_ >= e_.size()) return fail(Error::invalid("unterminated string in: " + std::string(e_)));
    ++i_;
    return {};
  }

  Result<void> skipPast(char close) {
    while (i_ < e_.size() && e_[i_] != close) ++i_;
    if (i_ >= e_.size()) {
      return fail(Error::invalid(std::string("missing '") + close + "' in: " + std::string(e_)));
    }
    ++i_;
    return {};
  }

  void skipVariable() {
    ++i_;
    if (i_ < e_.size() && e_[i_] == '{') {
      while (i_ < e_.size() && e_[i_] != '}') ++i_;
      if (i_ < e_.size()) ++i_;
      return;
    }
    while (i_ < e_.size() && identChar(e_[i_])) ++i_;
  }

  void skipNumber() {
    // Numbers, durations (5m, 1h30m) and hex: letters and digits run together.
    while (i_ < e_.size() && (std::isalnum(static_cast<unsigned char>(e_[i_])) || e_[i_] == '.' ||
                              ((e_[i_] == '+' || e_[i_] == '-') && i_ > 0 &&
                               (e_[i_ - 1] == 'e' || e_[i_ - 1] == 'E')))) {
      ++i_;
    }
  }

  std::string readIdent() {
    const std::size_t start = i_;
    while (i_ < e_.size() && identChar(e_[i_])) ++i_;
    return std::string(e_.substr(start, i_ - start));
  }

  char peek() {
    skipSpace();
    return i_ < e_.size() ? e_[i_] : '\0';
  }

  // {a="x", b=~"y"}: the label names; a __name__ matcher's value is a metric.
  Result<std::set<std::string>> readMatchers() {
    ++i_;  // {
    std::set<std::string> labels;
    while (true) {
      const char c = peek();
      if (c == '}') {
        ++i_;
        return labels;
      }
      if (c == ',') {
        ++i_;
        continue;
      }
      if (c == '\0') return fail(Error::invalid("missing '}' in: " + std::string(e_)));
      if (c == '"' || c == '\'' || c == '`') {
        // A quoted metric name (PromQL 3: {"name"}).
        const std::size_t start = i_ + 1;
        TESSERA_RETURN_IF_ERROR(skipString());
        out_.metrics.insert(std::string(e_.substr(start, i_ - 1 - start)));
        continue;
      }
      if (!identStart(c)) {
        return fail(Error::invalid("unexpected '" + std::string(1, c) +
                                   "' in a label matcher: " + std::string(e_)));
      }
      const std::string label = readIdent();
      skipSpace();
      while (i_ < e_.size() && (e_[i_] == '=' || e_[i_] == '!' || e_[i_] == '~')) ++i_;
      skipSpace();
      if (i_ >= e_.size() || (e_[i_] != '"' && e_[i_] != '\'' && e_[i_] != '`')) {
        return fail(Error::invalid("label " + label +
                                   " is not matched against a string in: " + std::string(e_)));
      }
      const std::size_t start = i_ + 1;
      TESSERA_RETURN_IF_ERROR(skipString());
      if (label == "__name__") {
        out_.metrics.insert(std::string(e_.substr(start, i_ - 1 - start)));
      } else {
        labels.insert(label);
      }
    }
  }

  Result<void> identifier() {
    const std::string word = readIdent();
    const std::string w = lower(word);
    lastMetric_.clear();
    if (w == "by" || w == "without" || w == "on" || w == "ignoring" || w == "group_left" ||
        w == "group_right") {
      if (peek() == '(') TESSERA_RETURN_IF_ERROR(skipPast(')'));
      return {};
    }
    if (w == "and" || w == "or" || w == "unless" || w == "bool" || w == "atan2" || w == "inf" ||
        w == "nan") {
      return {};
    }
    if (w == "offset") {
      if (peek() == '-') ++i_;
      skipSpace();
      skipNumber();
      return {};
    }
    const char next = peek();
    if (next == '(' ||
        (aggregations().contains(word) && (startsWord("by") || startsWord("without")))) {
      if (!functions().contains(word)) {
        return fail(
            Error::invalid("unknown PromQL function \"" + word + "\" in: " + std::string(e_)));
      }
      return {};
    }
    out_.metrics.insert(word);
    out_.selectors.emplace(word, std::set<std::string>{});
    lastMetric_ = word;
    return {};
  }

  bool startsWord(std::string_view w) {
    if (e_.substr(i_, w.size()) != w) return false;
    return i_ + w.size() >= e_.size() || !identChar(e_[i_ + w.size()]);
  }

  std::string_view e_;
  std::size_t i_ = 0;
  std::string lastMetric_;
  PromqlNames out_;
};

}  // namespace

Result<PromqlNames> readPromql(std::string_view expr) {
  return Reader(expr).run();
}

Result<PromqlNames> readGrafanaVariableQuery(std::string_view query) {
  std::string_view q = query;
  while (!q.empty() && std::isspace(static_cast<unsigned char>(q.front()))) q.remove_prefix(1);
  constexpr std::string_view kLabelValues = "label_values(";
  if (!q.starts_with(kLabelValues)) return readPromql(query);
  q.remove_prefix(kLabelValues.size());
  const auto close = q.rfind(')');
  if (close == std::string_view::npos) {
    return fail(Error::invalid("label_values without ')': " + std::string(query)));
  }
  q = q.substr(0, close);
  const auto comma = q.rfind(',');
  if (comma == std::string_view::npos) return PromqlNames{};  // label_values(label): no metric
  return readPromql(q.substr(0, comma));
}

}  // namespace tessera::deploytest
