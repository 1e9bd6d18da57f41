#pragma once
// Reads a recommender's named arguments: every key must be known, every value in range, each
// given at most once. Errors name the recommender, the key and the accepted range.
//
//   ArgReader r("hpa", args);
//   double tol = r.nonNegative("tolerance", 0.1);
//   TESSERA_RETURN_IF_ERROR(r.finish());   // unknown keys, bad values
//
// Internal to the scale module.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace tessera::scale {

using RecommenderArgs = std::vector<std::pair<std::string, double>>;

class ArgReader {
 public:
  ArgReader(std::string_view owner, const RecommenderArgs& args);

  // The value given for key, if any; marks the key as known.
  std::optional<double> find(std::string_view key);
  // value > 0
  double positive(std::string_view key, double fallback);
  // value >= 0
  double nonNegative(std::string_view key, double fallback);
  // 0 < value <= 1
  double fraction(std::string_view key, double fallback);
  // value >= 1
  double atLeastOne(std::string_view key, double fallback);
  // 0 or 1
  bool flag(std::string_view key, bool fallback);

  // The first bad value, a duplicate or an unknown key, as an invalid-argument error.
  Result<void> finish();

 private:
  double checked(std::string_view key, double fallback, bool ok(double), std::string_view range);

  std::string owner_;
  const RecommenderArgs& args_;
  std::vector<std::string> known_;
  std::optional<Error> error_;
};

}  // namespace tessera::scale
