#pragma once
// A small PromQL reader for the deploy tests: which metric names does an expression read?
//
// It is not a parser. It walks the tokens and skips everything that is not a metric name:
// strings, label matchers ({...}, where only a __name__ matcher names a metric), ranges and
// subqueries ([...]), numbers and durations, Grafana variables ($x, ${x}), comments, label
// lists after by / without / on / ignoring / group_left / group_right, operators and
// keywords. An identifier followed by "(" is a function or an aggregation and must be one
// PromQL knows (a typo such as "rat(" is an error, not a metric). Whatever identifier is
// left is a metric name.

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "common/result.h"

namespace tessera::deploytest {

struct Selector {
  std::string metric;
  std::set<std::string> labels;  // label names matched in its {...}
};

struct PromqlNames {
  std::set<std::string> metrics;
  std::multimap<std::string, std::set<std::string>> selectors;  // metric -> labels matched
};

Result<PromqlNames> readPromql(std::string_view expr);

// Grafana's `label_values(expr, label)`: the metrics of `expr` (or of the whole query when it
// is not a label_values call).
Result<PromqlNames> readGrafanaVariableQuery(std::string_view query);

}  // namespace tessera::deploytest
