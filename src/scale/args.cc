#include "scale/args.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tessera::scale {

ArgReader::ArgReader(std::string_view owner, const RecommenderArgs& args)
    : owner_(owner), args_(args) {}

std::optional<double> ArgReader::find(std::string_view key) {
  known_.emplace_back(key);
  std::optional<double> found;
  for (const auto& [name, value] : args_) {
    if (name != key) continue;
    if (found && !error_) {
      error_ = Error::invalid(owner_ + " argument '" + name + "' is given twice");
    }
    found = value;
  }
  return found;
}

double ArgReader::checked(std::string_view key, double fallback, bool ok(double),
                          std::string_view range) {
  const std::optional<double> value = find(key);
  if (!value) return fallback;
  if (!std::isfinite(*value) || !ok(*value)) {
    if (!error_) {
      std::ostringstream msg;
      msg << owner_ << " argument '" << key << "' = " << *value << " is out of range (must be "
          << range << ")";
      error_ = Error::invalid(msg.str());
    }
    return fallback;
  }
  return *value;
}

double ArgReader::positive(std::string_view key, double fallback) {
  return checked(
      key, fallback, [](double v) { return v > 0; }, "> 0");
}

double ArgReader::nonNegative(std::string_view key, double fallback) {
  return checked(
      key, fallback, [](double v) { return v >= 0; }, ">= 0");
}

double ArgReader::fraction(std::string_view key, double fallback) {
  return checked(
      key, fallback, [](double v) { return v > 0 && v <= 1; }, "in (0, 1]");
}

double ArgReader::atLeastOne(std::string_view key, double fallback) {
  return checked(
      key, fallback, [](double v) { return v >= 1; }, ">= 1");
}

bool ArgReader::flag(std::string_view key, bool fallback) {
  return checked(
             key, fallback ? 1 : 0, [](double v) { return v == 0 || v == 1; }, "0 or 1") != 0;
}

Result<void> ArgReader::finish() {
  if (error_) return fail(*error_);
  for (const auto& [name, value] : args_) {
    if (std::find(known_.begin(), known_.end(), name) != known_.end()) continue;
    std::string list;
    std::vector<std::string> sorted = known_;
    std::sort(sorted.begin(), sorted.end());
    for (const std::string& k : sorted) list += (list.empty() ? "" : ", ") + k;
    return fail(Error::invalid("unknown " + owner_ + " argument '" + name +
                               "' (known: " + (list.empty() ? "none" : list) + ")"));
  }
  return {};
}

}  // namespace tessera::scale
